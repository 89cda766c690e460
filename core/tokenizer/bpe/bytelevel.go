package bpe

// byteToRune is GPT-2's byte-level alphabet: printable bytes map to
// themselves, the rest to code points from U+0100 on, so every byte string
// is a printable string the vocabulary can hold.
var byteToRune [256]rune

var runeToByteTab = map[rune]byte{}

func init() {
	n := rune(0)
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = 256 + n
			n++
		}
		runeToByteTab[byteToRune[b]] = byte(b)
	}
}

func runeToByte(r rune) (byte, bool) {
	if r >= '!' && r <= '~' || r >= 0xA1 && r <= 0xAC || r >= 0xAE && r <= 0xFF {
		return byte(r), true
	}
	b, ok := runeToByteTab[r]
	return b, ok
}

// bpeHeap is BPE for long pre-tokens: a priority queue of candidate merges
// over a linked list of symbols, O(n log n). It merges the lowest-ranked
// pair first and, among equal ranks, the leftmost, like the short path and
// Hugging Face's Word::merge_all.
func (t *Tokenizer) bpeHeap(syms []int32) []int32 {
	n := len(syms)
	prev := make([]int32, n)
	next := make([]int32, n)
	for i := range syms {
		prev[i], next[i] = int32(i-1), int32(i+1)
	}
	next[n-1] = -1
	q := make(candHeap, 0, n)
	push := func(i int32) {
		if i < 0 {
			return
		}
		j := next[i]
		if j < 0 {
			return
		}
		if m, ok := t.merges[pairKey(syms[i], syms[j])]; ok {
			q.push(cand{key: uint64(m.rank)<<32 | uint64(i), left: syms[i], right: syms[j], id: m.id})
		}
	}
	for i := 0; i+1 < n; i++ {
		push(int32(i))
	}
	for len(q) > 0 {
		c := q.pop()
		i := int32(c.key) // the position; the rank is the high half
		if syms[i] != c.left || syms[i] < 0 {
			continue
		}
		j := next[i]
		if j < 0 || syms[j] != c.right {
			continue
		}
		syms[i] = c.id
		syms[j] = -1 // merged away
		next[i] = next[j]
		if next[j] >= 0 {
			prev[next[j]] = i
		}
		push(prev[i])
		push(i)
	}
	out := make([]int32, 0, n)
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, syms[i])
	}
	return out
}

// cand is a possible merge: key orders by rank, then position (the low
// half), as Hugging Face's Word::merge_all does.
type cand struct {
	key             uint64
	left, right, id int32
}

// candHeap is a binary min-heap of candidates, written out: the generic
// container/heap's interface calls were most of the time on long words.
type candHeap []cand

func (h *candHeap) push(c cand) {
	q := append(*h, c)
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if q[p].key <= q[i].key {
			break
		}
		q[p], q[i] = q[i], q[p]
		i = p
	}
	*h = q
}

func (h *candHeap) pop() cand {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(q) {
			break
		}
		m := l
		if r := l + 1; r < len(q) && q[r].key < q[l].key {
			m = r
		}
		if q[i].key <= q[m].key {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}
