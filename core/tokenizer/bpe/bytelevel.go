package bpe

import "container/heap"

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
	prev := make([]int, n)
	next := make([]int, n)
	alive := make([]bool, n)
	for i := range syms {
		prev[i], next[i], alive[i] = i-1, i+1, true
	}
	next[n-1] = -1
	q := &mergeQueue{}
	push := func(i int) {
		j := next[i]
		if i < 0 || j < 0 {
			return
		}
		if m, ok := t.merges[pairKey(syms[i], syms[j])]; ok {
			heap.Push(q, cand{rank: m.rank, pos: i, left: syms[i], right: syms[j], id: m.id})
		}
	}
	for i := 0; i+1 < n; i++ {
		push(i)
	}
	for q.Len() > 0 {
		c := heap.Pop(q).(cand)
		i := c.pos
		if !alive[i] || syms[i] != c.left {
			continue
		}
		j := next[i]
		if j < 0 || syms[j] != c.right {
			continue
		}
		syms[i] = c.id
		alive[j] = false
		next[i] = next[j]
		if next[j] >= 0 {
			prev[next[j]] = i
		}
		if prev[i] >= 0 {
			push(prev[i])
		}
		push(i)
	}
	out := make([]int32, 0, n)
	for i := 0; i >= 0; i = next[i] {
		out = append(out, syms[i])
	}
	return out
}

type cand struct {
	rank, left, right, id int32
	pos                   int
}

type mergeQueue []cand

func (q mergeQueue) Len() int { return len(q) }
func (q mergeQueue) Less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].pos < q[j].pos
}
func (q mergeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *mergeQueue) Push(x any)   { *q = append(*q, x.(cand)) }
func (q *mergeQueue) Pop() any {
	old := *q
	c := old[len(old)-1]
	*q = old[:len(old)-1]
	return c
}
