// Package simllm is a SIMULATOR of an inference server, for tests and
// benchmarks only. It speaks vLLM's HTTP protocol (and NeMo RL's /generate)
// with the same field names, but its "model" is a scripted policy and its
// tokenizer a small deterministic one. It never pretends to be a real model.
package simllm

import "strings"

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

// common words get four variants each (w, " w", W, " W"), so the tokenizer
// compresses English and JSON about as well as a real BPE vocabulary (about
// four characters per token): token counts, and so every payload, stay realistic.
var common = strings.Fields(`the be to of and a in that have i it for not on with he as you do at this but his by
from they we say her she or an will my one all would there their what so up out if about who get which go me when
make can like time no just him know take people into year your good some could them see other than then now look
only come its over think also back after use two how our work first well way even new want because any these give
day most us is are was were been has had did does done said made problem solve step answer final value number
compute find let call function functions tool tools result results provided signatures within tags json object name
arguments message thought finish think user assistant system helpful careful mathematician solve solution given
therefore thus hence equal equals sum total product difference divide divided multiply times plus minus fraction
integer integers positive negative square root area circle radius triangle right length side angle degrees prime
remainder divisors roots equation expand simplify write lowest terms give may more query return each description
type string properties required parameters summary logged log obtain information change anything just reasoning
needed complex signals task complete put the and`)

// pieces are frequent multi-byte fragments of templates, JSON and math.
var pieces = []string{
	"\n", "\n\n", "  ", "    ", "{", "}", "{\"", "\"}", "\": ", "\", \"", "}}", ": ", ", ", ".", ",", "?", "\\boxed", "\\frac",
	"\"name\"", "\"arguments\"", "\"message\"", "\"thought\"", "\"type\"", "\"object\"", "\"string\"", "\"properties\"",
	"\"required\"", "\"description\"", "\"parameters\"", "<tools>", "</tools>", "# Tools", "XML", " XML", "<function-name>",
	"<args-json-object>", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "100", "1000", " +", " -", " *", " /", " =",
	" (", ")", "(", "[", "]", "^", "_", "$", "\\", ":\n", ".\n", "!", "'s", "n't",
}

func vocabulary() []string {
	seen := map[string]bool{}
	var out []string
	add := func(w string) {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	for _, p := range pieces {
		add(p)
	}
	for _, w := range common {
		up := strings.ToUpper(w[:1]) + w[1:]
		for _, v := range []string{w, " " + w, up, " " + up} {
			add(v)
		}
	}
	return out
}

var words = vocabulary()

// Tokenizer is the simulator's deterministic tokenizer.
type Tokenizer struct {
	vocab []string // id -> text
	// trie of multi-byte tokens for longest-match encoding: node n's child
	// for byte c is next[n][c] (0: none; node 0 is the root), and the token
	// ending at n is ids[n] (-1: none). Arrays, not maps: encoding every
	// prompt was a quarter of the simulator's CPU with a map per node.
	next [][256]uint16
	ids  []int32
}

// NewTokenizer builds the tokenizer.
func NewTokenizer() *Tokenizer {
	t := &Tokenizer{next: make([][256]uint16, 1), ids: []int32{-1}}
	t.vocab = make([]string, wordBase+len(words))
	copy(t.vocab, specials)
	for i := len(specials); i < byteBase; i++ {
		t.vocab[i] = ""
	}
	for b := 0; b < 256; b++ {
		t.vocab[byteBase+b] = string([]byte{byte(b)})
	}
	for i, w := range words {
		t.vocab[wordBase+i] = w
		if len(w) < 2 {
			continue
		}
		n := 0
		for j := 0; j < len(w); j++ {
			c := t.next[n][w[j]]
			if c == 0 {
				if len(t.next) == 1<<16 {
					panic("simllm: tokenizer trie too large for uint16 node numbers")
				}
				c = uint16(len(t.next))
				t.next = append(t.next, [256]uint16{})
				t.ids = append(t.ids, -1)
				t.next[n][w[j]] = c
			}
			n = int(c)
		}
		t.ids[n] = int32(wordBase + i)
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
		best, bestLen := -1, 0
		n := 0
		for j := i; j < len(s); j++ {
			n = int(t.next[n][s[j]])
			if n == 0 {
				break
			}
			if id := t.ids[n]; id >= 0 && j+1-i >= 2 {
				best, bestLen = int(id), j+1-i
			}
		}
		if best >= 0 {
			out = append(out, best)
			i += bestLen
		} else {
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
