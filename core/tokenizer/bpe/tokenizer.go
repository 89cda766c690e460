package bpe

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

type merge struct{ rank, id int32 }

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// Tokenizer encodes text to ids and decodes ids to text; safe for
// concurrent use.
type Tokenizer struct {
	vocab          map[string]int
	pieces         []string // id -> vocabulary piece or added-token content
	isAdded        []bool
	merges         map[uint64]merge
	byteID         [256]int32
	ignoreMerges   bool
	normalize      normalizer
	splits         []split
	byteLevel      bool
	added          []AddedToken // longest first
	addedByContent map[string]int
	firstByte      [256]bool
	prefix, suffix []int // what add_special_tokens adds
	cache          *cache
	segs           *segCache
	chars          *charModel // SentencePiece-style models; nil: byte-level
	// spaceSplit: no piece holds "▁" after another character, so no merge
	// crosses the start of a "▁" run and a word can be cut there.
	spaceSplit   bool
	uni          *unigram // the Unigram model; nil: BPE
	meta         *metaspace
	addedByFirst map[byte][]AddedToken
	// digitsCJK: the first two splits are DeepSeek V3's (splitDigitsCJK).
	digitsCJK bool
}

// VocabSize is one more than the largest id.
func (t *Tokenizer) VocabSize() int { return len(t.pieces) }

// TokenID returns the id of a vocabulary piece or added token.
func (t *Tokenizer) TokenID(s string) (int, bool) {
	if id, ok := t.addedByContent[s]; ok {
		return id, true
	}
	id, ok := t.vocab[s]
	return id, ok
}

// Piece returns the vocabulary string of an id ("" when unknown).
func (t *Tokenizer) Piece(id int) string {
	if id < 0 || id >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// Encode tokenises s without adding special tokens (what chat templates
// need: they write BOS themselves). Added tokens in s are recognised.
func (t *Tokenizer) Encode(s string) []int {
	return t.AppendEncode(make([]int, 0, len(s)/3+1), s)
}

// EncodeSpecial is Encode with the post-processor's tokens around it, as
// Hugging Face's encode(add_special_tokens=True).
func (t *Tokenizer) EncodeSpecial(s string) []int {
	out := append([]int(nil), t.prefix...)
	out = t.AppendEncode(out, s)
	return append(out, t.suffix...)
}

// AppendEncode appends the ids of s to dst.
func (t *Tokenizer) AppendEncode(dst []int, s string) []int {
	start := 0 // start of the text not yet encoded
	for i := 0; i < len(s); i++ {
		if !t.firstByte[s[i]] {
			continue
		}
		a, ok := t.matchAdded(s, i)
		if !ok {
			continue
		}
		end := i + len(a.Content)
		if a.SingleWord && (!wordEdge(s, i, true) || !wordEdge(s, end, false)) {
			continue
		}
		left := i
		if a.LStrip {
			for left > start {
				r, size := utf8.DecodeLastRuneInString(s[start:left])
				if !unicode.IsSpace(r) {
					break
				}
				left -= size
			}
		}
		if a.RStrip {
			for end < len(s) {
				r, size := utf8.DecodeRuneInString(s[end:])
				if !unicode.IsSpace(r) {
					break
				}
				end += size
			}
		}
		dst = t.appendText(dst, s[start:left], start == 0)
		dst = append(dst, a.ID)
		start = end
		i = end - 1
	}
	return t.appendText(dst, s[start:], start == 0)
}

func (t *Tokenizer) matchAdded(s string, i int) (AddedToken, bool) {
	for _, a := range t.addedByFirst[s[i]] {
		if strings.HasPrefix(s[i:], a.Content) {
			return a, true
		}
	}
	return AddedToken{}, false
}

func wordEdge(s string, i int, before bool) bool {
	var r rune
	if before {
		if i == 0 {
			return true
		}
		r, _ = utf8.DecodeLastRuneInString(s[:i])
	} else {
		if i >= len(s) {
			return true
		}
		r, _ = utf8.DecodeRuneInString(s[i:])
	}
	return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_')
}

// appendText encodes text that holds no added tokens. A piece of text
// between added tokens is encoded on its own (as Hugging Face splits on
// them first), so a long one — a system prompt, a tools block, repeated in
// every rollout and every turn — is encoded once and then looked up.
func (t *Tokenizer) appendText(dst []int, s string, first bool) []int {
	if s == "" {
		return dst
	}
	if t.segs != nil && len(s) >= minSegment && len(s) <= maxSegment {
		key := s
		if first && t.meta != nil && t.meta.prepend == "first" {
			key = "\x00first\x00" + s // encodes differently at the start of the input
		}
		if ids, ok := t.segs.get(key); ok {
			return append(dst, ids...)
		}
		n := len(dst)
		dst = t.encodeText(dst, s, first)
		t.segs.put(key, dst[n:])
		return dst
	}
	return t.encodeText(dst, s, first)
}

// encodeText normalizes, then pre-tokenizes (Metaspace, splits) and
// encodes, in Hugging Face's order.
func (t *Tokenizer) encodeText(dst []int, s string, first bool) []int {
	if t.normalize != nil {
		s = t.normalize(s)
	}
	if t.meta != nil {
		s = t.meta.apply(s, first)
	}
	return t.splitAndEncode(dst, s, 0)
}

func (t *Tokenizer) splitAndEncode(dst []int, s string, level int) []int {
	if s == "" {
		return dst
	}
	if level == 0 && t.digitsCJK {
		return t.splitDigitsCJK(dst, s)
	}
	if level == len(t.splits) {
		if t.spaceSplit {
			return t.appendSpaceWords(dst, s)
		}
		return t.appendWord(dst, s)
	}
	sp := t.splits[level]
	last := 0
	sp.re.FindAll(s, func(a, b int) {
		switch {
		case sp.onlyMatches:
			dst = t.splitAndEncode(dst, s[a:b], level+1)
			last = b
			return
		case sp.mergePrev:
			dst = t.splitAndEncode(dst, s[last:b], level+1)
			last = b
			return
		case sp.mergeNext:
			if a > last {
				dst = t.splitAndEncode(dst, s[last:a], level+1)
			}
			last = a
			return
		}
		if a > last {
			dst = t.splitAndEncode(dst, s[last:a], level+1)
		}
		if !sp.removed {
			dst = t.splitAndEncode(dst, s[a:b], level+1)
		}
		last = b
	})
	if last < len(s) && !sp.onlyMatches {
		dst = t.splitAndEncode(dst, s[last:], level+1)
	}
	return dst
}

// appendWord runs BPE on one pre-token (its bytes, before the byte-level
// mapping), through the cache.
func (t *Tokenizer) appendWord(dst []int, w string) []int {
	if ids, ok := t.cache.get(w); ok {
		for _, id := range ids {
			dst = append(dst, int(id))
		}
		return dst
	}
	ids := t.bpe(w)
	if len(w) <= maxCachedWord {
		t.cache.put(w, ids)
	}
	for _, id := range ids {
		dst = append(dst, int(id))
	}
	return dst
}

const maxCachedWord = 256

func (t *Tokenizer) bpe(w string) []int32 {
	if t.uni != nil {
		return t.viterbi(w)
	}
	if t.chars != nil {
		return t.bpeChars(w)
	}
	if t.ignoreMerges {
		var b strings.Builder
		b.Grow(len(w) * 2)
		for i := 0; i < len(w); i++ {
			b.WriteRune(byteToRune[w[i]])
		}
		if id, ok := t.vocab[b.String()]; ok {
			return []int32{int32(id)}
		}
	}
	syms := make([]int32, len(w))
	for i := 0; i < len(w); i++ {
		syms[i] = t.byteID[w[i]]
	}
	return t.mergeAll(syms)
}

// mergeAll applies the merges to a word's initial symbols, lowest rank
// first, leftmost among equals: a scan for short words, a heap for long.
func (t *Tokenizer) mergeAll(syms []int32) []int32 {
	if len(syms) > 64 {
		return t.bpeHeap(syms)
	}
	for len(syms) > 1 {
		best, at := merge{rank: -1}, -1
		for i := 0; i+1 < len(syms); i++ {
			m, ok := t.merges[pairKey(syms[i], syms[i+1])]
			if ok && (at < 0 || m.rank < best.rank) {
				best, at = m, i
			}
		}
		if at < 0 {
			break
		}
		syms[at] = best.id
		syms = append(syms[:at+1], syms[at+2:]...)
	}
	return syms
}

// Decode turns ids back into text: added tokens as their content, the rest
// through the byte-level alphabet. Invalid UTF-8 becomes U+FFFD as in
// Rust's from_utf8_lossy (one per maximal invalid subpart). Unknown ids
// are skipped.
func (t *Tokenizer) Decode(ids []int) string {
	if t.chars != nil {
		return t.decodeChars(ids)
	}
	return lossy(t.AppendBytes(make([]byte, 0, len(ids)*4), ids))
}

func lossy(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var out strings.Builder
	out.Grow(len(b) + 8)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 {
			out.Write(b[i : i+size])
			i += size
			continue
		}
		i += invalidRun(b[i:])
		out.WriteRune(utf8.RuneError)
	}
	return out.String()
}

// invalidRun is the length of the maximal prefix of b that starts a
// well-formed sequence but is cut short (at least 1).
func invalidRun(b []byte) int {
	c := b[0]
	var n int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		n = 2
	case c == 0xE0:
		n, lo = 3, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		n = 3
	case c == 0xED:
		n, hi = 3, 0x9F
	case c == 0xF0:
		n, lo = 4, 0x90
	case c >= 0xF1 && c <= 0xF3:
		n = 4
	case c == 0xF4:
		n, hi = 4, 0x8F
	default:
		return 1
	}
	i := 1
	for ; i < n && i < len(b); i++ {
		if b[i] < lo || b[i] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return i
}

// cache maps pre-tokens to their ids: a direct-mapped table of immutable
// entries, read and replaced atomically, so lookups take no lock and the
// memory is bounded by the slot count. A collision only costs one BPE run;
// pre-token frequencies are Zipfian, so the common ones stay.
type cache struct {
	seed  maphash.Seed
	slots []atomic.Pointer[cacheEntry]
	mask  uint64
}

type cacheEntry struct {
	key string
	ids []int32
}

// newCache has n slots (a power of two).
func newCache(n int) *cache {
	return &cache{seed: maphash.MakeSeed(), slots: make([]atomic.Pointer[cacheEntry], n), mask: uint64(n - 1)}
}

func (c *cache) slot(k string) *atomic.Pointer[cacheEntry] {
	return &c.slots[maphash.String(c.seed, k)&c.mask]
}

func (c *cache) get(k string) ([]int32, bool) {
	if e := c.slot(k).Load(); e != nil && e.key == k {
		return e.ids, true
	}
	return nil, false
}

func (c *cache) put(k string, v []int32) {
	c.slot(k).Store(&cacheEntry{key: strings.Clone(k), ids: v})
}

const (
	minSegment   = 256 // shorter text encodes faster than a lookup pays
	maxSegment   = 64 << 10
	maxSegmBytes = 32 << 20 // the whole segment cache, keys and ids
)

// segCache maps whole text pieces to their ids, bounded in bytes: when
// full it starts over (the pieces worth keeping come back at once).
type segCache struct {
	mu    sync.RWMutex
	m     map[string][]int
	bytes int
}

func (c *segCache) get(s string) ([]int, bool) {
	c.mu.RLock()
	ids, ok := c.m[s]
	c.mu.RUnlock()
	return ids, ok
}

func (c *segCache) put(s string, ids []int) {
	size := len(s) + 8*len(ids)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[s]; ok {
		return
	}
	if c.bytes+size > maxSegmBytes {
		c.m, c.bytes = map[string][]int{}, 0
	}
	c.m[strings.Clone(s)] = slices.Clone(ids)
	c.bytes += size
}

// WithoutSegmentCache turns the whole-piece cache off: throughput
// benchmarks encode the same text over and over, which it would answer
// from memory.
func (t *Tokenizer) WithoutSegmentCache() *Tokenizer {
	t.segs = nil
	return t
}

// IsAdded reports whether id is an added token (special or not).
func (t *Tokenizer) IsAdded(id int) bool { return id >= 0 && id < len(t.isAdded) && t.isAdded[id] }

// AppendBytes appends the raw bytes of ids (no UTF-8 repair, so a
// sequence decoded in pieces concatenates exactly).
func (t *Tokenizer) AppendBytes(dst []byte, ids []int) []byte {
	if t.chars != nil {
		return t.appendCharBytes(dst, ids)
	}
	for _, id := range ids {
		if id < 0 || id >= len(t.pieces) {
			continue
		}
		p := t.pieces[id]
		if t.isAdded[id] {
			dst = append(dst, p...)
			continue
		}
		for _, r := range p {
			if b, ok := runeToByte(r); ok {
				dst = append(dst, b)
			} else {
				dst = utf8.AppendRune(dst, r)
			}
		}
	}
	return dst
}

// DeepSeek V3's first two splits, each Isolated: digits in threes, then
// runs of CJK characters. The two sets are disjoint, so one pass cuts what
// the two do (digit chunks, CJK runs, and the stretches between), and
// each piece goes on to the third split. Each split's own pass over the
// whole text had taken a fifth of encoding time.
const (
	digitsPattern = `\p{N}{1,3}`
	cjkPattern    = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
)

// splitKind is what a character is to those splits: 1 a digit, 2 CJK,
// 0 neither.
func splitKind(r rune) int {
	switch {
	case r < utf8.RuneSelf:
		if '0' <= r && r <= '9' {
			return 1
		}
		return 0
	case unicode.Is(unicode.N, r):
		return 1
	case '\u4e00' <= r && r <= '\u9fa5' || '\u3040' <= r && r <= '\u309f' || '\u30a0' <= r && r <= '\u30ff':
		return 2
	}
	return 0
}

func (t *Tokenizer) splitDigitsCJK(dst []int, s string) []int {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		k, j, n := splitKind(r), i+size, 1
		for j < len(s) && (k != 1 || n < 3) {
			q, qs := rune(s[j]), 1
			if q >= utf8.RuneSelf {
				q, qs = utf8.DecodeRuneInString(s[j:])
			}
			if splitKind(q) != k {
				break
			}
			j += qs
			n++
		}
		dst = t.splitAndEncode(dst, s[i:j], 2)
		i = j
	}
	return dst
}
