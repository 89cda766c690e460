// Package simllm is a SIMULATOR of an inference server, for tests and
// benchmarks only. It speaks vLLM's HTTP protocol (and NeMo RL's /generate)
// with the same field names, but its "model" is a scripted policy and its
// tokenizer a small deterministic one. It never pretends to be a real model.
package simllm

import (
	"sort"
	"strings"
)

// Special tokens of the simulator's tokenizer.
var specials = []string{
	"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
	"<think>", "</think>", "<tool_response>", "</tool_response>",
}

const (
	idEndOfText = 0
	idImStart   = 1
	idImEnd     = 2
	byteBase    = 16
	wordBase    = byteBase + 256
)

// words are multi-byte tokens, matched longest first; a real BPE vocabulary
// is not needed to prove token exactness, only a stable, non-trivial one.
var words = []string{
	" the", " answer", " is", "The", " boxed", "\\boxed", "{", "}", "\n", "\n\n", " ", "  ", "    ",
	"system", "user", "assistant", "tool", " of", " to", " and", " a", " in", " what", "What", " Let", "Let",
	" me", " think", " about", " problem", " solve", " step", " by", "\"name\"", "\"arguments\"", "\"message\"",
	"\"thought\"", "finish", "think", ": ", ", ", "{\"", "\"}", "\": ", "\", \"", "}}", "0", "1", "2", "3", "4",
	"5", "6", "7", "8", "9", "10", "100", "1000", " +", " -", " *", " /", " =", "?", ".", ",", "\\frac",
	" You", " are", " function", " functions", " call", "json", " with", " within", "<tools>", "</tools>",
	" Compute", " compute", " number", " value", "# Tools", " provided", " signatures", " XML", " tags",
}

// Tokenizer is the simulator's deterministic tokenizer.
type Tokenizer struct {
	vocab  []string       // id -> text
	byText map[string]int // multi-byte text -> id
	maxLen int
}

// NewTokenizer builds the tokenizer.
func NewTokenizer() *Tokenizer {
	t := &Tokenizer{byText: map[string]int{}}
	t.vocab = make([]string, wordBase+len(words))
	for i, s := range specials {
		t.vocab[i] = s
	}
	for i := len(specials); i < byteBase; i++ {
		t.vocab[i] = ""
	}
	for b := 0; b < 256; b++ {
		t.vocab[byteBase+b] = string([]byte{byte(b)})
	}
	ws := append([]string{}, words...)
	sort.Strings(ws)
	for i, w := range words {
		t.vocab[wordBase+i] = w
		if len(w) > 1 {
			t.byText[w] = wordBase + i
		}
		if len(w) > t.maxLen {
			t.maxLen = len(w)
		}
	}
	return t
}

// VocabSize is the number of ids.
func (t *Tokenizer) VocabSize() int { return len(t.vocab) }

// Encode tokenises text; special-token strings become special ids.
func (t *Tokenizer) Encode(s string) []int {
	out := make([]int, 0, len(s)/2)
	for i := 0; i < len(s); {
		if s[i] == '<' {
			matched := false
			for id, sp := range specials {
				if strings.HasPrefix(s[i:], sp) {
					out = append(out, id)
					i += len(sp)
					matched = true
					break
				}
			}
			if matched {
				continue
			}
		}
		n := min(t.maxLen, len(s)-i)
		found := false
		for ; n > 1; n-- {
			if id, ok := t.byText[s[i:i+n]]; ok {
				out = append(out, id)
				i += n
				found = true
				break
			}
		}
		if !found {
			out = append(out, byteBase+int(s[i]))
			i++
		}
	}
	return out
}

// Decode turns ids back into text; unknown ids decode to nothing.
func (t *Tokenizer) Decode(ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		if id >= 0 && id < len(t.vocab) {
			b.WriteString(t.vocab[id])
		}
	}
	return b.String()
}

// TokenString is one id's text, for /tokenize's token_strs.
func (t *Tokenizer) TokenString(id int) string {
	if id >= 0 && id < len(t.vocab) {
		return t.vocab[id]
	}
	return ""
}
