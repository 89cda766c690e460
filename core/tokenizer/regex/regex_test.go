package regex

import (
	"fmt"
	"math/rand"
	"slices"
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
	"o200k":    `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
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
		for _, in := range append(slices.Clone(inputs), fastInputs...) {
			if !utf8.ValidString(in) {
				continue // regexp2 reads runes
			}
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

// fastInputs are the cases the hand-written matcher decides itself.
var fastInputs = []string{
	"'ſ 'ſt 'LL 'Re 'rE 'VE 'D 'x ''s '", " \t\n x", "\u3000\u3000x\u3000", "a\xffb \xff\xfe!", " !", "\t!", "\r\nabc",
	"x \u00a0y", "12345 ١٢٣٤ Ⅻ ½", "e\u0301t\u0308 \u0301", "a  \n", " \n \n  ", "\u2028x", "\u0085y", "x\r", "'\u212a",
	"\xe3\x80 a", "  \xe3\x80\x80", "?!\r\n\r\nx", " ?? \n", "\x00\x1f a", "'",
	"HTMLParser's XMLHttpRequest iPhone McDONALD'S ǅungla ǈx", "ʰaʰ Aʰb Ǆ\u0301x \u0301a a\u0301B", " /path//to/ ,/\r\n",
	"'s's 'Sx 'l 'll 'LL'", "ŉ ﬁ ǅ ᾈ", "ＡＢｃ", "\u0300\u0300", "a\u0300", " \u0300x", "\t\u0300",
}

// FuzzFastAgainstGeneral checks the hand-written matchers against the
// general one (itself checked against regexp2 above) on any bytes.
func FuzzFastAgainstGeneral(f *testing.F) {
	for _, in := range append(slices.Clone(inputs), fastInputs...) {
		f.Add(in)
	}
	type pair struct{ fast, general *Regexp }
	var pairs []pair
	for pat := range fastMatchers {
		fast, general := MustCompile(pat), MustCompile(pat)
		general.fast = nil
		if fast.fast == nil {
			f.Fatalf("%q: no fast matcher", pat)
		}
		pairs = append(pairs, pair{fast, general})
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, p := range pairs {
			got, want := ourFindAll(p.fast, in), ourFindAll(p.general, in)
			if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
				t.Fatalf("%s on %q:\ngot  %q\nwant %q", p.fast, in, got, want)
			}
		}
	})
}

// TestFastAgainstGeneralDense compares the hand-written matchers with the
// general one on strings drawn from the characters their alternatives
// tell apart, denser in the hard cases than random bytes are.
func TestFastAgainstGeneralDense(t *testing.T) {
	alphabet := []string{"a", "Z", "s", "S", "ſ", "l", "L", "e", "E", "r", "v", "t", "m", "d", "'", "ǅ", "ʰ", "中", "ひ", "\u0301", "\u20dd",
		"٣", "7", "Ⅻ", " ", "  ", "\t", "\r", "\n", "\u00a0", "\u3000", "/", "!", ".", "$", "€", "_", "\x00", "\xff", "\xe3\x80"}
	r := rand.New(rand.NewSource(34))
	for pat := range fastMatchers {
		fast, general := MustCompile(pat), MustCompile(pat)
		general.fast = nil
		for range 20000 {
			var b strings.Builder
			for range r.Intn(12) {
				b.WriteString(alphabet[r.Intn(len(alphabet))])
			}
			in := b.String()
			if got, want := ourFindAll(fast, in), ourFindAll(general, in); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
				t.Fatalf("%s on %q:\ngot  %q\nwant %q", pat, in, got, want)
			}
		}
	}
}
