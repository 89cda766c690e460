package simllm

import (
	"encoding/json"
	"math/rand"
	"slices"
	"strings"
	"testing"
)

// longestMatch is the tokenizer's rule written the plain way: a special
// token where one starts, else the longest vocabulary entry of two or more
// bytes, else the byte.
func longestMatch(t *Tokenizer, s string) []int {
	var out []int
	for i := 0; i < len(s); {
		if id := slices.IndexFunc(specials, func(sp string) bool { return strings.HasPrefix(s[i:], sp) }); id >= 0 {
			out = append(out, id)
			i += len(specials[id])
			continue
		}
		best, n := byteBase+int(s[i]), 1
		for id := wordBase; id < len(t.vocab); id++ {
			if w := t.vocab[id]; len(w) >= 2 && len(w) > n && strings.HasPrefix(s[i:], w) {
				best, n = id, len(w)
			}
		}
		out = append(out, best)
		i += n
	}
	return out
}

func TestEncodeIsLongestMatch(t *testing.T) {
	tok := NewTokenizer()
	r := rand.New(rand.NewSource(1))
	for range 500 {
		var b strings.Builder
		for range r.Intn(40) {
			switch r.Intn(4) {
			case 0:
				b.WriteString(tok.vocab[wordBase+r.Intn(len(tok.vocab)-wordBase)])
			case 1:
				b.WriteString(specials[r.Intn(len(specials))])
			case 2:
				b.WriteByte(byte(r.Intn(256)))
			default:
				w := tok.vocab[wordBase+r.Intn(len(tok.vocab)-wordBase)]
				b.WriteString(w[:r.Intn(len(w))+1]) // a prefix: the trie's dead ends
			}
		}
		s := b.String()
		if got, want := tok.Encode(s), longestMatch(tok, s); !slices.Equal(got, want) {
			t.Fatalf("Encode(%q) = %v, want %v", s, got, want)
		}
	}
}

func FuzzEncodeIsLongestMatch(f *testing.F) {
	tok := NewTokenizer()
	for _, s := range []string{"", "the The  the", "<|im_start|>user\n\\boxed{1000}", "\"properties\": {\"name\"", "<tool_cal", "\xff\x00<"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := tok.Encode(s), longestMatch(tok, s); !slices.Equal(got, want) {
			t.Fatalf("Encode(%q) = %v, want %v", s, got, want)
		}
	})
}

// A tool's definition is compacted once and remembered: the same bytes as
// compacting it afresh, and not changed by the caller's buffer changing.
func TestCompactToolRemembers(t *testing.T) {
	for _, raw := range []string{
		`{"name": "think",  "parameters": {"type": "object", "b": 1, "a": "<&>"}}`,
		`not json {`,
		`{"name":"x"}`,
	} {
		buf := []byte(raw)
		want := string(compactJSON(json.RawMessage(raw)))
		first := string(compactTool(buf))
		for i := range buf {
			buf[i] = ' ' // a request body reused
		}
		if again := string(compactTool(json.RawMessage(raw))); first != want || again != want {
			t.Errorf("compactTool(%q) = %q then %q, want %q", raw, first, again, want)
		}
	}
}
