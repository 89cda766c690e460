// Package tokenizer turns chat messages into token ids and back. In this
// version tokenisation goes through a backend's /tokenize and /detokenize;
// a Go-native tokenizer implements the same interface.
package tokenizer

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/prorl/prorl/core/trajectory"
)

// RenderOptions are the chat template's inputs besides messages and tools.
type RenderOptions struct {
	AddGenerationPrompt bool
	Kwargs              map[string]any
}

// Tokenizer applies a chat template and tokenises, and decodes ids.
type Tokenizer interface {
	Render(ctx context.Context, msgs []trajectory.Message, tools []trajectory.Tool, opts RenderOptions) ([]int, error)
	Decode(ctx context.Context, ids []int) (string, error)
}

// ErrNotAppendOnly means the chat template does not render the conversation
// as an extension of its past, so no exact delta exists.
var ErrNotAppendOnly = errors.New("chat template is not append-only for this conversation")

// Splicer computes the exact tokens to append after a generated turn: the
// template's tail after the model's stop token, then the newly rendered
// messages and the generation prompt. The past is never re-tokenised: the
// delta is taken from a fixed placeholder conversation followed by the new
// messages, after the placeholder assistant's stop token. The
// placeholder's render up to that assistant is cached per tool set and
// role of the first new message.
type Splicer struct {
	mu sync.Mutex
	// heads by tools+kwargs hash and the first new message's role: the
	// placeholder rendered up to its assistant's stop token, as a
	// conversation going on with a message of that role renders it
	heads map[[32]byte][]int
}

// NewSplicer returns a splicer; its cache serves every tokenizer of one
// model (a rollout that moves to another backend keeps using it).
func NewSplicer() *Splicer { return &Splicer{heads: map[[32]byte][]int{}} }

var placeholder = []trajectory.Message{
	{Role: "system", Content: "S"},
	{Role: "user", Content: "U"},
	{Role: "assistant", Content: "A"},
}

func key(tools []trajectory.Tool, kw map[string]any) [32]byte {
	b, _ := json.Marshal(struct {
		T []trajectory.Tool
		K map[string]any
	}{tools, kw})
	return sha256.Sum256(b)
}

// Delta returns the tokens that follow a generated turn ending in stopID.
// The bridge is what the template writes after the assistant's stop token
// (e.g. the newline after <|im_end|>). The placeholder assistant is never
// the conversation's last message, as a generated turn followed by tool
// output is not: Qwen3's template writes an empty <think> block into a last
// assistant message and not into earlier ones, so a render ending with it
// is no prefix of the longer one (vLLM's /tokenize, TestVLLMEndToEnd). The
// assistant's stop token is the first one after the user message.
func (s *Splicer) Delta(ctx context.Context, tok Tokenizer, stopID int, msgs []trajectory.Message, tools []trajectory.Tool, kw map[string]any) ([]int, error) {
	if tt, ok := tok.(TextTokenizer); ok {
		ids, _, err := textDelta(tt, stopID, msgs, tools, kw)
		return ids, err
	}
	if len(msgs) == 0 {
		return nil, errors.New("no messages to splice")
	}
	head, err := s.head(ctx, tok, stopID, msgs[0], tools, kw)
	if err != nil {
		return nil, err
	}
	full, err := tok.Render(ctx, append(slices.Clone(placeholder), msgs...), tools, RenderOptions{AddGenerationPrompt: true, Kwargs: kw})
	if err != nil {
		return nil, fmt.Errorf("render observation: %w", err)
	}
	// The assistant must render as it does before any message of that role:
	// a template that drops or rewrites it here has no exact delta.
	n := len(head)
	if len(full) <= n || !slices.Equal(full[:n], head) || full[n] != stopID {
		return nil, ErrNotAppendOnly
	}
	return slices.Clone(full[n+1:]), nil
}

// head renders, once per tool set and role, the placeholder followed by a
// message of next's role, up to the placeholder assistant's stop token: the
// first stopID after the system and user messages.
func (s *Splicer) head(ctx context.Context, tok Tokenizer, stopID int, next trajectory.Message, tools []trajectory.Tool, kw map[string]any) ([]int, error) {
	k := key(tools, map[string]any{"kwargs": kw, "role": next.Role, "stop": stopID})
	s.mu.Lock()
	head, ok := s.heads[k]
	s.mu.Unlock()
	if ok {
		return head, nil
	}
	pre, err := tok.Render(ctx, placeholder[:2], tools, RenderOptions{Kwargs: kw})
	if err != nil {
		return nil, fmt.Errorf("render placeholder: %w", err)
	}
	next.Content, next.Span = "T", nil
	conv, err := tok.Render(ctx, append(slices.Clone(placeholder), next), tools, RenderOptions{Kwargs: kw})
	if err != nil {
		return nil, fmt.Errorf("render placeholder: %w", err)
	}
	if len(conv) < len(pre) || !slices.Equal(conv[:len(pre)], pre) {
		return nil, ErrNotAppendOnly
	}
	stop := slices.Index(conv[len(pre):], stopID)
	if stop < 0 {
		return nil, fmt.Errorf("the template does not end an assistant turn with the model's stop token %d", stopID)
	}
	head = conv[:len(pre)+stop]
	s.mu.Lock()
	s.heads[k] = head
	s.mu.Unlock()
	return head, nil
}
