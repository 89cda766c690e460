package backend

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
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

// validEscapes reports whether a string token strToken passed has only
// JSON's escapes (invalid UTF-8 is no error: decoders replace it). Every
// token's text in a chat answer is such a string, many with escapes.
func validEscapes(tok []byte) bool {
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
	if v, ok := unescape(tok[1 : len(tok)-1]); ok {
		*dst = v
		return true
	}
	return json.Unmarshal(tok, dst) == nil
}

// unescape decodes a string body of valid UTF-8 as encoding/json does
// (a generated text's newlines and quotes; \u escapes, which Go servers
// write for <, > and &, Python ones for every non-ASCII character); false
// leaves what it does not take (invalid UTF-8) to encoding/json.
func unescape(body []byte) (string, bool) {
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
		return ok && (plain || validEscapes(tok))
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
				if !ok || (!plain && !validEscapes(tok)) || !s.is(':') {
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
func (s *scan) ints(dst *[]int) bool { return s.intsRoom(dst, 0) }

// intsRoom is ints with capacity for room more ids after them.
func (s *scan) intsRoom(dst *[]int, room int) bool {
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
	out := make([]int, 0, size+room)
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

// decodeChat reads vLLM's /v1/chat/completions answer with
// return_token_ids. A message a server-side parser touched (reasoning,
// tool calls) goes to the generic decoder, which notes it.
func decodeChat(data []byte, out *chatResponse) bool {
	s := &scan{b: data}
	f := fields{names: []string{"choices", "prompt_token_ids"}}
	return s.object(func(key []byte) bool {
		switch f.match(key) {
		case 0:
			if s.null() {
				out.Choices = nil
				return true
			}
			out.Choices = make([]chatChoice, 0, 1)
			return s.array(func() bool {
				out.Choices = append(out.Choices, chatChoice{})
				return decodeChatChoice(s, &out.Choices[len(out.Choices)-1])
			})
		case 1:
			// Room for the answer's ids (vLLM writes choices first): the
			// caller extends the prompt into the rollout's sequence.
			room := 0
			if len(out.Choices) == 1 {
				room = len(out.Choices[0].TokenIDs)
			}
			return s.intsRoom(&out.PromptTokenIDs, room)
		case -1:
			return s.skip(0)
		}
		return false
	}) && s.end()
}

func decodeChatChoice(s *scan, c *chatChoice) bool {
	if s.null() {
		return true
	}
	f := fields{names: []string{"message", "finish_reason", "token_ids", "logprobs"}}
	return s.object(func(key []byte) bool {
		switch f.match(key) {
		case 0:
			return decodeChatAnswer(s, &c.Message)
		case 1:
			return s.str(&c.FinishReason)
		case 2:
			return s.ints(&c.TokenIDs)
		case 3:
			if s.null() {
				c.Logprobs = nil
				return true
			}
			c.Logprobs = &chatLogprobs{}
			return decodeChatLogprobs(s, c.Logprobs)
		case -1:
			return s.skip(0)
		}
		return false
	})
}

// decodeChatAnswer takes a message no parser touched: its content, with
// reasoning and calls null (or no calls).
func decodeChatAnswer(s *scan, a *chatAnswer) bool {
	if s.null() {
		return true
	}
	f := fields{names: []string{"content", "reasoning", "reasoning_content", "tool_calls", "function_call"}}
	return s.object(func(key []byte) bool {
		switch f.match(key) {
		case 0:
			return s.str(&a.Content)
		case 1, 2, 4:
			return s.null()
		case 3:
			if s.null() {
				return true
			}
			return s.is('[') && s.is(']')
		case -1:
			return s.skip(0)
		}
		return false
	})
}

func decodeChatLogprobs(s *scan, lp *chatLogprobs) bool {
	f := fields{names: []string{"content"}}
	return s.object(func(key []byte) bool {
		switch f.match(key) {
		case 0:
			if s.null() {
				lp.Content = nil
				return true
			}
			lp.Content = make([]chatLogprob, 0, 64)
			return s.array(func() bool {
				lp.Content = append(lp.Content, chatLogprob{})
				return decodeChatLogprob(s, &lp.Content[len(lp.Content)-1])
			})
		case -1:
			return s.skip(0)
		}
		return false
	})
}

// chatLogprobFields: the one field read of each token's entry.
var chatLogprobFields = []string{"logprob"}

// decodeChatLogprob reads one token's entry ({token, logprob, bytes,
// top_logprobs}), passing its list of bytes in one loop: every generated
// token has one.
func decodeChatLogprob(s *scan, e *chatLogprob) bool {
	if s.chatLogprobExact(e) {
		return true
	}
	if s.null() {
		return true
	}
	f := fields{names: chatLogprobFields}
	return s.object(func(key []byte) bool {
		switch f.match(key) {
		case 0:
			if s.null() {
				return true
			}
			v, ok := s.float()
			e.Logprob = v
			return ok
		case -1:
			if string(key) == "bytes" {
				return s.skipInts()
			}
			return s.skip(0)
		}
		return false
	})
}

// chatLogprobExact reads an entry as vLLM writes it, compact and in its
// order ({"token":…,"logprob":…,"bytes":[…],"top_logprobs":[]}), without
// a key lookup; false (nothing consumed) leaves any other form to the
// general path.
func (s *scan) chatLogprobExact(e *chatLogprob) bool {
	start := s.i
	if !s.lit(`{"token":`) {
		return false
	}
	if tok, plain, ok := s.strToken(); !ok || (!plain && !validEscapes(tok)) || !s.lit(`,"logprob":`) {
		s.i = start
		return false
	}
	v, ok := s.float()
	if !ok || !s.lit(`,"bytes":`) || !s.skipInts() || !s.lit(`,"top_logprobs":[]}`) {
		s.i = start
		return false
	}
	e.Logprob = v
	return true
}

// lit consumes lit if the input goes on with it.
func (s *scan) lit(lit string) bool {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// skipInts passes over a value, a list of small non-negative integers in
// one tight loop, anything else through skip.
func (s *scan) skipInts() bool {
	s.ws()
	b := s.b
	if s.i >= len(b) || b[s.i] != '[' {
		return s.skip(0)
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
	return s.skip(0)
}
