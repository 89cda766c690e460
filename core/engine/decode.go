package engine

import "github.com/prorl/prorl/core/jsonscan"

// Decoders of the two answers every turn waits for (/tokenize and
// /v1/completions) and of chat completions, on jsonscan: each reads
// exactly the shape vLLM writes and gives up (ok=false) on anything
// unusual, so encoding/json, whose results they must equal
// (FuzzFastDecode), decides.

// decodeTokenize reads vLLM's /tokenize answer.
func decodeTokenize(data []byte, out *tokenizeResponse) bool {
	s := jsonscan.New(data)
	f := jsonscan.Fields{Names: []string{"count", "tokens"}}
	return s.Object(func(key []byte) bool {
		switch f.Match(key) {
		case 0:
			if s.Null() {
				return true
			}
			n, ok := s.Integer()
			out.Count = n
			return ok
		case 1:
			return s.Ints(&out.Tokens)
		case -1:
			return s.Skip(0)
		}
		return false
	}) && s.End()
}

// decodeCompletion reads vLLM's /v1/completions answer.
func decodeCompletion(data []byte, out *completionResponse) bool {
	s := jsonscan.New(data)
	f := jsonscan.Fields{Names: []string{"choices"}}
	return s.Object(func(key []byte) bool {
		switch f.Match(key) {
		case 0:
			if s.Null() {
				out.Choices = nil
				return true
			}
			out.Choices = make([]completionChoice, 0, 1)
			return s.Array(func() bool {
				out.Choices = append(out.Choices, completionChoice{})
				return decodeChoice(s, &out.Choices[len(out.Choices)-1])
			})
		case -1:
			return s.Skip(0)
		}
		return false
	}) && s.End()
}

func decodeChoice(s *jsonscan.Scanner, c *completionChoice) bool {
	if s.Null() {
		return true
	}
	f := jsonscan.Fields{Names: []string{"text", "finish_reason", "token_ids", "logprobs"}}
	return s.Object(func(key []byte) bool {
		switch f.Match(key) {
		case 0:
			return s.Str(&c.Text)
		case 1:
			return s.Str(&c.FinishReason)
		case 2:
			return s.Ints(&c.TokenIDs)
		case 3:
			if s.Null() {
				c.Logprobs = nil
				return true
			}
			c.Logprobs = &completionLogprobs{}
			return decodeLogprobs(s, c.Logprobs)
		case -1:
			return s.Skip(0)
		}
		return false
	})
}

func decodeLogprobs(s *jsonscan.Scanner, lp *completionLogprobs) bool {
	f := jsonscan.Fields{Names: []string{"tokens", "token_logprobs"}}
	return s.Object(func(key []byte) bool {
		switch f.Match(key) {
		case 0:
			if s.Null() {
				lp.Tokens = nil
				return true
			}
			lp.Tokens = make([]string, 0, 64)
			return s.Array(func() bool {
				lp.Tokens = append(lp.Tokens, "")
				return s.Str(&lp.Tokens[len(lp.Tokens)-1])
			})
		case 1:
			if s.Null() {
				lp.TokenLogprobs = nil
				return true
			}
			lp.TokenLogprobs = make([]*float64, 0, 64)
			var vals []float64
			return s.Array(func() bool {
				if s.Null() {
					lp.TokenLogprobs = append(lp.TokenLogprobs, nil)
					return true
				}
				v, ok := s.Float()
				if vals == nil || len(vals) == cap(vals) {
					vals = make([]float64, 0, 64) // one allocation per 64 values, not per value
				}
				vals = append(vals, v)
				lp.TokenLogprobs = append(lp.TokenLogprobs, &vals[len(vals)-1])
				return ok
			})
		case -1:
			return s.Skip(0)
		}
		return false
	})
}

// decodeChat reads vLLM's /v1/chat/completions answer with
// return_token_ids. A message a server-side parser touched (reasoning,
// tool calls) goes to the generic decoder, which notes it.
func decodeChat(data []byte, out *chatResponse) bool {
	s := jsonscan.New(data)
	f := jsonscan.Fields{Names: []string{"choices", "prompt_token_ids"}}
	return s.Object(func(key []byte) bool {
		switch f.Match(key) {
		case 0:
			if s.Null() {
				out.Choices = nil
				return true
			}
			out.Choices = make([]chatChoice, 0, 1)
			return s.Array(func() bool {
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
			return s.IntsRoom(&out.PromptTokenIDs, room)
		case -1:
			return s.Skip(0)
		}
		return false
	}) && s.End()
}

func decodeChatChoice(s *jsonscan.Scanner, c *chatChoice) bool {
	if s.Null() {
		return true
	}
	f := jsonscan.Fields{Names: []string{"message", "finish_reason", "token_ids", "logprobs"}}
	return s.Object(func(key []byte) bool {
		switch f.Match(key) {
		case 0:
			return decodeChatAnswer(s, &c.Message)
		case 1:
			return s.Str(&c.FinishReason)
		case 2:
			return s.Ints(&c.TokenIDs)
		case 3:
			if s.Null() {
				c.Logprobs = nil
				return true
			}
			c.Logprobs = &chatLogprobs{}
			return decodeChatLogprobs(s, c.Logprobs)
		case -1:
			return s.Skip(0)
		}
		return false
	})
}

// decodeChatAnswer takes a message no parser touched: its content, with
// reasoning and calls null (or no calls).
func decodeChatAnswer(s *jsonscan.Scanner, a *chatAnswer) bool {
	if s.Null() {
		return true
	}
	f := jsonscan.Fields{Names: []string{"content", "reasoning", "reasoning_content", "tool_calls", "function_call"}}
	return s.Object(func(key []byte) bool {
		switch f.Match(key) {
		case 0:
			return s.Str(&a.Content)
		case 1, 2, 4:
			return s.Null()
		case 3:
			if s.Null() {
				return true
			}
			return s.Is('[') && s.Is(']')
		case -1:
			return s.Skip(0)
		}
		return false
	})
}

func decodeChatLogprobs(s *jsonscan.Scanner, lp *chatLogprobs) bool {
	f := jsonscan.Fields{Names: []string{"content"}}
	return s.Object(func(key []byte) bool {
		switch f.Match(key) {
		case 0:
			if s.Null() {
				lp.Content = nil
				return true
			}
			lp.Content = make([]chatLogprob, 0, 64)
			return s.Array(func() bool {
				lp.Content = append(lp.Content, chatLogprob{})
				return decodeChatLogprob(s, &lp.Content[len(lp.Content)-1])
			})
		case -1:
			return s.Skip(0)
		}
		return false
	})
}

// chatLogprobFields: the one field read of each token's entry.
var chatLogprobFields = []string{"logprob"}

// decodeChatLogprob reads one token's entry ({token, logprob, bytes,
// top_logprobs}), passing its list of bytes in one loop: every generated
// token has one.
func decodeChatLogprob(s *jsonscan.Scanner, e *chatLogprob) bool {
	if chatLogprobExact(s, e) {
		return true
	}
	if s.Null() {
		return true
	}
	f := jsonscan.Fields{Names: chatLogprobFields}
	return s.Object(func(key []byte) bool {
		switch f.Match(key) {
		case 0:
			if s.Null() {
				return true
			}
			v, ok := s.Float()
			e.Logprob = v
			return ok
		case -1:
			if string(key) == "bytes" {
				return s.SkipInts()
			}
			return s.Skip(0)
		}
		return false
	})
}

// chatLogprobExact reads an entry as vLLM writes it, compact and in its
// order ({"token":…,"logprob":…,"bytes":[…],"top_logprobs":[]}), without
// a key lookup; false (nothing consumed) leaves any other form to the
// general path.
func chatLogprobExact(s *jsonscan.Scanner, e *chatLogprob) bool {
	start := s.Pos()
	if !s.Lit(`{"token":`) {
		return false
	}
	if tok, plain, ok := s.StrToken(); !ok || (!plain && !jsonscan.ValidEscapes(tok)) || !s.Lit(`,"logprob":`) {
		s.Rewind(start)
		return false
	}
	v, ok := s.Float()
	if !ok || !s.Lit(`,"bytes":`) || !s.SkipInts() || !s.Lit(`,"top_logprobs":[]}`) {
		s.Rewind(start)
		return false
	}
	e.Logprob = v
	return true
}
