package failover

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/engine"
	"github.com/prorl/prorl/core/policy"
	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/simllm"
)

// TestFailoverTellsThePrompt: a rollout's first generation tells its lease
// the prompt it opens with (after any rendering), so two rollouts of one
// group count their shared prompt once on a backend's cache budget; and
// the turns after it extend the count by their own tokens only.
func TestFailoverTellsThePrompt(t *testing.T) {
	log := hclog.NewNullLogger()
	pool := backend.NewPool(log)
	gate := policy.New(policy.Deps{Pool: pool, Store: store.NewMemory(10), Log: log})
	ts := httptest.NewServer(simllm.New(simllm.Options{}))
	t.Cleanup(ts.Close)
	c, err := engine.NewClient("vllm", ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := pool.Add(&backend.Backend{URL: ts.URL, Protocol: "vllm", Client: c, CacheTokens: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	pool.SetHealth(b.ID, nil)
	ctx := context.Background()
	prompt, err := c.Render(ctx, []trajectory.Message{{Role: "user", Content: "What is 17 + 25?"}}, nil, tokenizer.RenderOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	var fos []*Backend
	for _, id := range []string{"r1", "r2"} {
		r := Rollout{ID: id, Hint: backend.Hint{Key: id, Group: "g", GroupSize: 2}}
		l, err := pool.AcquireFor(ctx, 0, r.Hint)
		if err != nil {
			t.Fatal(err)
		}
		fo := New(Deps{Pool: pool, Gate: gate, Log: log}, r, l)
		t.Cleanup(fo.Release)
		if _, err := fo.Render(ctx, []trajectory.Message{{Role: "user", Content: "What is 17 + 25?"}}, nil, tokenizer.RenderOptions{AddGenerationPrompt: true}); err != nil {
			t.Fatal(err)
		}
		fos = append(fos, fo)
	}
	counted := func() int { return pool.List()[0].ContextTokens }
	var out []int
	for i, fo := range fos {
		res, err := fo.Generate(ctx, engine.GenerateRequest{PromptIDs: prompt, MaxTokens: 4})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			out = res.IDs
		}
		if got := counted(); got != len(prompt) {
			t.Fatalf("after %d first turns of one prompt: %d counted, want %d", i+1, got, len(prompt))
		}
	}
	next := append(append([]int(nil), prompt...), out...)
	if _, err := fos[0].Generate(ctx, engine.GenerateRequest{PromptIDs: next, MaxTokens: 4}); err != nil {
		t.Fatal(err)
	}
	if got, want := counted(), len(prompt)+len(out); got != want {
		t.Fatalf("after a second turn: %d counted, want %d", got, want)
	}
}
