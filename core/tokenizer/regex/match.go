package regex

import (
	"unicode/utf8"
)

// cont is what remains to match after the current sequence: a linked list
// of sequences. Continuations live on the Go stack of the matcher's calls.
type cont struct {
	seq  []*node
	next *cont
}

// maxSteps bounds backtracking per match attempt so a pathological input
// cannot hang the caller; the reference patterns need a few steps per rune.
const maxSteps = 1 << 22

type matcher struct {
	s     string
	steps int
}

// seq matches nodes at pos then the continuation k; it returns the end of
// the whole match or -1.
func (m *matcher) seq(nodes []*node, pos int, k *cont) int {
	for {
		m.steps++
		if m.steps > maxSteps {
			return -1
		}
		if len(nodes) == 0 {
			if k == nil {
				return pos
			}
			nodes, k = k.seq, k.next
			continue
		}
		n := nodes[0]
		switch n.kind {
		case kSet:
			if pos >= len(m.s) {
				return -1
			}
			r, size := rune(m.s[pos]), 1
			if r >= utf8.RuneSelf {
				r, size = utf8.DecodeRuneInString(m.s[pos:])
			}
			if !n.set.match(r) {
				return -1
			}
			pos += size
			nodes = nodes[1:]
		case kBegin:
			if pos != 0 {
				return -1
			}
			nodes = nodes[1:]
		case kProgress:
			if pos == n.from {
				return -1
			}
			nodes = nodes[1:]
		case kEnd:
			if pos != len(m.s) {
				return -1
			}
			nodes = nodes[1:]
		case kGroup:
			if len(nodes) > 1 {
				k = &cont{nodes[1:], k}
			}
			nodes = n.seq
		case kAlt:
			rest := k
			if len(nodes) > 1 {
				rest = &cont{nodes[1:], k}
			}
			for i, alt := range n.alts {
				if !n.firsts[i].canStart(m.s, pos) {
					continue
				}
				if end := m.seq(alt, pos, rest); end >= 0 {
					return end
				}
			}
			return -1
		case kLook:
			ok := m.seq(n.seq, pos, nil) >= 0
			if ok == n.neg {
				return -1
			}
			nodes = nodes[1:]
		case kRepeat:
			if n.sub.kind == kSet {
				return m.repeatSet(n, nodes[1:], pos, k)
			}
			return m.repeat(n, nodes[1:], pos, k)
		}
	}
}

// repeatSet is the fast path for a repeated character set: count the run,
// then give characters back one at a time (greedy) or take them one at a
// time (lazy).
func (m *matcher) repeatSet(n *node, rest []*node, pos int, k *cont) int {
	set := n.sub.set
	start := pos
	count := 0
	limit := n.max
	if n.lazy {
		limit = n.min
	}
	for (limit < 0 || count < limit) && pos < len(m.s) {
		r, size := rune(m.s[pos]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(m.s[pos:])
		}
		if !set.match(r) {
			break
		}
		pos += size
		count++
	}
	if count < n.min {
		return -1
	}
	if n.lazy {
		for {
			if end := m.seq(rest, pos, k); end >= 0 {
				return end
			}
			if (n.max >= 0 && count >= n.max) || pos >= len(m.s) {
				return -1
			}
			r, size := utf8.DecodeRuneInString(m.s[pos:])
			if !set.match(r) {
				return -1
			}
			pos += size
			count++
		}
	}
	for {
		if end := m.seq(rest, pos, k); end >= 0 {
			return end
		}
		if count == n.min || pos == start {
			return -1
		}
		_, size := utf8.DecodeLastRuneInString(m.s[:pos])
		pos -= size
		count--
	}
}

// repeat handles a repeated group: one more iteration first (greedy) or
// the rest first (lazy). An optional iteration must consume input, so an
// empty-matching group cannot loop forever. Groups under quantifiers are
// rare in tokenizer patterns, so this path allocates freely.
func (m *matcher) repeat(n *node, rest []*node, pos int, k *cont) int {
	next := &node{kind: kRepeat, sub: n.sub, min: max(n.min-1, 0), max: dec(n.max), lazy: n.lazy}
	if n.min > 0 {
		return m.seq([]*node{n.sub, next}, pos, &cont{rest, k})
	}
	if n.max == 0 {
		return m.seq(rest, pos, k)
	}
	one := func() int {
		return m.seq([]*node{n.sub, {kind: kProgress, from: pos}, next}, pos, &cont{rest, k})
	}
	if n.lazy {
		if end := m.seq(rest, pos, k); end >= 0 {
			return end
		}
		return one()
	}
	if end := one(); end >= 0 {
		return end
	}
	return m.seq(rest, pos, k)
}

func dec(n int) int {
	if n < 0 {
		return n
	}
	return n - 1
}

// FindAll calls f with the [start, end) of each successive non-overlapping
// match, leftmost-first, like Rust's find_iter and JavaScript's matchAll.
// An empty match advances by one character.
func (re *Regexp) FindAll(s string, f func(start, end int)) {
	if re.fast != nil {
		// Its patterns never match empty.
		for pos := 0; pos < len(s); {
			if end := re.fast(s, pos); end > pos {
				f(pos, end)
				pos = end
			} else if s[pos] < utf8.RuneSelf {
				pos++
			} else {
				_, size := utf8.DecodeRuneInString(s[pos:])
				pos += size
			}
		}
		return
	}
	m := matcher{s: s}
	for pos := 0; pos <= len(s); {
		m.steps = 0
		end := -1
		if re.first.canStart(s, pos) {
			end = m.seq(re.prog, pos, nil)
		}
		if end < 0 {
			if pos == len(s) {
				return
			}
			if s[pos] < utf8.RuneSelf {
				pos++
			} else {
				_, size := utf8.DecodeRuneInString(s[pos:])
				pos += size
			}
			continue
		}
		f(pos, end)
		if end == pos {
			if pos == len(s) {
				return
			}
			_, size := utf8.DecodeRuneInString(s[pos:])
			pos += size
			continue
		}
		pos = end
	}
}
