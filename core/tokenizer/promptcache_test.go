package tokenizer

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prorl/prorl/core/trajectory"
)

// countingTok renders a conversation to ids derived from its text, and
// counts its renders.
type countingTok struct{ n atomic.Int64 }

func (c *countingTok) Render(_ context.Context, msgs []trajectory.Message, tools []trajectory.Tool, opts RenderOptions) ([]int, error) {
	c.n.Add(1)
	ids := []int{len(msgs), len(tools)}
	for _, m := range msgs {
		ids = append(ids, len(m.Content))
	}
	return ids, nil
}

func (c *countingTok) Decode(context.Context, []int) (string, error) { return "", nil }

func TestPromptCache(t *testing.T) {
	ctx := context.Background()
	base := []trajectory.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "What is 1 + 1?"}}
	tools := []trajectory.Tool{{Type: "function", Function: trajectory.ToolFunction{Name: "finish", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	opts := RenderOptions{AddGenerationPrompt: true, Kwargs: map[string]any{"enable_thinking": false}}
	tok := &countingTok{}
	c := NewPromptCache(3)
	first, err := c.Render(ctx, tok, "m", base, tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	first[0] = -1 // the caller's own copy
	for range 7 {
		ids, _ := c.Render(ctx, tok, "m", base, tools, opts)
		if ids[0] != 2 {
			t.Fatalf("a cached render was changed by its caller: %v", ids)
		}
	}
	if n := tok.n.Load(); n != 1 {
		t.Fatalf("%d renders for one prompt asked 8 times", n)
	}
	// Anything a template can see makes another prompt.
	withCall := []trajectory.Message{base[0], {Role: "assistant", ToolCalls: []trajectory.ToolCall{{ID: "a", Type: "function", Function: trajectory.FunctionCall{Name: "f", Arguments: "{}"}}}}}
	otherCall := []trajectory.Message{base[0], {Role: "assistant", ToolCalls: []trajectory.ToolCall{{ID: "b", Type: "function", Function: trajectory.FunctionCall{Name: "f", Arguments: "{}"}}}}}
	variants := []struct {
		name   string
		source string
		msgs   []trajectory.Message
		tools  []trajectory.Tool
		opts   RenderOptions
	}{
		{"another source", "m2", base, tools, opts},
		{"another role", "m", []trajectory.Message{{Role: "user", Content: "Be brief."}, base[1]}, tools, opts},
		{"text moved between messages", "m", []trajectory.Message{{Role: "system", Content: "Be brief.What"}, {Role: "user", Content: " is 1 + 1?"}}, tools, opts},
		{"reasoning", "m", []trajectory.Message{base[0], {Role: "user", Content: base[1].Content, ReasoningContent: "x"}}, tools, opts},
		{"a tool call", "m", withCall, tools, opts},
		{"a tool call's id", "m", otherCall, tools, opts},
		{"no tools", "m", base, nil, opts},
		{"another schema", "m", base, []trajectory.Tool{{Type: "function", Function: trajectory.ToolFunction{Name: "finish", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}}, opts},
		{"no generation prompt", "m", base, tools, RenderOptions{Kwargs: opts.Kwargs}},
		{"other kwargs", "m", base, tools, RenderOptions{AddGenerationPrompt: true, Kwargs: map[string]any{"enable_thinking": true}}},
		{"an int kwarg", "m", base, tools, RenderOptions{AddGenerationPrompt: true, Kwargs: map[string]any{"n": 1}}},
		{"a float kwarg", "m", base, tools, RenderOptions{AddGenerationPrompt: true, Kwargs: map[string]any{"n": 1.0}}},
	}
	for i, v := range variants {
		c := NewPromptCache(64)
		_, _ = c.Render(ctx, tok, "m", base, tools, opts)
		_, _ = c.Render(ctx, tok, "m", withCall, tools, opts)
		_, _ = c.Render(ctx, tok, "m", base, tools, RenderOptions{AddGenerationPrompt: true, Kwargs: map[string]any{"n": 1}})
		before := tok.n.Load()
		_, _ = c.Render(ctx, tok, v.source, v.msgs, v.tools, v.opts)
		want := int64(1)
		if i == 4 || i == 10 { // the same as one rendered above
			want = 0
		}
		if got := tok.n.Load() - before; got != want {
			t.Errorf("%s: %d renders, want %d", v.name, got, want)
		}
	}
	// Least recently used goes first.
	for i := range 4 {
		_, _ = c.Render(ctx, tok, fmt.Sprint(i), base, tools, opts)
	}
	before := tok.n.Load()
	_, _ = c.Render(ctx, tok, "m", base, tools, opts) // evicted by the 4 newer ones
	_, _ = c.Render(ctx, tok, "3", base, tools, opts) // kept
	if got := tok.n.Load() - before; got != 1 {
		t.Fatalf("%d renders after eviction, want 1", got)
	}
	if calls, hits := c.Stats(); calls != 14 || hits != 8 {
		t.Fatalf("stats %d calls %d hits", calls, hits)
	}
	// Many at once (go test -race).
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				_, _ = c.Render(ctx, tok, fmt.Sprint((i+j)%5), base, tools, opts)
			}
		}()
	}
	wg.Wait()
}

// slowTok holds every render until released.
type slowTok struct {
	countingTok
	release chan struct{}
}

func (s *slowTok) Render(ctx context.Context, msgs []trajectory.Message, tools []trajectory.Tool, opts RenderOptions) ([]int, error) {
	<-s.release
	return s.countingTok.Render(ctx, msgs, tools, opts)
}

// TestPromptCacheConcurrent: a group's rollouts ask at once; one renders,
// the rest wait for it and get the same ids.
func TestPromptCacheConcurrent(t *testing.T) {
	tok := &slowTok{release: make(chan struct{})}
	c := NewPromptCache(8)
	msgs := []trajectory.Message{{Role: "user", Content: "hi"}}
	var wg sync.WaitGroup
	got := make([][]int, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = c.Render(context.Background(), tok, "m", msgs, nil, RenderOptions{})
		}()
	}
	for { // all 8 asked before the render ends: 7 wait for it
		if calls, _ := c.Stats(); calls == 8 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(tok.release)
	wg.Wait()
	if n := tok.n.Load(); n != 1 {
		t.Fatalf("%d renders for 8 rollouts asking at once", n)
	}
	for _, ids := range got {
		if fmt.Sprint(ids) != "[1 0 2]" {
			t.Fatalf("ids %v", ids)
		}
	}
	if calls, hits := c.Stats(); calls != 8 || hits != 7 {
		t.Fatalf("stats %d calls %d hits", calls, hits)
	}
}
