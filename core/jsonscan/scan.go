// Package jsonscan reads JSON documents of known shapes fast: the
// inference engines' answers carry hundreds of numbers, which the generic
// decoder reads at ~50 µs and one allocation per token id. A decoder built
// on it reads exactly the shape it expects and gives up on anything
// unusual (an escaped key, a duplicate or case-folded field, a float where
// an id belongs), so the generic decoder, whose results it must equal,
// decides.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Scanner reads one JSON document; every method validates what it
// passes, and gives up (false) on what it does not read exactly as
// encoding/json would, so a caller falls back to that decoder.
type Scanner struct {
	b []byte
	i int
}

// New scans b.
func New(b []byte) *Scanner { return &Scanner{b: b} }

// Pos is where the scanner is; Rewind goes back there.
func (s *Scanner) Pos() int { return s.i }

// Rewind returns to a position Pos gave.
func (s *Scanner) Rewind(pos int) { s.i = pos }

func (s *Scanner) WS() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// Is consumes c after whitespace.
func (s *Scanner) Is(c byte) bool {
	s.WS()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// Null consumes a literal null.
func (s *Scanner) Null() bool {
	s.WS()
	if bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// End reports whether only whitespace is left.
func (s *Scanner) End() bool { s.WS(); return s.i == len(s.b) }

// StrToken returns the raw string token (quotes included) and whether it
// needs no unescaping: no backslash, no control byte, valid UTF-8.
func (s *Scanner) StrToken() (tok []byte, plain bool, ok bool) {
	s.WS()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false, false
	}
	start := s.i
	plain = true
	for j := s.i + 1; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			tok = s.b[start:s.i]
			if plain && !utf8.Valid(tok) {
				plain = false
			}
			return tok, plain, true
		case c == '\\':
			plain = false
			j++ // the escaped byte cannot end the string
		case c < 0x20:
			return nil, false, false
		}
	}
	return nil, false, false
}

// ValidEscapes reports whether a string token strToken passed has only
// JSON's escapes (invalid UTF-8 is no error: decoders replace it). Every
// token's text in a chat answer is such a string, many with escapes.
func ValidEscapes(tok []byte) bool {
	for i := 1; i < len(tok)-1; i++ {
		if tok[i] != '\\' {
			continue
		}
		i++
		switch tok[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if i+4 >= len(tok) {
				return false
			}
			for _, c := range tok[i+1 : i+5] {
				if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
					return false
				}
			}
			i += 4
		default:
			return false
		}
	}
	return true
}

// Str decodes a string (null leaves ""), escapes through the generic decoder.
func (s *Scanner) Str(dst *string) bool {
	if s.Null() {
		return true
	}
	tok, plain, ok := s.StrToken()
	if !ok {
		return false
	}
	if plain {
		*dst = string(tok[1 : len(tok)-1])
		return true
	}
	if v, ok := Unescape(tok[1 : len(tok)-1]); ok {
		*dst = v
		return true
	}
	return json.Unmarshal(tok, dst) == nil
}

// Unescape decodes a string body of valid UTF-8 as encoding/json does
// (a generated text's newlines and quotes; \u escapes, which Go servers
// write for <, > and &, Python ones for every non-ASCII character); false
// leaves what it does not take (invalid UTF-8) to encoding/json.
func Unescape(body []byte) (string, bool) {
	if !utf8.Valid(body) {
		return "", false
	}
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i == len(body) {
			return "", false
		}
		switch body[i] {
		case '"', '\\', '/':
			out = append(out, body[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			// As encoding/json: a surrogate pairs with a \u escape that
			// follows or becomes U+FFFD (and the next escape stands alone).
			r := hex4(body[i-1:])
			if r < 0 {
				return "", false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if dec := utf16.DecodeRune(r, hex4(body[i+1:])); dec != unicode.ReplacementChar {
					r = dec
					i += 6
				} else {
					r = unicode.ReplacementChar
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
	}
	return string(out), true
}

// hex4 is the code unit of a \uXXXX escape at the start of b, or -1.
func hex4(b []byte) rune {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// numToken returns a number token that follows JSON's grammar.
func (s *Scanner) numToken() ([]byte, bool) {
	s.WS()
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() bool {
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > j
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if !digits() {
		return nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return nil, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return nil, false
		}
	}
	tok := b[s.i:i]
	s.i = i
	return tok, true
}

// Integer reads an integer token (no fraction or exponent) into an int.
func (s *Scanner) Integer() (int, bool) {
	tok, ok := s.numToken()
	if !ok || bytes.ContainsAny(tok, ".eE") {
		return 0, false
	}
	if len(tok) <= 9 || (len(tok) == 10 && tok[0] == '-') { // cannot overflow
		n, neg := 0, tok[0] == '-'
		if neg {
			tok = tok[1:]
		}
		for _, c := range tok {
			n = n*10 + int(c-'0')
		}
		if neg {
			n = -n
		}
		return n, true
	}
	n, err := strconv.ParseInt(string(tok), 10, strconv.IntSize)
	return int(n), err == nil
}

// Float reads a number; a value out of float64's range is refused.
func (s *Scanner) Float() (float64, bool) {
	tok, ok := s.numToken()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	return f, err == nil
}

// Skip passes over any value.
func (s *Scanner) Skip(depth int) bool {
	if depth > 64 {
		return false
	}
	s.WS()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		tok, plain, ok := s.StrToken()
		return ok && (plain || ValidEscapes(tok))
	case c == '{' || c == '[':
		// Written out rather than through object/array: this runs for
		// every entry of top_logprobs.
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		s.i++
		if s.Is(closer) {
			return true
		}
		for {
			if c == '{' {
				tok, plain, ok := s.StrToken()
				if !ok || (!plain && !ValidEscapes(tok)) || !s.Is(':') {
					return false
				}
			}
			if !s.Skip(depth + 1) {
				return false
			}
			if s.Is(closer) {
				return true
			}
			if !s.Is(',') {
				return false
			}
		}
	case c == '-' || (c >= '0' && c <= '9'):
		_, ok := s.numToken()
		return ok
	}
	for _, lit := range []string{"null", "true", "false"} {
		if bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
			s.i += len(lit)
			return true
		}
	}
	return false
}

// Object calls field for each member; keys with escapes are refused.
func (s *Scanner) Object(field func(key []byte) bool) bool {
	if !s.Is('{') {
		return false
	}
	if s.Is('}') {
		return true
	}
	for {
		tok, plain, ok := s.StrToken()
		if !ok || !plain || !s.Is(':') || !field(tok[1:len(tok)-1]) {
			return false
		}
		if s.Is('}') {
			return true
		}
		if !s.Is(',') {
			return false
		}
	}
}

// Array calls elem for each element.
func (s *Scanner) Array(elem func() bool) bool {
	if !s.Is('[') {
		return false
	}
	if s.Is(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if s.Is(']') {
			return true
		}
		if !s.Is(',') {
			return false
		}
	}
}

// Ints reads an array of integers (null: nil). The common case (small
// non-negative ids, no spaces) is one tight loop.
func (s *Scanner) Ints(dst *[]int) bool { return s.IntsRoom(dst, 0) }

// IntsRoom is ints with capacity for room more ids after them.
func (s *Scanner) IntsRoom(dst *[]int, room int) bool {
	if s.Null() {
		*dst = nil
		return true
	}
	if !s.Is('[') {
		return false
	}
	b := s.b
	// Sized by the commas up to the first ']' (SIMD-fast): a prompt's
	// thousands of ids fill one allocation instead of a doubling series.
	size := 1
	if end := bytes.IndexByte(b[s.i:], ']'); end > 0 {
		size += bytes.Count(b[s.i:s.i+end], []byte(","))
	}
	out := make([]int, 0, size+room)
	*dst = out
	if s.Is(']') {
		return true
	}
	for {
		i, n := s.i, 0
		for i < len(b) && i-s.i < 9 && b[i]-'0' <= 9 {
			n = n*10 + int(b[i]-'0')
			i++
		}
		if i > s.i && i < len(b) && (b[s.i] != '0' || i == s.i+1) {
			// The usual case: a small id and its delimiter, no spaces.
			switch b[i] {
			case ',':
				out = append(out, n)
				s.i = i + 1
				continue
			case ']':
				*dst = append(out, n)
				s.i = i + 1
				return true
			}
		}
		var ok bool
		if n, ok = s.Integer(); !ok {
			return false
		}
		out = append(out, n)
		if s.Is(']') {
			*dst = out
			return true
		}
		if !s.Is(',') {
			return false
		}
	}
}

// Fields matches keys against the wanted names once each; a key that
// equals one only case-insensitively (the generic decoder would take it)
// or comes twice gives up.
type Fields struct {
	Names []string
	seen  uint32
}

// Match returns the index of key among names, -1 to skip it, or -2 to give up.
func (f *Fields) Match(key []byte) int {
	for i, n := range f.Names {
		if string(key) == n {
			if f.seen&(1<<i) != 0 {
				return -2
			}
			f.seen |= 1 << i
			return i
		}
		if bytes.EqualFold(key, []byte(n)) {
			return -2
		}
	}
	return -1
}

// Lit consumes lit if the input goes on with it.
func (s *Scanner) Lit(lit string) bool {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// SkipInts passes over a value, a list of small non-negative integers in
// one tight loop, anything else through skip.
func (s *Scanner) SkipInts() bool {
	s.WS()
	b := s.b
	if s.i >= len(b) || b[s.i] != '[' {
		return s.Skip(0)
	}
	start := s.i
	i := s.i + 1
	if i < len(b) && b[i] == ']' {
		s.i = i + 1
		return true
	}
	for {
		j := i
		for i < len(b) && i-j < 9 && b[i]-'0' <= 9 {
			i++
		}
		if i == j || i >= len(b) || (b[j] == '0' && i > j+1) {
			break // not the usual shape
		}
		switch b[i] {
		case ',':
			i++
			continue
		case ']':
			s.i = i + 1
			return true
		}
		break
	}
	s.i = start
	return s.Skip(0)
}
