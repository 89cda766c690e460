package trajectory

import (
	"encoding/json"
	"strconv"
)

// UnmarshalJSON reads a Tokens object. Its three arrays are most of a
// stored result's numbers, and the store's decoder (goccy's) allocated a
// zero value for every element of a slice: a host reopening its file spent
// most of its time there. The usual shape (the keys as the host writes
// them, each once; plain numbers) is read here; anything else goes to
// encoding/json, so the result is always encoding/json's.
func (t *Tokens) UnmarshalJSON(b []byte) error {
	if v, ok := fastTokens(b); ok {
		if v.hasIDs {
			t.IDs = v.IDs
		}
		if v.hasMask {
			t.LossMask = v.LossMask
		}
		if v.hasLogprobs {
			t.Logprobs = v.Logprobs
		}
		if v.hasPromptLen {
			t.PromptLen = v.PromptLen
		}
		return nil
	}
	type plain Tokens
	return json.Unmarshal(b, (*plain)(t))
}

type parsedTokens struct {
	Tokens
	hasIDs, hasMask, hasLogprobs, hasPromptLen bool
}

// fastTokens parses b as a Tokens object of the usual shape, or declines.
func fastTokens(b []byte) (parsedTokens, bool) {
	var v parsedTokens
	s := numScan{b: b}
	if !s.is('{') {
		return v, false
	}
	if s.is('}') {
		return v, s.end()
	}
	for {
		key, ok := s.key()
		if !ok || !s.is(':') {
			return v, false
		}
		switch key {
		case "ids":
			if v.hasIDs {
				return v, false
			}
			v.hasIDs = true
			if v.IDs, ok = numArray(&s, intOf); !ok {
				return v, false
			}
		case "loss_mask":
			if v.hasMask {
				return v, false
			}
			v.hasMask = true
			if v.LossMask, ok = numArray(&s, int8Of); !ok {
				return v, false
			}
		case "logprobs":
			if v.hasLogprobs {
				return v, false
			}
			v.hasLogprobs = true
			if v.Logprobs, ok = numArray(&s, floatOf); !ok {
				return v, false
			}
		case "prompt_len":
			if v.hasPromptLen {
				return v, false
			}
			v.hasPromptLen = true
			tok, isNum := s.number()
			if !isNum {
				return v, false
			}
			if v.PromptLen, ok = intOf(tok); !ok {
				return v, false
			}
		default:
			return v, false // unknown, or a key encoding/json would fold
		}
		if s.is('}') {
			return v, s.end()
		}
		if !s.is(',') {
			return v, false
		}
	}
}

// numScan reads JSON numbers, arrays of them and plain keys.
type numScan struct {
	b []byte
	i int
}

func (s *numScan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// is consumes c (after whitespace) if it comes next.
func (s *numScan) is(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *numScan) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// key reads a string of plain ASCII letters and underscores (no escapes).
func (s *numScan) key() (string, bool) {
	if !s.is('"') {
		return "", false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			k := string(s.b[start:s.i])
			s.i++
			return k, true
		case c >= 'a' && c <= 'z' || c == '_':
			s.i++
		default:
			return "", false
		}
	}
	return "", false
}

// number reads a token of JSON's number grammar.
func (s *numScan) number() ([]byte, bool) {
	s.ws()
	b, i := s.b, s.i
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return nil, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return nil, false
		}
	}
	s.i = i
	return b[start:i], true
}

// numArray reads null or an array of numbers converted by conv.
func numArray[T any](s *numScan, conv func([]byte) (T, bool)) ([]T, bool) {
	s.ws()
	if rest := s.b[s.i:]; len(rest) >= 4 && string(rest[:4]) == "null" {
		s.i += 4
		return nil, true
	}
	if !s.is('[') {
		return nil, false
	}
	// Sized by the commas up to the first ']': one allocation.
	n := 1
	for j := s.i; j < len(s.b) && s.b[j] != ']'; j++ {
		if s.b[j] == ',' {
			n++
		}
	}
	out := make([]T, 0, n)
	if s.is(']') {
		return out, true
	}
	for {
		tok, ok := s.number()
		if !ok {
			return nil, false
		}
		x, ok := conv(tok)
		if !ok {
			return nil, false
		}
		out = append(out, x)
		// The delimiter usually follows at once: no whitespace to skip.
		if s.i < len(s.b) && s.b[s.i] == ',' {
			s.i++
			continue
		}
		if s.is(']') {
			return out, true
		}
		if !s.is(',') {
			return nil, false
		}
	}
}

// intOf is a plain integer token's value (no fraction or exponent, which
// encoding/json refuses for an int, and at most 18 digits).
func intOf(tok []byte) (int, bool) {
	neg := tok[0] == '-'
	d := tok
	if neg {
		d = tok[1:]
	}
	if len(d) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

func int8Of(tok []byte) (int8, bool) {
	n, ok := intOf(tok)
	if !ok || n < -128 || n > 127 {
		return 0, false
	}
	return int8(n), true
}

// floatOf is a number token's float64, as strconv.ParseFloat rounds it.
// Its exact path first (a stored result's logprobs: zeros for the prompt,
// then short decimals): a mantissa below 2^53 and a power of ten up to 22
// are both exact as float64, so one multiplication or division rounds the
// value correctly, as strconv does in the same case.
func floatOf(tok []byte) (float64, bool) {
	if f, ok := exactFloat(tok); ok {
		return f, true
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	return f, err == nil
}

var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// exactFloat reads a valid number token (numScan.number) whose value the
// fast path gives exactly, or declines.
func exactFloat(tok []byte) (float64, bool) {
	i, neg := 0, false
	if tok[0] == '-' {
		neg, i = true, 1
	}
	var mant uint64
	digits, exp := 0, 0
	for ; i < len(tok) && tok[i] >= '0' && tok[i] <= '9'; i++ {
		if mant == 0 && tok[i] == '0' {
			continue // a leading zero
		}
		mant = mant*10 + uint64(tok[i]-'0')
		digits++
	}
	if i < len(tok) && tok[i] == '.' {
		for i++; i < len(tok) && tok[i] >= '0' && tok[i] <= '9'; i++ {
			exp--
			if mant == 0 && tok[i] == '0' {
				continue
			}
			mant = mant*10 + uint64(tok[i]-'0')
			digits++
		}
	}
	if digits > 15 {
		return 0, false // may not be below 2^53
	}
	if i < len(tok) { // an exponent
		i++
		eneg := false
		if tok[i] == '+' || tok[i] == '-' {
			eneg = tok[i] == '-'
			i++
		}
		e := 0
		for ; i < len(tok); i++ {
			if e > 1000 {
				return 0, false
			}
			e = e*10 + int(tok[i]-'0')
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	f := float64(mant)
	switch {
	case mant == 0:
	case exp == 0:
	case exp > 0 && exp <= 22:
		f *= pow10[exp]
	case exp < 0 && exp >= -22:
		f /= pow10[-exp]
	default:
		return 0, false
	}
	if neg {
		f = -f
	}
	return f, true
}
