package regex

// firstInfo says which characters a sequence can start with: an ASCII
// bitmap, whether a non-ASCII character might start it, and whether it can
// match empty (then anything can follow). Alternation uses it to skip
// alternatives that cannot match at the current byte, which is most of
// them for the tokenizer patterns.
type firstInfo struct {
	ascii    [2]uint64
	nonASCII bool
	nullable bool
}

func (f *firstInfo) union(g firstInfo) {
	f.ascii[0] |= g.ascii[0]
	f.ascii[1] |= g.ascii[1]
	f.nonASCII = f.nonASCII || g.nonASCII
}

func anyFirst() firstInfo {
	return firstInfo{ascii: [2]uint64{^uint64(0), ^uint64(0)}, nonASCII: true, nullable: true}
}

func seqFirst(seq []*node) firstInfo {
	var f firstInfo
	for _, n := range seq {
		g := nodeFirst(n)
		f.union(g)
		if !g.nullable {
			return f
		}
	}
	f.nullable = true
	return f
}

func nodeFirst(n *node) firstInfo {
	switch n.kind {
	case kSet:
		// Any rune outside ASCII may be in the set unless it is a plain
		// non-negated ASCII range list.
		non := n.set.neg || len(n.set.tabs) > 0 || len(n.set.subs) > 0 || n.set.fold
		for i := 0; i < len(n.set.ranges); i += 2 {
			if n.set.ranges[i+1] >= 128 {
				non = true
			}
		}
		return firstInfo{ascii: n.set.ascii, nonASCII: non}
	case kAlt:
		var f firstInfo
		for _, a := range n.alts {
			g := seqFirst(a)
			f.union(g)
			f.nullable = f.nullable || g.nullable
		}
		return f
	case kGroup:
		return seqFirst(n.seq)
	case kRepeat:
		g := nodeFirst(n.sub)
		if n.min == 0 {
			g.nullable = true
		}
		return g
	}
	// Assertions consume nothing: be conservative.
	return anyFirst()
}

// canStart reports whether the sequence with info f might match at s[pos:].
func (f *firstInfo) canStart(s string, pos int) bool {
	if f.nullable {
		return true
	}
	if pos >= len(s) {
		return false
	}
	c := s[pos]
	if c >= 0x80 {
		return f.nonASCII
	}
	return f.ascii[c>>6]&(1<<(c&63)) != 0
}

// annotate computes the first sets of every alternation in the program.
func annotate(seq []*node) {
	for _, n := range seq {
		switch n.kind {
		case kAlt:
			n.firsts = make([]firstInfo, len(n.alts))
			for i, a := range n.alts {
				n.firsts[i] = seqFirst(a)
				annotate(a)
			}
		case kGroup, kLook:
			annotate(n.seq)
		case kRepeat:
			annotate([]*node{n.sub})
		}
	}
}
