// Package bpe implements Hugging Face's BPE tokenizers in Go: byte-level
// ones (the tokenizer.json of Qwen2.5/Qwen3, Llama 3.x, DeepSeek V3, GPT-2
// and their kin) and SentencePiece-style ones (Gemma, Llama 2, Mistral:
// characters with byte fallback, see sentencepiece.go), and the Unigram
// model (unigram.go): added and special tokens, normalizers, pre-tokenizer
// splits, BPE merges, and decoding.
package bpe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/prorl/prorl/core/tokenizer/regex"
)

// AddedToken is an entry of tokenizer.json's added_tokens.
type AddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type fileJSON struct {
	AddedTokens   []AddedToken    `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         struct {
		Type                    string          `json:"type"`
		Dropout                 *float64        `json:"dropout"`
		UnkToken                *string         `json:"unk_token"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
		ByteFallback            bool            `json:"byte_fallback"`
		FuseUnk                 bool            `json:"fuse_unk"`
		IgnoreMerges            bool            `json:"ignore_merges"`
		RawVocab                json.RawMessage `json:"vocab"`
		Vocab                   map[string]int  `json:"-"`
		UnkID                   *int            `json:"unk_id"`
		Merges                  json.RawMessage `json:"merges"`
	} `json:"model"`
}

type component struct {
	Type string `json:"type"`
	// Sequence
	Normalizers   []json.RawMessage `json:"normalizers"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	// Split
	Pattern *struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior string `json:"behavior"`
	Invert   bool   `json:"invert"`
	// ByteLevel
	AddPrefixSpace *bool `json:"add_prefix_space"`
	UseRegex       *bool `json:"use_regex"`
	// Digits
	IndividualDigits bool `json:"individual_digits"`
	// Replace, Prepend, Strip (normalizers); Metaspace
	Content       string `json:"content"`
	Prepend       string `json:"prepend"`
	Left          bool   `json:"left"`
	Right         bool   `json:"right"`
	Replacement   string `json:"replacement"`
	PrependScheme string `json:"prepend_scheme"`
	Split         *bool  `json:"split"`
}

// gpt2Pattern is the ByteLevel pre-tokenizer's own regex (use_regex).
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// Load reads a tokenizer.json file.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tokenizer: %w", err)
	}
	tok, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tok, nil
}

// Parse builds a tokenizer from the contents of a tokenizer.json. Anything
// it does not implement is an error, never silently approximated.
func Parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("parse tokenizer.json: %w", err)
	}
	m := &f.Model
	var uni *unigram
	switch m.Type {
	case "BPE", "":
		if err := json.Unmarshal(m.RawVocab, &m.Vocab); err != nil || m.Vocab == nil {
			return nil, fmt.Errorf("model.vocab: %v", err)
		}
	case "Unigram":
		var err error
		if uni, m.Vocab, err = parseUnigram(m.RawVocab, m.UnkID); err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		m.FuseUnk = true // Hugging Face's Unigram always fuses unknown characters
	default:
		return nil, fmt.Errorf("model.type %q: only BPE and Unigram are supported", m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return nil, fmt.Errorf("model.dropout: BPE dropout is not supported")
	}
	if (m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "") || (m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "") {
		return nil, fmt.Errorf("model: subword prefixes and suffixes are not supported")
	}
	t := &Tokenizer{
		vocab:        m.Vocab,
		ignoreMerges: m.IgnoreMerges,
		cache:        newCache(1 << 18),
		segs:         &segCache{m: map[string][]int{}},
	}
	maxID := -1
	for _, id := range m.Vocab {
		maxID = max(maxID, id)
	}
	for _, a := range f.AddedTokens {
		maxID = max(maxID, a.ID)
	}
	t.pieces = make([]string, maxID+1)
	t.isAdded = make([]bool, maxID+1)
	for s, id := range m.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("model.vocab: negative id for %q", s)
		}
		t.pieces[id] = s
	}
	if uni != nil {
		t.uni, t.merges = uni, map[uint64]merge{}
	} else if err := t.loadMerges(m.Merges); err != nil {
		return nil, err
	}
	var err error
	if t.normalize, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	if t.splits, t.byteLevel, err = t.parsePreTokenizer(f.PreTokenizer, 0); err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %w", err)
	}
	t.digitsCJK = len(t.splits) > 2 && t.splits[0].isolates(digitsPattern) && t.splits[1].isolates(cjkPattern)
	if t.byteLevel && uni != nil {
		return nil, fmt.Errorf("pre_tokenizer: ByteLevel with a Unigram model is not supported")
	}
	if t.byteLevel {
		if m.ByteFallback {
			return nil, fmt.Errorf("model.byte_fallback: not with a ByteLevel pre-tokenizer")
		}
		for i := range 256 {
			if _, ok := m.Vocab[string(byteToRune[i])]; !ok {
				return nil, fmt.Errorf("model.vocab: byte-level symbol %q (byte %d) missing; not a byte-level BPE vocabulary", byteToRune[i], i)
			}
			t.byteID[i] = int32(m.Vocab[string(byteToRune[i])])
		}
	} else {
		// SentencePiece-style: characters, byte fallback, the decoder chain.
		cm := &charModel{byteFallback: m.ByteFallback, unk: -1, fuseUnk: m.FuseUnk}
		for i := range 256 {
			cm.byteIDs[i] = -1
			if id, ok := m.Vocab[fmt.Sprintf("<0x%02X>", i)]; ok {
				cm.byteIDs[i] = int32(id)
			}
		}
		if uni != nil {
			cm.unk = uni.unk
		} else if m.UnkToken != nil {
			id, ok := m.Vocab[*m.UnkToken]
			if !ok {
				for _, a := range f.AddedTokens {
					if a.Content == *m.UnkToken {
						id, ok = a.ID, true
					}
				}
			}
			if !ok {
				return nil, fmt.Errorf("model.unk_token %q is not in the vocabulary", *m.UnkToken)
			}
			cm.unk = int32(id)
		}
		if cm.decoders, err = parseDecoder(f.Decoder); err != nil {
			return nil, fmt.Errorf("decoder: %w", err)
		}
		t.chars = cm
		t.spaceSplit = uni == nil // Viterbi over a word may cross anything
		for piece := range m.Vocab {
			if innerSpace(piece) {
				t.spaceSplit = false
				break
			}
		}
	}
	if err := t.parsePostProcessor(f.PostProcessor); err != nil {
		return nil, fmt.Errorf("post_processor: %w", err)
	}
	t.added = f.AddedTokens
	sort.SliceStable(t.added, func(i, j int) bool { return len(t.added[i].Content) > len(t.added[j].Content) })
	t.addedByContent = map[string]int{}
	for _, a := range f.AddedTokens {
		if a.Content == "" {
			return nil, fmt.Errorf("added_tokens: id %d has empty content", a.ID)
		}
		t.pieces[a.ID] = a.Content
		t.isAdded[a.ID] = true
		t.addedByContent[a.Content] = a.ID
		t.firstByte[a.Content[0]] = true
	}
	// By first byte, longest first (Gemma 3 has 6,415 added tokens).
	t.addedByFirst = map[byte][]AddedToken{}
	for _, a := range t.added {
		t.addedByFirst[a.Content[0]] = append(t.addedByFirst[a.Content[0]], a)
	}
	return t, nil
}

func (t *Tokenizer) loadMerges(raw json.RawMessage) error {
	var pairs [][2]string
	var asStrings []string
	if err := json.Unmarshal(raw, &asStrings); err == nil {
		pairs = make([][2]string, len(asStrings))
		for i, s := range asStrings {
			a, b, ok := strings.Cut(s, " ")
			if !ok {
				return fmt.Errorf("model.merges[%d]: %q is not a pair", i, s)
			}
			pairs[i] = [2]string{a, b}
		}
	} else if err := json.Unmarshal(raw, &pairs); err != nil {
		return fmt.Errorf("model.merges: %w", err)
	}
	t.merges = make(map[uint64]merge, len(pairs))
	for rank, p := range pairs {
		a, okA := t.vocab[p[0]]
		b, okB := t.vocab[p[1]]
		c, okC := t.vocab[p[0]+p[1]]
		if !okA || !okB || !okC {
			return fmt.Errorf("model.merges[%d]: %q %q: a piece is not in the vocabulary", rank, p[0], p[1])
		}
		k := pairKey(int32(a), int32(b))
		if _, dup := t.merges[k]; !dup {
			t.merges[k] = merge{rank: int32(rank), id: int32(c)}
		}
	}
	return nil
}

type normalizer func(string) string

// nmt is SentencePiece's NMT normalization as Hugging Face's Nmt does it:
// some control characters dropped, other spacing characters made spaces.
func nmt(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 0x01 && r <= 0x08, r == 0x0B, r >= 0x0E && r <= 0x1F, r == 0x7F, r == 0x8F, r == 0x9F:
			return -1
		case r == 0x09, r == 0x0A, r == 0x0C, r == 0x0D, r == 0x1680, r >= 0x200B && r <= 0x200F,
			r == 0x2028, r == 0x2029, r == 0x2581, r == 0xFEFF, r == 0xFFFD:
			return ' '
		}
		return r
	}, s)
}

func parseNormalizer(raw json.RawMessage) (normalizer, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	switch c.Type {
	case "NFC":
		return norm.NFC.String, nil
	case "NFD":
		return norm.NFD.String, nil
	case "NFKC":
		return norm.NFKC.String, nil
	case "NFKD":
		return norm.NFKD.String, nil
	case "Lowercase":
		return strings.ToLower, nil
	case "Nmt":
		return nmt, nil
	case "Replace":
		if c.Pattern == nil {
			return nil, fmt.Errorf("replace: no pattern")
		}
		if c.Pattern.String != nil {
			from, to := *c.Pattern.String, c.Content
			return func(s string) string { return strings.ReplaceAll(s, from, to) }, nil
		}
		if c.Pattern.Regex == nil {
			return nil, fmt.Errorf("replace: no pattern")
		}
		re, err := regex.Compile(*c.Pattern.Regex)
		if err != nil {
			return nil, fmt.Errorf("replace: %w", err)
		}
		to := c.Content
		return func(s string) string {
			var b strings.Builder
			last := 0
			re.FindAll(s, func(a, e int) {
				b.WriteString(s[last:a])
				b.WriteString(to)
				last = e
			})
			b.WriteString(s[last:])
			return b.String()
		}, nil
	case "Prepend":
		pre := c.Prepend
		return func(s string) string {
			if s == "" {
				return s
			}
			return pre + s
		}, nil
	case "Strip":
		left, right := c.Left, c.Right
		return func(s string) string {
			if left {
				s = strings.TrimLeftFunc(s, unicode.IsSpace)
			}
			if right {
				s = strings.TrimRightFunc(s, unicode.IsSpace)
			}
			return s
		}, nil
	case "Sequence":
		var fs []normalizer
		for i, sub := range c.Normalizers {
			f, err := parseNormalizer(sub)
			if err != nil {
				return nil, fmt.Errorf("normalizers[%d]: %w", i, err)
			}
			if f != nil {
				fs = append(fs, f)
			}
		}
		switch len(fs) {
		case 0:
			return nil, nil
		case 1:
			return fs[0], nil
		}
		return func(s string) string {
			for _, f := range fs {
				s = f(s)
			}
			return s
		}, nil
	}
	return nil, fmt.Errorf("type %q is not supported", c.Type)
}

// split is one regex-splitting step of the pre-tokenizer.
type split struct {
	re      *regex.Regexp
	removed bool // behavior Removed: matches are dropped
	// mergePrev, mergeNext: a match joins the piece before it or after it.
	mergePrev, mergeNext bool
	onlyMatches          bool // inverted Removed: text between matches is dropped
}

// isolates is whether sp is an Isolated split on pattern.
func (sp split) isolates(pattern string) bool {
	return sp.re.String() == pattern && !sp.removed && !sp.mergePrev && !sp.mergeNext && !sp.onlyMatches
}

func (t *Tokenizer) parsePreTokenizer(raw json.RawMessage, at int) (splits []split, byteLevel bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, false, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, false, err
	}
	switch c.Type {
	case "Sequence":
		for i, sub := range c.Pretokenizers {
			s, bl, err := t.parsePreTokenizer(sub, at+i)
			if err != nil {
				return nil, false, fmt.Errorf("pretokenizers[%d]: %w", i, err)
			}
			if byteLevel && len(s) > 0 {
				return nil, false, fmt.Errorf("pretokenizers[%d]: a split after ByteLevel is not supported", i)
			}
			splits = append(splits, s...)
			byteLevel = byteLevel || bl
		}
		return splits, byteLevel, nil
	case "Split":
		if c.Invert && c.Behavior != "Removed" {
			return nil, false, fmt.Errorf("split: invert is supported with behavior Removed only")
		}
		if c.Pattern == nil {
			return nil, false, fmt.Errorf("split: no pattern")
		}
		var pat string
		switch {
		case c.Pattern.Regex != nil:
			pat = *c.Pattern.Regex
		case c.Pattern.String != nil:
			pat = quoteMeta(*c.Pattern.String)
		}
		re, err := regex.Compile(pat)
		if err != nil {
			return nil, false, err
		}
		switch c.Behavior {
		case "Isolated":
			return []split{{re: re}}, false, nil
		case "Removed":
			if c.Invert { // the matches are the pieces; what lies between goes (tiktoken conversions)
				return []split{{re: re, onlyMatches: true}}, false, nil
			}
			return []split{{re: re, removed: true}}, false, nil
		case "MergedWithPrevious":
			return []split{{re: re, mergePrev: true}}, false, nil
		case "MergedWithNext":
			return []split{{re: re, mergeNext: true}}, false, nil
		}
		return nil, false, fmt.Errorf("split: behavior %q is not supported", c.Behavior)
	case "ByteLevel":
		if c.AddPrefixSpace != nil && *c.AddPrefixSpace {
			return nil, false, fmt.Errorf("ByteLevel.add_prefix_space is not supported")
		}
		if c.UseRegex == nil || *c.UseRegex {
			splits = append(splits, split{re: regex.MustCompile(gpt2Pattern)})
		}
		return splits, true, nil
	case "Metaspace":
		if at > 0 {
			return nil, false, fmt.Errorf("metaspace: only as the first pre-tokenizer")
		}
		m := &metaspace{replacement: c.Replacement, prepend: c.PrependScheme}
		if m.replacement == "" {
			m.replacement = "▁"
		}
		if m.prepend == "" { // older files: add_prefix_space
			m.prepend = "always"
			if c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
				m.prepend = "never"
			}
		}
		t.meta = m
		if c.Split == nil || *c.Split {
			return []split{{re: regex.MustCompile(quoteMeta(m.replacement)), mergeNext: true}}, false, nil
		}
		return nil, false, nil
	case "Digits":
		pat := `\p{N}+`
		if c.IndividualDigits {
			pat = `\p{N}`
		}
		return []split{{re: regex.MustCompile(pat)}}, false, nil
	}
	return nil, false, fmt.Errorf("type %q is not supported", c.Type)
}

func quoteMeta(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// parsePostProcessor reads the tokens that add_special_tokens would add
// (Llama 3's <|begin_of_text|>); chat templates write their own, so Render
// never adds them.
func (t *Tokenizer) parsePostProcessor(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var c struct {
		Type       string            `json:"type"`
		Processors []json.RawMessage `json:"processors"`
		Single     []struct {
			SpecialToken *struct {
				ID string `json:"id"`
			} `json:"SpecialToken"`
			Sequence *struct {
				ID string `json:"id"`
			} `json:"Sequence"`
		} `json:"single"`
		SpecialTokens map[string]struct {
			IDs []int `json:"ids"`
		} `json:"special_tokens"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return err
	}
	switch c.Type {
	case "Sequence":
		for i, p := range c.Processors {
			if err := t.parsePostProcessor(p); err != nil {
				return fmt.Errorf("processors[%d]: %w", i, err)
			}
		}
	case "TemplateProcessing":
		seen := false
		for _, piece := range c.Single {
			switch {
			case piece.Sequence != nil:
				seen = true
			case piece.SpecialToken != nil:
				ids := c.SpecialTokens[piece.SpecialToken.ID].IDs
				if seen {
					t.suffix = append(t.suffix, ids...)
				} else {
					t.prefix = append(t.prefix, ids...)
				}
			}
		}
	}
	return nil
}
