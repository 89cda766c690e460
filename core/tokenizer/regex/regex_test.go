package regex

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// The pre-tokenizer patterns of the reference tokenizers.
var patterns = map[string]string{
	"gpt2":     `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`,
	"qwen2":    `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	"llama3":   `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	"ds3-num":  `\p{N}{1,3}`,
	"ds3-cjk":  "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
	"ds3-main": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
	"lazy":     `a+?b|(?:ab)+c|(?:x|y){2,3}z|\d*?q|(?=x)`,
}

var inputs = []string{
	"", "hello world", "Hello   world  \n\n  x", "I'M here, it's 'll", "12345 678",
	"  leading and trailing  ", "tabs\t\tand\r\nCRLF\r\n", "émojis 😀🎉 and 中文字符 ひらがな カタカナ",
	"code: func(x int) { return x*2 }\n\treturn", "a\u00a0b\u2003c", "$$$ ... !!! ???\n\n",
	"abab abc xyz xyxz xxyz 123", "'S'T'RE", "\n\n\n", "   ", "x  ", "ǅungla Σίσυφος",
}

func reference(t testing.TB, pat string) *regexp2.Regexp {
	re, err := regexp2.Compile(pat, regexp2.Unicode)
	if err != nil {
		t.Fatalf("regexp2 %q: %v", pat, err)
	}
	return re
}

func refFindAll(re *regexp2.Regexp, s string) []string {
	var out []string
	runes := []rune(s)
	// regexp2 reports rune offsets; convert to byte strings.
	m, _ := re.FindRunesMatch(runes)
	for m != nil {
		out = append(out, m.String())
		m, _ = re.FindNextMatch(m)
	}
	return out
}

func ourFindAll(re *Regexp, s string) []string {
	var out []string
	re.FindAll(s, func(a, b int) { out = append(out, s[a:b]) })
	return out
}

func TestAgainstBacktrackingReference(t *testing.T) {
	for name, pat := range patterns {
		ours := MustCompile(pat)
		ref := reference(t, pat)
		for _, in := range inputs {
			t.Run(fmt.Sprintf("%s/%q", name, in), func(t *testing.T) {
				got, want := ourFindAll(ours, in), refFindAll(ref, in)
				if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
					t.Fatalf("got  %q\nwant %q", got, want)
				}
			})
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, pat := range []string{`(`, `a)`, `[a`, `*a`, `\p{Nope}`, `(?<x>a)`, `a{3,1}`, `a++`, `\q`} {
		if _, err := Compile(pat); err == nil {
			t.Errorf("%q: want an error", pat)
		}
	}
}

func FuzzAgainstReference(f *testing.F) {
	for _, in := range inputs {
		f.Add(in)
	}
	type pair struct {
		ours *Regexp
		ref  *regexp2.Regexp
	}
	var pairs []pair
	for _, pat := range patterns {
		pairs = append(pairs, pair{MustCompile(pat), reference(f, pat)})
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !utf8.ValidString(in) {
			return
		}
		for _, p := range pairs {
			got, want := ourFindAll(p.ours, in), refFindAll(p.ref, in)
			if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
				t.Fatalf("%s on %q:\ngot  %q\nwant %q", p.ours, in, got, want)
			}
		}
	})
}
