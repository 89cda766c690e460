package bpe

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// SentencePiece-style BPE (Llama 2, Mistral v0.1–v0.3, Gemma 2/3, Yi,
// InternLM2): symbols are characters, not bytes; a character outside the
// vocabulary becomes its UTF-8 bytes as <0xXX> tokens (byte_fallback) or
// the unknown token; spaces are "▁" (a Replace/Prepend normalizer or the
// Metaspace pre-tokenizer); decoding runs the tokenizer's decoder chain.

// charModel is what a character-level BPE needs beyond the merges.
type charModel struct {
	byteFallback bool
	byteIDs      [256]int32 // <0xXX>, or -1
	unk          int32      // -1: none (unknown characters are dropped, as in Hugging Face)
	fuseUnk      bool
	decoders     []decoderStep
}

// metaspace is the Metaspace pre-tokenizer.
type metaspace struct {
	replacement string
	prepend     string // "always", "first" or "never"
}

// apply replaces spaces and prepends the replacement (first: only to the
// text at the start of the input, not after an added token).
func (m *metaspace) apply(s string, first bool) string {
	s = strings.ReplaceAll(s, " ", m.replacement)
	if (m.prepend == "always" || m.prepend == "first" && first) && !strings.HasPrefix(s, m.replacement) {
		s = m.replacement + s
	}
	return s
}

// charSymbols are a word's initial symbols: its characters' ids, byte
// fallback tokens for characters outside the vocabulary, else unk.
func (t *Tokenizer) charSymbols(w string) []int32 {
	cm := t.chars
	syms := make([]int32, 0, len(w))
	var buf [utf8.UTFMax]byte
	for i := 0; i < len(w); {
		_, size := utf8.DecodeRuneInString(w[i:])
		ch := w[i : i+size]
		i += size
		if id, ok := t.vocab[ch]; ok {
			syms = append(syms, int32(id))
			continue
		}
		if cm.byteFallback {
			n := copy(buf[:], ch)
			ok := true
			for _, b := range buf[:n] {
				ok = ok && cm.byteIDs[b] >= 0
			}
			if ok {
				for _, b := range buf[:n] {
					syms = append(syms, cm.byteIDs[b])
				}
				continue
			}
		}
		if cm.unk < 0 {
			continue
		}
		if cm.fuseUnk && len(syms) > 0 && syms[len(syms)-1] == cm.unk {
			continue
		}
		syms = append(syms, cm.unk)
	}
	return syms
}

// spaceMark is SentencePiece's space.
const spaceMark = "▁"

// innerSpace reports whether a piece holds "▁" after another character
// (then merges may cross the start of a "▁" run; runs like "▁▁▁" alone do
// not count).
func innerSpace(piece string) bool {
	for i := strings.Index(piece, spaceMark); i >= 0; {
		if i > 0 && !strings.HasSuffix(piece[:i], spaceMark) {
			return true
		}
		j := strings.Index(piece[i+len(spaceMark):], spaceMark)
		if j < 0 {
			break
		}
		i += len(spaceMark) + j
	}
	return false
}

// appendSpaceWords encodes a word in pieces cut where a "▁" run starts
// after another character: the same ids as the whole word (no piece spans
// such a cut, see spaceSplit), with words short enough for the cache. A
// SentencePiece model without a pre-tokenizer otherwise sees a whole
// segment as one word.
func (t *Tokenizer) appendSpaceWords(dst []int, s string) []int {
	start := 0
	for i := 1; i < len(s); {
		j := strings.Index(s[i:], spaceMark)
		if j < 0 {
			break
		}
		at := i + j
		if !strings.HasSuffix(s[:at], spaceMark) {
			dst = t.appendWord(dst, s[start:at])
			start = at
		}
		i = at + len(spaceMark)
	}
	return t.appendWord(dst, s[start:])
}

// bpeChars runs the merges over a word's character symbols.
func (t *Tokenizer) bpeChars(w string) []int32 {
	if t.ignoreMerges {
		if id, ok := t.vocab[w]; ok {
			return []int32{int32(id)}
		}
	}
	return t.mergeAll(t.charSymbols(w))
}

// decoderStep is one step of Hugging Face's decoder chain, over the tokens'
// strings.
type decoderStep func([]string) []string

func parseDecoder(raw json.RawMessage) ([]decoderStep, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c struct {
		Type     string            `json:"type"`
		Decoders []json.RawMessage `json:"decoders"`
		Pattern  *struct {
			String *string `json:"String"`
		} `json:"pattern"`
		Content        string `json:"content"`
		Start          int    `json:"start"`
		Stop           int    `json:"stop"`
		Replacement    string `json:"replacement"`
		PrependScheme  string `json:"prepend_scheme"`
		AddPrefixSpace *bool  `json:"add_prefix_space"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		var out []decoderStep
		for i, d := range c.Decoders {
			steps, err := parseDecoder(d)
			if err != nil {
				return nil, fmt.Errorf("decoders[%d]: %w", i, err)
			}
			out = append(out, steps...)
		}
		return out, nil
	case "Replace":
		if c.Pattern == nil || c.Pattern.String == nil {
			return nil, fmt.Errorf("replace: only a String pattern is supported")
		}
		from, to := *c.Pattern.String, c.Content
		return []decoderStep{func(ts []string) []string {
			for i := range ts {
				ts[i] = strings.ReplaceAll(ts[i], from, to)
			}
			return ts
		}}, nil
	case "ByteFallback":
		return []decoderStep{byteFallbackDecode}, nil
	case "Fuse":
		return []decoderStep{func(ts []string) []string { return []string{strings.Join(ts, "")} }}, nil
	case "Strip":
		content, _ := utf8.DecodeRuneInString(c.Content)
		start, stop := c.Start, c.Stop
		return []decoderStep{func(ts []string) []string {
			for i, tok := range ts {
				for n := 0; n < start && strings.HasPrefix(tok, string(content)); n++ {
					tok = tok[utf8.RuneLen(content):]
				}
				for n := 0; n < stop && strings.HasSuffix(tok, string(content)); n++ {
					tok = tok[:len(tok)-utf8.RuneLen(content)]
				}
				ts[i] = tok
			}
			return ts
		}}, nil
	case "Metaspace":
		rep := c.Replacement
		if rep == "" {
			rep = "▁"
		}
		strip := c.PrependScheme != "never"
		if c.PrependScheme == "" && c.AddPrefixSpace != nil {
			strip = *c.AddPrefixSpace
		}
		return []decoderStep{func(ts []string) []string {
			for i, tok := range ts {
				tok = strings.ReplaceAll(tok, rep, " ")
				if i == 0 && strip {
					tok = strings.TrimPrefix(tok, " ")
				}
				ts[i] = tok
			}
			return ts
		}}, nil
	}
	return nil, fmt.Errorf("type %q is not supported", c.Type)
}

// byteFallbackDecode turns runs of <0xXX> tokens into their bytes; a run
// that is not UTF-8 becomes one U+FFFD per byte, as Hugging Face does.
func byteFallbackDecode(ts []string) []string {
	out := make([]string, 0, len(ts))
	var run []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		if utf8.Valid(run) {
			out = append(out, string(run))
		} else {
			out = append(out, strings.Repeat("\uFFFD", len(run)))
		}
		run = run[:0]
	}
	for _, tok := range ts {
		if b, ok := byteToken(tok); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, tok)
	}
	flush()
	return out
}

// byteToken reads a byte-fallback token <0xXX>.
func byteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	var v byte
	for _, c := range []byte(s[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | (c - '0')
		case c >= 'A' && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return v, true
}

// decodeChars is Decode for character-level models: the decoder chain over
// the tokens' strings.
func (t *Tokenizer) decodeChars(ids []int) string {
	ts := make([]string, 0, len(ids))
	for _, id := range ids {
		if id >= 0 && id < len(t.pieces) {
			ts = append(ts, t.pieces[id])
		}
	}
	for _, step := range t.chars.decoders {
		ts = step(ts)
	}
	return strings.Join(ts, "")
}

// appendCharBytes is AppendBytes for character-level models: byte tokens
// as their byte, "▁" as a space, no stripping (pieces concatenate).
func (t *Tokenizer) appendCharBytes(dst []byte, ids []int) []byte {
	for _, id := range ids {
		if id < 0 || id >= len(t.pieces) {
			continue
		}
		p := t.pieces[id]
		if b, ok := byteToken(p); ok && !t.isAdded[id] {
			dst = append(dst, b)
			continue
		}
		if !t.isAdded[id] {
			p = strings.ReplaceAll(p, "▁", " ")
		}
		dst = append(dst, p...)
	}
	return dst
}
