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
// delta is taken against a fixed placeholder conversation, whose render is
// cached per tool set.
type Splicer struct {
	mu sync.Mutex
	// base renders of the placeholder conversation, keyed by tools+kwargs hash
	base map[[32]byte][]int
}

// NewSplicer returns a splicer; its cache serves every tokenizer of one
// model (a rollout that moves to another backend keeps using it).
func NewSplicer() *Splicer { return &Splicer{base: map[[32]byte][]int{}} }

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
// (e.g. the newline after <|im_end|>).
func (s *Splicer) Delta(ctx context.Context, tok Tokenizer, stopID int, msgs []trajectory.Message, tools []trajectory.Tool, kw map[string]any) ([]int, error) {
	if tt, ok := tok.(TextTokenizer); ok {
		ids, _, err := textDelta(tt, stopID, msgs, tools, kw)
		return ids, err
	}
	k := key(tools, kw)
	s.mu.Lock()
	base, ok := s.base[k]
	s.mu.Unlock()
	if !ok {
		var err error
		base, err = tok.Render(ctx, placeholder, tools, RenderOptions{Kwargs: kw})
		if err != nil {
			return nil, fmt.Errorf("render placeholder: %w", err)
		}
		s.mu.Lock()
		s.base[k] = base
		s.mu.Unlock()
	}
	full, err := tok.Render(ctx, append(slices.Clone(placeholder), msgs...), tools, RenderOptions{AddGenerationPrompt: true, Kwargs: kw})
	if err != nil {
		return nil, fmt.Errorf("render observation: %w", err)
	}
	if len(full) < len(base) || !slices.Equal(full[:len(base)], base) {
		return nil, ErrNotAppendOnly
	}
	stop := -1
	for i := len(base) - 1; i >= 0; i-- {
		if base[i] == stopID {
			stop = i
			break
		}
	}
	if stop < 0 {
		return nil, fmt.Errorf("the template does not end an assistant turn with the model's stop token %d", stopID)
	}
	out := make([]int, 0, len(base)-stop-1+len(full)-len(base))
	out = append(out, base[stop+1:]...)
	return append(out, full[len(base):]...), nil
}
