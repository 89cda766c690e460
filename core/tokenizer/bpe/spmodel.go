package bpe

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// SentencePiece piece types (sentencepiece_model.proto).
const (
	spNormal      = 1
	spUnknown     = 2
	spControl     = 3
	spUserDefined = 4
	spByte        = 6
)

// spModel is the part of a SentencePiece ModelProto a tokenizer needs.
type spModel struct {
	pieces []spPiece
	// trainer_spec
	modelType, unkID, bosID int
	byteFallback            bool
	wsSuffix                bool
	// normalizer_spec
	normName            string
	charsmap            bool
	dummyPrefix         bool
	removeExtraSpaces   bool
	escapeSpaces        bool
	denormalizerPresent bool
}

type spPiece struct {
	piece string
	score float32
	typ   int
}

// LoadSentencePiece loads a SentencePiece tokenizer.model (what InternLM2
// and early Yi and Llama repositories ship instead of a tokenizer.json).
// It builds the tokenizer.json Hugging Face's converter would (Llama's
// shape: Prepend and Replace normalizers, byte-fallback decoders, merges
// ordered by piece score), so both files of one model encode alike; the
// tests compare it with the sentencepiece library. What that shape cannot
// express is refused: normalization rules (a precompiled charsmap),
// removing extra whitespace, whitespace as a suffix.
func LoadSentencePiece(path string) (*Tokenizer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	doc, err := sentencePieceJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t, err := Parse(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if t.uni != nil {
		if err := t.uni.likeSentencePiece(b); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return t, nil
}

// likeSentencePiece makes a Unigram model segment as SentencePiece's
// does: float32 path scores; only normal, user-defined and unused pieces
// match text (control, unknown and byte pieces are ids, not text); unknown
// characters score 10 below the lowest normal piece.
func (u *unigram) likeSentencePiece(b []byte) error {
	m, err := parseSPModel(b)
	if err != nil {
		return err
	}
	u.f32 = true
	low := float32(math.MaxFloat32)
	for _, p := range m.pieces {
		switch p.typ {
		case spNormal:
			low = min(low, p.score)
		case spControl, spUnknown, spByte:
			delete(u.index, p.piece)
		}
	}
	u.unkScore = float64(low - unkPenalty)
	return nil
}

// sentencePieceJSON converts a serialized ModelProto to tokenizer.json.
func sentencePieceJSON(b []byte) ([]byte, error) {
	m, err := parseSPModel(b)
	if err != nil {
		return nil, err
	}
	switch {
	case m.charsmap || (m.normName != "identity" && m.normName != ""):
		return nil, fmt.Errorf("sentencepiece normalizer %q (a precompiled charsmap) is not supported", m.normName)
	case m.removeExtraSpaces:
		return nil, errors.New("sentencepiece normalizer_spec.remove_extra_whitespaces is not supported")
	case m.wsSuffix:
		return nil, errors.New("sentencepiece trainer_spec.treat_whitespace_as_suffix is not supported")
	case !m.escapeSpaces:
		return nil, errors.New("sentencepiece normalizer_spec.escape_whitespaces=false is not supported")
	case m.denormalizerPresent:
		return nil, errors.New("sentencepiece denormalizer_spec is not supported")
	case len(m.pieces) == 0:
		return nil, errors.New("sentencepiece model has no pieces")
	}
	for _, id := range []int{m.unkID, m.bosID} {
		if id >= len(m.pieces) {
			return nil, fmt.Errorf("sentencepiece trainer_spec names piece %d of %d", id, len(m.pieces))
		}
	}
	const space = "\u2581"
	var addedTokens []AddedToken
	vocab := make(map[string]int, len(m.pieces))
	for i, p := range m.pieces {
		if _, dup := vocab[p.piece]; dup {
			return nil, fmt.Errorf("sentencepiece piece %q appears twice", p.piece)
		}
		vocab[p.piece] = i
		if p.typ == spUnknown || p.typ == spControl || p.typ == spUserDefined {
			addedTokens = append(addedTokens, AddedToken{ID: i, Content: p.piece, Special: p.typ != spUserDefined})
		}
	}
	norms := []map[string]any{}
	decoders := []map[string]any{
		{"type": "Replace", "pattern": map[string]string{"String": space}, "content": " "},
		{"type": "ByteFallback"}, {"type": "Fuse"},
	}
	if m.dummyPrefix {
		norms = append(norms, map[string]any{"type": "Prepend", "prepend": space})
		decoders = append(decoders, map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0})
	}
	norms = append(norms, map[string]any{"type": "Replace", "pattern": map[string]string{"String": " "}, "content": space})
	model := map[string]any{"byte_fallback": m.byteFallback}
	switch m.modelType {
	case 2: // BPE
		model["type"] = "BPE"
		model["fuse_unk"] = true
		model["vocab"] = vocab
		model["merges"] = spMerges(m.pieces, vocab)
		if m.unkID >= 0 {
			model["unk_token"] = m.pieces[m.unkID].piece
		}
	case 1: // Unigram
		if m.unkID < 0 {
			return nil, errors.New("sentencepiece Unigram model without unk_id")
		}
		v := make([][2]any, len(m.pieces))
		for i, p := range m.pieces {
			v[i] = [2]any{p.piece, p.score}
		}
		model["type"], model["unk_id"], model["vocab"] = "Unigram", m.unkID, v
	default:
		return nil, fmt.Errorf("sentencepiece model_type %d is not supported (BPE and Unigram are)", m.modelType)
	}
	return json.Marshal(map[string]any{
		"added_tokens": addedTokens,
		"normalizer":   map[string]any{"type": "Sequence", "normalizers": norms},
		"decoder":      map[string]any{"type": "Sequence", "decoders": decoders},
		"model":        model,
	})
}

// spMerges derives BPE merges from piece scores as transformers'
// generate_merges does with scores: every split of a normal or user-defined
// piece into two pieces of the vocabulary, ordered by the piece's score
// (highest first), then by the parts' lengths in characters, then by the
// parts' ids.
func spMerges(pieces []spPiece, vocab map[string]int) [][2]string {
	type merge struct {
		l, r       string
		score      float32
		lenL, lenR int
	}
	var ms []merge
	for _, p := range pieces {
		if p.typ != spNormal && p.typ != spUserDefined {
			continue
		}
		start := len(ms)
		for i := range p.piece {
			if i == 0 {
				continue
			}
			l, r := p.piece[:i], p.piece[i:]
			if _, ok := vocab[l]; !ok {
				continue
			}
			if _, ok := vocab[r]; ok {
				ms = append(ms, merge{l: l, r: r, score: p.score, lenL: utf8.RuneCountInString(l), lenR: utf8.RuneCountInString(r)})
			}
		}
		local := ms[start:]
		slices.SortStableFunc(local, func(a, b merge) int {
			return cmp.Or(cmp.Compare(vocab[a.l], vocab[b.l]), cmp.Compare(vocab[a.r], vocab[b.r]))
		})
	}
	// Python's sorted(..., reverse=True) keeps equal keys in input order.
	slices.SortStableFunc(ms, func(a, b merge) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(b.lenL, a.lenL), cmp.Compare(b.lenR, a.lenR))
	})
	out := make([][2]string, len(ms))
	for i, m := range ms {
		out[i] = [2]string{m.l, m.r}
	}
	return out
}

func parseSPModel(b []byte) (*spModel, error) {
	// proto2 defaults of the fields read here.
	m := &spModel{modelType: 1, unkID: 0, bosID: 1, dummyPrefix: true, removeExtraSpaces: true, escapeSpaces: true}
	err := protoFields(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			p := spPiece{typ: spNormal}
			err := protoFields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
				switch {
				case num == 1 && typ == protowire.BytesType:
					if !utf8.Valid(v) {
						return errors.New("a piece is not UTF-8")
					}
					p.piece = string(v)
				case num == 2 && typ == protowire.Fixed32Type:
					p.score = math.Float32frombits(uint32(x))
				case num == 3 && typ == protowire.VarintType:
					p.typ = int(x)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("piece %d: %w", len(m.pieces), err)
			}
			m.pieces = append(m.pieces, p)
		case num == 2 && typ == protowire.BytesType:
			return protoFields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
				if typ != protowire.VarintType {
					return nil
				}
				switch num {
				case 3:
					m.modelType = int(x)
				case 24:
					m.wsSuffix = x != 0
				case 35:
					m.byteFallback = x != 0
				case 40:
					m.unkID = int(int32(x))
				case 41:
					m.bosID = int(int32(x))
				}
				return nil
			})
		case num == 3 && typ == protowire.BytesType:
			return protoFields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
				switch {
				case num == 1 && typ == protowire.BytesType:
					m.normName = string(v)
				case num == 2 && typ == protowire.BytesType:
					m.charsmap = len(v) > 0
				case num == 3 && typ == protowire.VarintType:
					m.dummyPrefix = x != 0
				case num == 4 && typ == protowire.VarintType:
					m.removeExtraSpaces = x != 0
				case num == 5 && typ == protowire.VarintType:
					m.escapeSpaces = x != 0
				}
				return nil
			})
		case num == 5 && typ == protowire.BytesType:
			// A denormalizer with rules changes decoding; an empty one does not.
			return protoFields(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
				if (num == 1 && typ == protowire.BytesType && string(v) != "identity" && len(v) > 0) ||
					(num == 2 && typ == protowire.BytesType && len(v) > 0) {
					m.denormalizerPresent = true
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("not a sentencepiece model: %w", err)
	}
	return m, nil
}

// protoFields calls f for each field of a serialized message: the bytes of
// length-delimited fields, the value of varint and fixed ones.
func protoFields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var x32 uint32
			x32, n = protowire.ConsumeFixed32(b)
			x = uint64(x32)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}
