package regex

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Hand-written matchers for the pre-tokenizer patterns of the chat models
// most used (Qwen 2/3, Llama 3, DeepSeek V3, GPT-4o and gpt-oss, and GPT-2's
// that ByteLevel splits with), chosen by the pattern's exact text. The backtracking matcher took four fifths of encoding time on
// them; these read each character once or twice. Each must give the same
// matches as the general matcher on any input, valid UTF-8 or not
// (FuzzFastAgainstGeneral), which is itself checked against regexp2.
var fastMatchers = map[string]func(s string, i int) int{
	cl100kQwen:       cl100k{digits: 1}.match,
	cl100kLlama3:     cl100k{digits: 3}.match,
	deepSeek3Pattern: deepSeek3,
	o200kPattern:     o200k,
	gpt2Pattern:      gpt2,
}

const (
	cl100kQwen       = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	cl100kLlama3     = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	o200kPattern     = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	gpt2Pattern      = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	deepSeek3Pattern = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)

// Character classes, as the general matcher's sets define them.
const (
	cLetter = 1 << iota // \p{L}
	cNumber             // \p{N}
	cSpace              // \s: White_Space
	cMark               // \p{M}
	cPunct              // \p{P}
	cSymbol             // \p{S}
	cUpper              // \p{Lu}, \p{Lt}
	cLower              // \p{Ll}

	cl100kClasses = cLetter | cNumber | cSpace
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := range rune(utf8.RuneSelf) {
		t[c] = classOf(c)
	}
	return t
}()

// classTables are the Unicode tables behind each class bit.
var classTables = []struct {
	bit  uint8
	tabs []*unicode.RangeTable
}{
	{cLetter, []*unicode.RangeTable{unicode.L}},
	{cNumber, []*unicode.RangeTable{unicode.N}},
	{cSpace, []*unicode.RangeTable{unicode.White_Space}},
	{cMark, []*unicode.RangeTable{unicode.M}},
	{cPunct, []*unicode.RangeTable{unicode.P}},
	{cSymbol, []*unicode.RangeTable{unicode.S}},
	{cUpper, []*unicode.RangeTable{unicode.Lu, unicode.Lt}},
	{cLower, []*unicode.RangeTable{unicode.Ll}},
}

func classOf(r rune) uint8 {
	var c uint8
	for _, t := range classTables {
		if unicode.IsOneOf(t.tabs, r) {
			c |= t.bit
		}
	}
	return c
}

// at decodes the character at s[i] (i < len(s)) and its class.
func at(s string, i int) (r rune, size int, class uint8) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1, asciiClass[c]
	}
	r, size = utf8.DecodeRuneInString(s[i:])
	return r, size, classOf(r)
}

// run returns the end of the run of characters from i whose class has a
// bit of want, at most max of them (max < 0: no limit).
func run(s string, i int, want uint8, max int) int {
	for n := 0; i < len(s) && n != max; n++ {
		if c := s[i]; c < utf8.RuneSelf {
			if asciiClass[c]&want == 0 {
				break
			}
			i++
			continue
		}
		_, size, class := at(s, i)
		if class&want == 0 {
			break
		}
		i += size
	}
	return i
}

// foldASCII is the ASCII lower-case letter r folds to (as (?i) matches
// it: 'ſ' matches 's'), or 0.
func foldASCII(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return foldASCII(f)
		}
	}
	return 0
}

// cl100k matches tiktoken's cl100k pattern as Qwen 2/3 (digits 1) and
// Llama 3 (digits 3) write it for Hugging Face tokenizers. Its
// alternatives, tried in order at each position (leftmost-first):
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)   a contraction, case folded
//	[^\r\n\p{L}\p{N}]?\p{L}+       letters, after one optional other character
//	\p{N}{1,digits}                digits
//	 ?[^\s\p{L}\p{N}]+[\r\n]*      punctuation, after an optional space, then newlines
//	\s*[\r\n]+                     whitespace up to its last newline
//	\s+(?!\S)                      whitespace but the last before a non-space
//	\s+                            whitespace
type cl100k struct{ digits int }

// match returns the end of the match at i, or -1 (only at the end of s:
// every character starts one of the alternatives).
func (p cl100k) match(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	r, size, class := at(s, i)
	if r == '\'' {
		if end := contraction(s, i, true); end > 0 {
			return end
		}
	}
	switch {
	case class&cLetter != 0:
		return run(s, i, cLetter, -1)
	case class&cNumber != 0:
		return run(s, i, cNumber, p.digits)
	}
	// Another character or whitespace: a prefix to letters (but \r, \n),
	// else punctuation, after one optional space.
	j := i + size
	if r != '\r' && r != '\n' && j < len(s) {
		if _, _, c := at(s, j); c&cLetter != 0 {
			return run(s, j, cLetter, -1)
		}
	}
	if class&cl100kClasses == 0 {
		return trailing(s, runNot(s, i, cl100kClasses), "\r\n")
	}
	if r == ' ' && j < len(s) {
		if _, _, c := at(s, j); c&cl100kClasses == 0 {
			return trailing(s, runNot(s, j, cl100kClasses), "\r\n")
		}
	}
	return whitespace(s, i, true)
}

// whitespace matches \s*[\r\n]+|\s+(?!\S)|\s+ at i, whitespace: to its
// last newline, if it has one (with newlines: GPT-2's pattern has no
// \s*[\r\n]+); else all of it, or all but its last character when a
// non-space follows.
func whitespace(s string, i int, newlines bool) int {
	end := run(s, i, cSpace, -1)
	for j := end - 1; newlines && j >= i; j-- {
		if s[j] == '\r' || s[j] == '\n' {
			return j + 1
		}
	}
	if end == len(s) {
		return end
	}
	if _, last := utf8.DecodeLastRuneInString(s[:end]); end-last > i {
		return end - last
	}
	return end
}

// runNot returns the end of the run of characters from i whose class has
// no bit of out ([^\s\p{L}\p{N}]+ with out cl100kClasses).
func runNot(s string, i int, out uint8) int {
	for i < len(s) {
		_, size, class := at(s, i)
		if class&out != 0 {
			break
		}
		i += size
	}
	return i
}

// trailing returns the end of the run of bytes from i that are in set
// ([\r\n]*).
func trailing(s string, i int, set string) int {
	for i < len(s) && strings.IndexByte(set, s[i]) >= 0 {
		i++
	}
	return i
}

// deepSeek3 matches DeepSeek V3's last split (its first two isolate
// digits and CJK runs):
//
//	[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+   ASCII punctuation, then ASCII letters
//	[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+               letters and marks, after one optional other character
//	 ?[\p{P}\p{S}]+[\r\n]*                             punctuation, after an optional space, then newlines
//	\s*[\r\n]+|\s+(?!\S)|\s+                           whitespace, as cl100k's
//
// Other characters (digits, controls) match none: -1.
func deepSeek3(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	const word, punct = cLetter | cMark, cPunct | cSymbol
	r, size, class := at(s, i)
	j := i + size
	if j < len(s) && isASCIILetter(s[j]) && r < utf8.RuneSelf && class&punct != 0 {
		for j < len(s) && isASCIILetter(s[j]) {
			j++
		}
		return j
	}
	if class&word != 0 {
		return run(s, i, word, -1)
	}
	if r != '\r' && r != '\n' && class&punct == 0 && j < len(s) {
		if _, _, c := at(s, j); c&word != 0 {
			return run(s, j, word, -1)
		}
	}
	if class&punct != 0 {
		return trailing(s, run(s, i, punct, -1), "\r\n")
	}
	if r == ' ' && j < len(s) {
		if _, _, c := at(s, j); c&punct != 0 {
			return trailing(s, run(s, j, punct, -1), "\r\n")
		}
	}
	if class&cSpace != 0 {
		return whitespace(s, i, true)
	}
	return -1
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// contraction matches 's|'t|'re|'ve|'m|'ll|'d at i, case folded if fold
// (as (?i:...) does: 'ſ matches 's), or returns -1.
func contraction(s string, i int, fold bool) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return -1
	}
	lower := func(r rune) rune {
		if fold {
			return foldASCII(r)
		}
		return r
	}
	r1, n1, _ := at(s, i+1)
	var second rune // of 're', 've', 'll'
	switch lower(r1) {
	case 's', 't', 'm', 'd':
		return i + 1 + n1
	case 'r', 'v':
		second = 'e'
	case 'l':
		second = 'l'
	}
	if j := i + 1 + n1; second != 0 && j < len(s) {
		if r2, n2, _ := at(s, j); lower(r2) == second {
			return j + n2
		}
	}
	return -1
}

// o200k matches tiktoken's o200k pattern (GPT-4o, gpt-oss):
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	\p{N}{1,3}
//	 ?[^\s\p{L}\p{N}]+[\r\n/]*
//	\s*[\r\n]+|\s+(?!\S)|\s+
//
// A word is a run of upper-case letters (U) then lower-case ones (W);
// modifier and other letters and marks are both.
func o200k(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	r, size, class := at(s, i)
	j := i + size
	prefix := r != '\r' && r != '\n' && class&(cLetter|cNumber) == 0 && j < len(s)
	for _, word := range []func(string, int) int{upperLower, upperRun} {
		if prefix {
			if end := word(s, j); end >= 0 {
				return end
			}
		}
		if end := word(s, i); end >= 0 {
			return end
		}
	}
	if class&cNumber != 0 {
		return run(s, i, cNumber, 3)
	}
	if class&cl100kClasses == 0 {
		return trailing(s, runNot(s, i, cl100kClasses), "\r\n/")
	}
	if r == ' ' && j < len(s) {
		if _, _, c := at(s, j); c&cl100kClasses == 0 {
			return trailing(s, runNot(s, j, cl100kClasses), "\r\n/")
		}
	}
	if class&cSpace != 0 {
		return whitespace(s, i, true)
	}
	return -1
}

func isUpperish(c uint8) bool { return c&(cLetter|cMark) != 0 && c&cLower == 0 }
func isLowerish(c uint8) bool { return c&(cLetter|cMark) != 0 && c&cUpper == 0 }

// upperLower matches U*W+ then an optional contraction at i, or returns -1.
// U* takes all it can and gives back until W+ can start: at the first
// character after the U run if it is W, else at the last W inside it,
// where W+ then ends (what follows it is U only).
func upperLower(s string, i int) int {
	lastW, q := -1, i
	for q < len(s) {
		_, size, c := at(s, q)
		if !isUpperish(c) {
			break
		}
		if isLowerish(c) {
			lastW = q
		}
		q += size
	}
	end := -1
	if q < len(s) {
		if _, _, c := at(s, q); isLowerish(c) {
			end = lowerRun(s, q)
		}
	}
	if end < 0 {
		if lastW < 0 {
			return -1
		}
		_, size, _ := at(s, lastW)
		end = lastW + size
	}
	return withContraction(s, end)
}

// upperRun matches U+W* then an optional contraction at i, or returns -1.
func upperRun(s string, i int) int {
	q := i
	for q < len(s) {
		_, size, c := at(s, q)
		if !isUpperish(c) {
			break
		}
		q += size
	}
	if q == i {
		return -1
	}
	return withContraction(s, lowerRun(s, q))
}

func lowerRun(s string, i int) int {
	for i < len(s) {
		_, size, c := at(s, i)
		if !isLowerish(c) {
			break
		}
		i += size
	}
	return i
}

func withContraction(s string, end int) int {
	if e := contraction(s, end, true); e > 0 {
		return e
	}
	return end
}

// gpt2 matches GPT-2's pattern (ByteLevel's own split):
//
//	's|'t|'re|'ve|'m|'ll|'d         a contraction, case-sensitive
//	 ?\p{L}+| ?\p{N}+               letters, digits, after an optional space
//	 ?[^\s\p{L}\p{N}]+             punctuation, after an optional space
//	\s+(?!\S)|\s+                   whitespace, but its last before a non-space
func gpt2(s string, i int) int {
	if end := contraction(s, i, false); end > 0 {
		return end
	}
	if i >= len(s) {
		return -1
	}
	r, size, class := at(s, i)
	start, c := i, class
	if j := i + size; r == ' ' && j < len(s) {
		if _, _, next := at(s, j); next&cSpace == 0 {
			start, c = j, next
		}
	}
	switch {
	case c&cLetter != 0:
		return run(s, start, cLetter, -1)
	case c&cNumber != 0:
		return run(s, start, cNumber, -1)
	case c&cl100kClasses == 0:
		return runNot(s, start, cl100kClasses)
	}
	return whitespace(s, i, false)
}
