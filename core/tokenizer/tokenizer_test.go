package tokenizer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prorl/prorl/core/trajectory"
)

// charTok renders "role:content;" per message (and "gen>" for the generation
// prompt) one byte per token; dropPast makes it drop earlier assistant turns,
// like Qwen3's template drops earlier <think> blocks.
type charTok struct {
	dropPast bool
	renders  int
}

func (c *charTok) Render(_ context.Context, msgs []trajectory.Message, _ []trajectory.Tool, o RenderOptions) ([]int, error) {
	c.renders++
	var b strings.Builder
	lastUser := 0
	for i, m := range msgs {
		if m.Role == "user" {
			lastUser = i
		}
	}
	for i, m := range msgs {
		if c.dropPast && m.Role == "assistant" && i < lastUser {
			continue
		}
		b.WriteString(m.Role + ":" + m.Content + "$\n")
	}
	if o.AddGenerationPrompt {
		b.WriteString("assistant:")
	}
	out := []int{}
	for _, r := range []byte(b.String()) {
		out = append(out, int(r))
	}
	return out, nil
}

func (c *charTok) Decode(_ context.Context, ids []int) (string, error) {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b), nil
}

func TestSplicerDelta(t *testing.T) {
	tok := &charTok{}
	sp := NewSplicer()
	obs := []trajectory.Message{{Role: "tool", Content: "42"}}
	d, err := sp.Delta(context.Background(), tok, '$', obs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := tok.Decode(context.Background(), d); got != "\ntool:42$\nassistant:" {
		t.Fatalf("delta %q", got)
	}
	n := tok.renders
	if _, err := sp.Delta(context.Background(), tok, '$', obs, nil, nil); err != nil || tok.renders != n+1 {
		t.Fatalf("the placeholder render is not cached (%d renders)", tok.renders-n)
	}
	if _, err := sp.Delta(context.Background(), tok, '#', obs, nil, nil); err == nil {
		t.Fatal("a stop token the template does not use was accepted")
	}
}

func TestSplicerNotAppendOnly(t *testing.T) {
	sp := NewSplicer()
	_, err := sp.Delta(context.Background(), &charTok{dropPast: true}, '$', []trajectory.Message{{Role: "user", Content: "again"}}, nil, nil)
	if !errors.Is(err, ErrNotAppendOnly) {
		t.Fatalf("err = %v", err)
	}
}
