package regex

import (
	"unicode"
	"unicode/utf8"
)

// Hand-written matchers for the pre-tokenizer patterns of the chat models
// most used (Qwen 2/3, Llama 3, DeepSeek V3), chosen by the pattern's exact
// text. The backtracking matcher took four fifths of encoding time on
// them; these read each character once or twice. Each must give the same
// matches as the general matcher on any input, valid UTF-8 or not
// (FuzzFastAgainstGeneral), which is itself checked against regexp2.
var fastMatchers = map[string]func(s string, i int) int{
	cl100kQwen:       cl100k{digits: 1}.match,
	cl100kLlama3:     cl100k{digits: 3}.match,
	deepSeek3Pattern: deepSeek3,
}

const (
	cl100kQwen       = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	cl100kLlama3     = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
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

	cl100kClasses = cLetter | cNumber | cSpace
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := range rune(utf8.RuneSelf) {
		t[c] = classOf(c)
	}
	return t
}()

func classOf(r rune) uint8 {
	var c uint8
	if unicode.Is(unicode.L, r) {
		c |= cLetter
	}
	if unicode.Is(unicode.N, r) {
		c |= cNumber
	}
	if unicode.Is(unicode.White_Space, r) {
		c |= cSpace
	}
	if unicode.Is(unicode.M, r) {
		c |= cMark
	}
	if unicode.Is(unicode.P, r) {
		c |= cPunct
	}
	if unicode.Is(unicode.S, r) {
		c |= cSymbol
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
	if r == '\'' && i+1 < len(s) {
		r1, n1, _ := at(s, i+1)
		var second rune // of 're', 've', 'll'
		switch foldASCII(r1) {
		case 's', 't', 'm', 'd':
			return i + 1 + n1
		case 'r', 'v':
			second = 'e'
		case 'l':
			second = 'l'
		}
		if j := i + 1 + n1; second != 0 && j < len(s) {
			if r2, n2, _ := at(s, j); foldASCII(r2) == second {
				return j + n2
			}
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
		return punctuation(s, i, cl100kClasses, 0)
	}
	if r == ' ' && j < len(s) {
		if _, _, c := at(s, j); c&cl100kClasses == 0 {
			return punctuation(s, j, cl100kClasses, 0)
		}
	}
	return whitespace(s, i)
}

// whitespace matches \s*[\r\n]+|\s+(?!\S)|\s+ at i, whitespace: to its
// last newline, if it has one; else all of it, or all but its last
// character when a non-space follows.
func whitespace(s string, i int) int {
	end := run(s, i, cSpace, -1)
	for j := end - 1; j >= i; j-- {
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

// punctuation matches a run of characters then [\r\n]* at i, whose first
// character is in the run: with in 0, characters with no class of out
// ([^\s\p{L}\p{N}]+); else those with a class of in ([\p{P}\p{S}]+).
func punctuation(s string, i int, out, in uint8) int {
	if in != 0 {
		i = run(s, i, in, -1)
	}
	for in == 0 && i < len(s) {
		_, size, class := at(s, i)
		if class&out != 0 {
			break
		}
		i += size
	}
	for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
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
		return punctuation(s, i, 0, punct)
	}
	if r == ' ' && j < len(s) {
		if _, _, c := at(s, j); c&punct != 0 {
			return punctuation(s, j, 0, punct)
		}
	}
	if class&cSpace != 0 {
		return whitespace(s, i)
	}
	return -1
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
