// Package regex is a small backtracking regular-expression engine for the
// pre-tokenizer patterns of Hugging Face tokenizers. Those patterns are
// written for Oniguruma (Rust) and JavaScript and use negative lookahead
// (`\s+(?!\S)`), which Go's regexp lacks. The engine supports what the
// patterns use: alternation, non-capturing groups with the i flag, character
// classes with \p{..} categories, \s \d \w, the quantifiers * + ? {m,n}
// (greedy or lazy) and lookahead. Matching is leftmost-first with
// backtracking, the semantics of the reference engines.
package regex

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

type kind uint8

const (
	kSet      kind = iota // one character from a set
	kAlt                  // alternatives, each a sequence
	kRepeat               // sub repeated min..max times
	kLook                 // lookahead (pos) or negative lookahead
	kGroup                // a sequence (group with a quantifier)
	kBegin                // ^ (start of input)
	kEnd                  // $ (end of input)
	kProgress             // fails unless the input moved past from
)

type node struct {
	kind     kind
	set      *charSet
	alts     [][]*node
	sub      *node
	min, max int // max < 0: unbounded
	lazy     bool
	neg      bool
	seq      []*node
	from     int
	firsts   []firstInfo // per alternative of a kAlt
}

// Regexp is a compiled pattern; safe for concurrent use.
type Regexp struct {
	src   string
	prog  []*node
	first firstInfo
	fast  func(s string, i int) int // a hand-written matcher for this pattern (fast.go), or nil
}

// String returns the source pattern.
func (re *Regexp) String() string { return re.src }

// Compile parses a pattern.
func Compile(pattern string) (*Regexp, error) {
	p := &parser{src: pattern}
	alt, err := p.alternation(false)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", pattern, err)
	}
	if p.pos < len(p.src) {
		return nil, fmt.Errorf("regex %q: unexpected %q at offset %d", pattern, p.src[p.pos], p.pos)
	}
	annotate(alt)
	re := &Regexp{src: pattern, prog: alt, first: seqFirst(alt)}
	re.fast = fastMatchers[pattern]
	return re, nil
}

// MustCompile is Compile that panics; for patterns fixed in code.
func MustCompile(pattern string) *Regexp {
	re, err := Compile(pattern)
	if err != nil {
		panic(err)
	}
	return re
}

type parser struct {
	src  string
	pos  int
	fold bool // inside (?i:...)
}

func (p *parser) more() bool { return p.pos < len(p.src) }
func (p *parser) peek() byte { return p.src[p.pos] }

// alternation parses a|b|c up to ')' (inGroup) or the end; a single
// alternative is returned as its sequence.
func (p *parser) alternation(inGroup bool) ([]*node, error) {
	var alts [][]*node
	for {
		seq, err := p.sequence()
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		if p.more() && p.peek() == '|' {
			p.pos++
			continue
		}
		break
	}
	if inGroup {
		if !p.more() || p.peek() != ')' {
			return nil, fmt.Errorf("missing ) at offset %d", p.pos)
		}
		p.pos++
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return []*node{{kind: kAlt, alts: alts}}, nil
}

func (p *parser) sequence() ([]*node, error) {
	var seq []*node
	for p.more() {
		c := p.peek()
		if c == '|' || c == ')' {
			break
		}
		atom, err := p.atom()
		if err != nil {
			return nil, err
		}
		atom, err = p.quantifier(atom)
		if err != nil {
			return nil, err
		}
		seq = append(seq, atom)
	}
	return seq, nil
}

func (p *parser) atom() (*node, error) {
	c := p.peek()
	switch c {
	case '(':
		p.pos++
		if strings.HasPrefix(p.src[p.pos:], "?:") {
			p.pos += 2
			return p.group()
		}
		if strings.HasPrefix(p.src[p.pos:], "?i:") {
			p.pos += 3
			saved := p.fold
			p.fold = true
			n, err := p.group()
			p.fold = saved
			return n, err
		}
		if strings.HasPrefix(p.src[p.pos:], "?=") || strings.HasPrefix(p.src[p.pos:], "?!") {
			neg := p.src[p.pos+1] == '!'
			p.pos += 2
			seq, err := p.alternation(true)
			if err != nil {
				return nil, err
			}
			return &node{kind: kLook, neg: neg, seq: seq}, nil
		}
		if p.more() && p.peek() == '?' {
			return nil, fmt.Errorf("unsupported group syntax at offset %d", p.pos)
		}
		// A capturing group matches like a non-capturing one here: only
		// the overall match is used.
		return p.group()
	case '[':
		return p.class()
	case '.':
		p.pos++
		return &node{kind: kSet, set: newSet(true, []rune{'\n', '\n'}, nil, false)}, nil
	case '^':
		p.pos++
		return &node{kind: kBegin}, nil
	case '$':
		p.pos++
		return &node{kind: kEnd}, nil
	case '\\':
		s, err := p.escape(false)
		if err != nil {
			return nil, err
		}
		return &node{kind: kSet, set: s}, nil
	case '*', '+', '?', '{':
		if c == '{' && !p.isQuantifier() {
			break
		}
		return nil, fmt.Errorf("nothing to repeat at offset %d", p.pos)
	}
	r, size := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += size
	return &node{kind: kSet, set: literal(r, p.fold)}, nil
}

func (p *parser) group() (*node, error) {
	seq, err := p.alternation(true)
	if err != nil {
		return nil, err
	}
	if len(seq) == 1 {
		return seq[0], nil
	}
	return &node{kind: kGroup, seq: seq}, nil
}

func (p *parser) isQuantifier() bool {
	rest := p.src[p.pos:]
	end := strings.IndexByte(rest, '}')
	if end < 0 {
		return false
	}
	body := rest[1:end]
	lo, hi, ok := strings.Cut(body, ",")
	if _, err := strconv.Atoi(lo); err != nil {
		return false
	}
	if ok && hi != "" {
		if _, err := strconv.Atoi(hi); err != nil {
			return false
		}
	}
	return true
}

func (p *parser) quantifier(atom *node) (*node, error) {
	if !p.more() {
		return atom, nil
	}
	min, max := -1, -1
	switch p.peek() {
	case '*':
		min, max = 0, -1
		p.pos++
	case '+':
		min, max = 1, -1
		p.pos++
	case '?':
		min, max = 0, 1
		p.pos++
	case '{':
		if !p.isQuantifier() {
			return atom, nil
		}
		end := p.pos + strings.IndexByte(p.src[p.pos:], '}')
		lo, hi, comma := strings.Cut(p.src[p.pos+1:end], ",")
		min, _ = strconv.Atoi(lo)
		switch {
		case !comma:
			max = min
		case hi == "":
			max = -1
		default:
			max, _ = strconv.Atoi(hi)
		}
		if max >= 0 && max < min {
			return nil, fmt.Errorf("bad repeat {%d,%d}", min, max)
		}
		p.pos = end + 1
	default:
		return atom, nil
	}
	if atom.kind == kLook || atom.kind == kBegin || atom.kind == kEnd {
		return nil, fmt.Errorf("cannot repeat an assertion at offset %d", p.pos)
	}
	n := &node{kind: kRepeat, sub: atom, min: min, max: max}
	if p.more() && p.peek() == '?' {
		n.lazy = true
		p.pos++
	} else if p.more() && p.peek() == '+' {
		return nil, fmt.Errorf("possessive quantifiers are not supported (offset %d)", p.pos)
	}
	return n, nil
}

// escape parses a backslash sequence into a set. inClass: inside [...].
func (p *parser) escape(inClass bool) (*charSet, error) {
	p.pos++ // the backslash
	if !p.more() {
		return nil, fmt.Errorf("trailing backslash")
	}
	c := p.peek()
	p.pos++
	switch c {
	case 's', 'S':
		return newSet(c == 'S', nil, []*unicode.RangeTable{unicode.White_Space}, false), nil
	case 'd', 'D':
		return newSet(c == 'D', []rune{'0', '9'}, nil, false), nil
	case 'w', 'W':
		return newSet(c == 'W', []rune{'0', '9', 'A', 'Z', '_', '_', 'a', 'z'}, nil, false), nil
	case 'p', 'P':
		tab, err := p.category()
		if err != nil {
			return nil, err
		}
		return newSet(c == 'P', nil, tab, false), nil
	case 'n':
		return literal('\n', false), nil
	case 'r':
		return literal('\r', false), nil
	case 't':
		return literal('\t', false), nil
	case 'f':
		return literal('\f', false), nil
	case 'v':
		return literal('\v', false), nil
	case 'x', 'u':
		var digits string
		switch {
		case p.more() && p.peek() == '{':
			end := strings.IndexByte(p.src[p.pos:], '}')
			if end < 0 {
				return nil, fmt.Errorf("bad \\%c escape", c)
			}
			digits = p.src[p.pos+1 : p.pos+end]
			p.pos += end + 1
		default:
			n := 2
			if c == 'u' {
				n = 4
			}
			if p.pos+n > len(p.src) {
				return nil, fmt.Errorf("bad \\%c escape", c)
			}
			digits = p.src[p.pos : p.pos+n]
			p.pos += n
		}
		v, err := strconv.ParseUint(digits, 16, 32)
		if err != nil {
			return nil, fmt.Errorf("bad \\%c escape %q", c, digits)
		}
		return literal(rune(v), p.fold && !inClass), nil
	}
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
		return nil, fmt.Errorf("unsupported escape \\%c", c)
	}
	r, size := utf8.DecodeRuneInString(p.src[p.pos-1:])
	p.pos += size - 1
	return literal(r, p.fold && !inClass), nil
}

var categories = map[string]*unicode.RangeTable{
	"L": unicode.L, "Letter": unicode.L,
	"Lu": unicode.Lu, "Ll": unicode.Ll, "Lt": unicode.Lt, "Lm": unicode.Lm, "Lo": unicode.Lo,
	"M": unicode.M, "Mark": unicode.M, "Mn": unicode.Mn, "Mc": unicode.Mc, "Me": unicode.Me,
	"N": unicode.N, "Number": unicode.N, "Nd": unicode.Nd, "Nl": unicode.Nl, "No": unicode.No,
	"P": unicode.P, "Punctuation": unicode.P, "S": unicode.S, "Symbol": unicode.S,
	"Z": unicode.Z, "Zs": unicode.Zs, "C": unicode.C, "Cc": unicode.Cc,
	"Han": unicode.Han, "Hiragana": unicode.Hiragana, "Katakana": unicode.Katakana,
}

func (p *parser) category() ([]*unicode.RangeTable, error) {
	if !p.more() {
		return nil, fmt.Errorf("bad \\p")
	}
	var name string
	if p.peek() == '{' {
		end := strings.IndexByte(p.src[p.pos:], '}')
		if end < 0 {
			return nil, fmt.Errorf("bad \\p{")
		}
		name = p.src[p.pos+1 : p.pos+end]
		p.pos += end + 1
	} else {
		name = p.src[p.pos : p.pos+1]
		p.pos++
	}
	tab, ok := categories[name]
	if !ok {
		return nil, fmt.Errorf("unknown category \\p{%s}", name)
	}
	return []*unicode.RangeTable{tab}, nil
}

func (p *parser) class() (*node, error) {
	p.pos++ // [
	neg := false
	if p.more() && p.peek() == '^' {
		neg = true
		p.pos++
	}
	s := newSet(neg, nil, nil, p.fold)
	first := true
	for {
		if !p.more() {
			return nil, fmt.Errorf("missing ]")
		}
		c := p.peek()
		if c == ']' && !first {
			p.pos++
			break
		}
		first = false
		var lo rune
		if c == '\\' {
			sub, err := p.escape(true)
			if err != nil {
				return nil, err
			}
			if sub.neg || len(sub.tabs) > 0 || len(sub.ranges) != 2 || sub.ranges[0] != sub.ranges[1] {
				s.subs = append(s.subs, sub)
				continue
			}
			lo = sub.ranges[0]
		} else {
			r, size := utf8.DecodeRuneInString(p.src[p.pos:])
			p.pos += size
			lo = r
		}
		hi := lo
		if p.pos+1 < len(p.src) && p.peek() == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			if p.peek() == '\\' {
				sub, err := p.escape(true)
				if err != nil {
					return nil, err
				}
				if len(sub.ranges) != 2 || sub.ranges[0] != sub.ranges[1] || len(sub.tabs) > 0 {
					return nil, fmt.Errorf("bad class range")
				}
				hi = sub.ranges[0]
			} else {
				r, size := utf8.DecodeRuneInString(p.src[p.pos:])
				p.pos += size
				hi = r
			}
			if hi < lo {
				return nil, fmt.Errorf("bad class range %q-%q", lo, hi)
			}
		}
		s.ranges = append(s.ranges, lo, hi)
	}
	s.finish()
	return &node{kind: kSet, set: s}, nil
}

// charSet is a set of runes: ranges, Unicode tables and nested sets (like
// \p{L} inside [...]), possibly negated, with an ASCII bitmap for speed.
type charSet struct {
	neg    bool
	fold   bool
	ranges []rune // lo, hi pairs
	tabs   []*unicode.RangeTable
	subs   []*charSet
	ascii  [2]uint64
}

func newSet(neg bool, ranges []rune, tabs []*unicode.RangeTable, fold bool) *charSet {
	s := &charSet{neg: neg, ranges: ranges, tabs: tabs, fold: fold}
	s.finish()
	return s
}

func literal(r rune, fold bool) *charSet {
	return newSet(false, []rune{r, r}, nil, fold)
}

func (s *charSet) finish() {
	s.ascii = [2]uint64{}
	for c := rune(0); c < 128; c++ {
		if s.slow(c) {
			s.ascii[c>>6] |= 1 << (c & 63)
		}
	}
}

func (s *charSet) slow(r rune) bool {
	in := s.contains(r)
	if !in && s.fold {
		if o := unicode.SimpleFold(r); o != r {
			for f := o; f != r; f = unicode.SimpleFold(f) {
				if s.contains(f) {
					in = true
					break
				}
			}
		}
	}
	return in != s.neg
}

func (s *charSet) contains(r rune) bool {
	for i := 0; i < len(s.ranges); i += 2 {
		if r >= s.ranges[i] && r <= s.ranges[i+1] {
			return true
		}
	}
	for _, t := range s.tabs {
		if unicode.Is(t, r) {
			return true
		}
	}
	for _, sub := range s.subs {
		if sub.match(r) {
			return true
		}
	}
	return false
}

func (s *charSet) match(r rune) bool {
	if r < 128 && r >= 0 {
		return s.ascii[r>>6]&(1<<(r&63)) != 0
	}
	return s.slow(r)
}
