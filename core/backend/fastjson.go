package backend

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	json "github.com/goccy/go-json"
)

// The two answers every turn waits for (/tokenize and /v1/completions)
// carry hundreds of numbers; the generic decoder spent ~50 µs and one
// allocation per token id on them. These decoders read exactly those
// shapes and give up (ok=false) on anything unusual — an escaped key, a
// duplicate or case-folded field, a float where an id belongs — so the
// generic decoder, whose results they must equal (FuzzFastDecode), decides.

// scan reads one JSON document; every method validates what it passes.
type scan struct {
	b []byte
	i int
}

func (s *scan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// is consumes c after whitespace.
func (s *scan) is(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// null consumes a literal null.
func (s *scan) null() bool {
	s.ws()
	if bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (s *scan) end() bool { s.ws(); return s.i == len(s.b) }

// strToken returns the raw string token (quotes included) and whether it
// needs no unescaping: no backslash, no control byte, valid UTF-8.
func (s *scan) strToken() (tok []byte, plain bool, ok bool) {
	s.ws()
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

// str decodes a string (null leaves ""), escapes through the generic decoder.
func (s *scan) str(dst *string) bool {
	if s.null() {
		return true
	}
	tok, plain, ok := s.strToken()
	if !ok {
		return false
	}
	if plain {
		*dst = string(tok[1 : len(tok)-1])
		return true
	}
	return json.Unmarshal(tok, dst) == nil
}

// numToken returns a number token that follows JSON's grammar.
func (s *scan) numToken() ([]byte, bool) {
	s.ws()
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

// integer reads an integer token (no fraction or exponent) into an int.
func (s *scan) integer() (int, bool) {
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

// float reads a number; a value out of float64's range is refused.
func (s *scan) float() (float64, bool) {
	tok, ok := s.numToken()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	return f, err == nil
}

// skip passes over any value.
func (s *scan) skip(depth int) bool {
	if depth > 64 {
		return false
	}
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		tok, plain, ok := s.strToken()
		return ok && (plain || json.Valid(tok))
	case c == '{' || c == '[':
		// Written out rather than through object/array: this runs for
		// every entry of top_logprobs.
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		s.i++
		if s.is(closer) {
			return true
		}
		for {
			if c == '{' {
				tok, plain, ok := s.strToken()
				if !ok || (!plain && !json.Valid(tok)) || !s.is(':') {
					return false
				}
			}
			if !s.skip(depth + 1) {
				return false
			}
			if s.is(closer) {
				return true
			}
			if !s.is(',') {
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

// object calls field for each member; keys with escapes are refused.
func (s *scan) object(field func(key []byte) bool) bool {
	if !s.is('{') {
		return false
	}
	if s.is('}') {
		return true
	}
	for {
		tok, plain, ok := s.strToken()
		if !ok || !plain || !s.is(':') || !field(tok[1:len(tok)-1]) {
			return false
		}
		if s.is('}') {
			return true
		}
		if !s.is(',') {
			return false
		}
	}
}

// array calls elem for each element.
func (s *scan) array(elem func() bool) bool {
	if !s.is('[') {
		return false
	}
	if s.is(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if s.is(']') {
			return true
		}
		if !s.is(',') {
			return false
		}
	}
}

// ints reads an array of integers (null: nil). The common case (small
// non-negative ids, no spaces) is one tight loop.
func (s *scan) ints(dst *[]int) bool {
	if s.null() {
		*dst = nil
		return true
	}
	if !s.is('[') {
		return false
	}
	b := s.b
	// Sized by the commas up to the first ']' (SIMD-fast): a prompt's
	// thousands of ids fill one allocation instead of a doubling series.
	size := 1
	if end := bytes.IndexByte(b[s.i:], ']'); end > 0 {
		size += bytes.Count(b[s.i:s.i+end], []byte(","))
	}
	out := make([]int, 0, size)
	*dst = out
	if s.is(']') {
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
		if n, ok = s.integer(); !ok {
			return false
		}
		out = append(out, n)
		if s.is(']') {
			*dst = out
			return true
		}
		if !s.is(',') {
			return false
		}
	}
}

// fields matches keys against the wanted names once each; a key that
// equals one only case-insensitively (the generic decoder would take it)
// or comes twice gives up.
type fields struct {
	names []string
	seen  uint32
}

// match returns the index of key among names, -1 to skip it, or -2 to give up.
func (f *fields) match(key []byte) int {
	for i, n := range f.names {
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

// decodeTokenize reads vLLM's /tokenize answer.
func decodeTokenize(data []byte, out *tokenizeResponse) bool {
	s := &scan{b: data}
	f := fields{names: []string{"count", "tokens"}}
	return s.object(func(key []byte) bool {
		switch f.match(key) {
		case 0:
			if s.null() {
				return true
			}
			n, ok := s.integer()
			out.Count = n
			return ok
		case 1:
			return s.ints(&out.Tokens)
		case -1:
			return s.skip(0)
		}
		return false
	}) && s.end()
}

// decodeCompletion reads vLLM's /v1/completions answer.
func decodeCompletion(data []byte, out *completionResponse) bool {
	s := &scan{b: data}
	f := fields{names: []string{"choices"}}
	return s.object(func(key []byte) bool {
		switch f.match(key) {
		case 0:
			if s.null() {
				out.Choices = nil
				return true
			}
			out.Choices = make([]completionChoice, 0, 1)
			return s.array(func() bool {
				out.Choices = append(out.Choices, completionChoice{})
				return decodeChoice(s, &out.Choices[len(out.Choices)-1])
			})
		case -1:
			return s.skip(0)
		}
		return false
	}) && s.end()
}

func decodeChoice(s *scan, c *completionChoice) bool {
	if s.null() {
		return true
	}
	f := fields{names: []string{"text", "finish_reason", "token_ids", "logprobs"}}
	return s.object(func(key []byte) bool {
		switch f.match(key) {
		case 0:
			return s.str(&c.Text)
		case 1:
			return s.str(&c.FinishReason)
		case 2:
			return s.ints(&c.TokenIDs)
		case 3:
			if s.null() {
				c.Logprobs = nil
				return true
			}
			c.Logprobs = &completionLogprobs{}
			return decodeLogprobs(s, c.Logprobs)
		case -1:
			return s.skip(0)
		}
		return false
	})
}

func decodeLogprobs(s *scan, lp *completionLogprobs) bool {
	f := fields{names: []string{"tokens", "token_logprobs"}}
	return s.object(func(key []byte) bool {
		switch f.match(key) {
		case 0:
			if s.null() {
				lp.Tokens = nil
				return true
			}
			lp.Tokens = make([]string, 0, 64)
			return s.array(func() bool {
				lp.Tokens = append(lp.Tokens, "")
				return s.str(&lp.Tokens[len(lp.Tokens)-1])
			})
		case 1:
			if s.null() {
				lp.TokenLogprobs = nil
				return true
			}
			lp.TokenLogprobs = make([]*float64, 0, 64)
			var vals []float64
			return s.array(func() bool {
				if s.null() {
					lp.TokenLogprobs = append(lp.TokenLogprobs, nil)
					return true
				}
				v, ok := s.float()
				if vals == nil || len(vals) == cap(vals) {
					vals = make([]float64, 0, 64) // one allocation per 64 values, not per value
				}
				vals = append(vals, v)
				lp.TokenLogprobs = append(lp.TokenLogprobs, &vals[len(vals)-1])
				return ok
			})
		case -1:
			return s.skip(0)
		}
		return false
	})
}
