package bpe

import (
	"encoding/json"
	"fmt"
	"math"
	"unicode/utf8"
)

// unigram is Hugging Face's Unigram model (SentencePiece's unigram LM):
// the segmentation of a word with the highest total piece score (Viterbi);
// a character no piece covers is unknown, scored below every piece;
// consecutive unknown characters are one token, which byte fallback turns
// into <0xXX> tokens when the model has them.
type unigram struct {
	scores   []float64
	index    map[string]int32
	maxLen   int // bytes of the longest piece
	unk      int32
	unkScore float64
	// f32: path scores add up in float32, as SentencePiece's do (for
	// models loaded from a .model file); ties between segmentations of
	// equal real score then break as they do there.
	f32 bool
}

// unkPenalty is how far below the lowest piece an unknown character
// scores (kUnkPenalty in SentencePiece and Hugging Face).
const unkPenalty = 10.0

func parseUnigram(raw json.RawMessage, unkID *int) (*unigram, map[string]int, error) {
	var list [][2]json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, nil, fmt.Errorf("vocab: %w", err)
	}
	u := &unigram{scores: make([]float64, len(list)), index: make(map[string]int32, len(list)), unk: -1}
	vocab := make(map[string]int, len(list))
	minScore := math.Inf(1)
	for i, e := range list {
		var piece string
		if err := json.Unmarshal(e[0], &piece); err != nil {
			return nil, nil, fmt.Errorf("vocab[%d]: %w", i, err)
		}
		if err := json.Unmarshal(e[1], &u.scores[i]); err != nil {
			return nil, nil, fmt.Errorf("vocab[%d]: %w", i, err)
		}
		if _, dup := u.index[piece]; !dup {
			u.index[piece] = int32(i)
			vocab[piece] = i
		}
		u.maxLen = max(u.maxLen, len(piece))
		minScore = math.Min(minScore, u.scores[i])
	}
	if unkID != nil {
		if *unkID < 0 || *unkID >= len(list) {
			return nil, nil, fmt.Errorf("unk_id %d is out of range", *unkID)
		}
		u.unk = int32(*unkID)
	}
	u.unkScore = minScore - unkPenalty
	return u, vocab, nil
}

// viterbi segments one word as Hugging Face's encode_optimized does: for
// each end, the best-scoring path; pieces tried shortest first and replaced
// only by a strictly better score.
func (t *Tokenizer) viterbi(w string) []int32 {
	u := t.uni
	n := len(w)
	type node struct {
		score float64
		start int32
		id    int32 // -2: unknown character
		set   bool
	}
	best := make([]node, n+1)
	best[0].set = true
	for at := 0; at < n; {
		if !best[at].set {
			_, size := utf8.DecodeRuneInString(w[at:])
			at += size
			continue
		}
		base := best[at].score
		_, size := utf8.DecodeRuneInString(w[at:])
		single := false
		for l := 1; l <= u.maxLen && at+l <= n; l++ {
			id, ok := u.index[w[at:at+l]]
			if !ok {
				continue
			}
			end := at + l
			c := base + u.scores[id]
			if u.f32 {
				c = float64(float32(base) + float32(u.scores[id]))
			}
			if !best[end].set || c > best[end].score {
				best[end] = node{score: c, start: int32(at), id: id, set: true}
			}
			if l == size {
				single = true
			}
		}
		if !single {
			end := at + size
			c := base + u.unkScore
			if u.f32 {
				c = float64(float32(base) + float32(u.unkScore))
			}
			if !best[end].set || c > best[end].score {
				best[end] = node{score: c, start: int32(at), id: -2, set: true}
			}
		}
		at += size
	}
	// Back from the end: pieces, with runs of unknown characters fused.
	type span struct {
		start, end int
		id         int32
	}
	var rev []span
	for end := n; end > 0; {
		nd := best[end]
		start := int(nd.start)
		if nd.id == -2 && len(rev) > 0 && rev[len(rev)-1].id == -2 {
			rev[len(rev)-1].start = start
		} else {
			rev = append(rev, span{start, end, nd.id})
		}
		end = start
	}
	out := make([]int32, 0, len(rev))
	for i := len(rev) - 1; i >= 0; i-- {
		sp := rev[i]
		if sp.id >= 0 {
			out = append(out, sp.id)
			continue
		}
		out = t.unknown(out, w[sp.start:sp.end])
	}
	return out
}

// unknown is the ids of a run of unknown characters: its bytes as
// <0xXX> tokens with byte fallback (when they all exist), else unk.
func (t *Tokenizer) unknown(out []int32, s string) []int32 {
	cm := t.chars
	if cm.byteFallback {
		ok := true
		for i := 0; i < len(s); i++ {
			ok = ok && cm.byteIDs[s[i]] >= 0
		}
		if ok {
			for i := 0; i < len(s); i++ {
				out = append(out, cm.byteIDs[s[i]])
			}
			return out
		}
	}
	if cm.unk >= 0 {
		out = append(out, cm.unk)
	}
	return out
}
