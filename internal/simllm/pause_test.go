package simllm

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prorl/prorl/core/engine"
	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/trajectory"
)

// A generation aborted by /pause comes back with finish_reason "abort" and
// its tokens so far; resumed with those tokens appended to the prompt, it
// continues to exactly what the unpaused generation writes, logprobs too.
func TestPauseAbortAndContinue(t *testing.T) {
	for _, sched := range []bool{false, true} {
		opt := Options{Scripts: []Script{{Key: "Say a lot.", Play: Play{Final: longAnswer}}}, CorrectRate: 1, TokenLatency: 2 * time.Millisecond}
		if sched {
			m := DefaultEngine()
			m.TimeScale = 2 // ~12 ms a step: the pause lands mid-generation
			opt.Engine = &m
		}
		sim := New(opt)
		ts := httptest.NewServer(sim)
		ctx := context.Background()
		c := &engine.VLLM{BaseURL: ts.URL}
		prompt, err := c.Render(ctx, []trajectory.Message{{Role: "user", Content: "Say a lot."}}, nil, tokenizer.RenderOptions{AddGenerationPrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		seed := int64(3)
		req := engine.GenerateRequest{PromptIDs: prompt, MaxTokens: 4000, Temperature: 1, TopP: 1, Seed: &seed}
		// The reference run, on a fresh simulator with no latency.
		ref, err := (&engine.VLLM{BaseURL: httptest.NewServer(New(Options{Scripts: opt.Scripts, CorrectRate: 1})).URL}).Generate(ctx, req)
		if err != nil || ref.FinishReason != "stop" || len(ref.IDs) < 50 {
			t.Fatalf("reference: %+v %v", ref, err)
		}
		got := make(chan *engine.GenerateResult, 1)
		go func() {
			g, err := c.Generate(ctx, req)
			if err != nil {
				t.Error(err)
			}
			got <- g
		}()
		time.Sleep(60 * time.Millisecond)
		if err := c.Pause(ctx, true); err != nil {
			t.Fatal(err)
		}
		part := <-got
		if part.FinishReason != engine.FinishAbort || len(part.IDs) == 0 || len(part.IDs) >= len(ref.IDs) {
			t.Fatalf("engine=%v: aborted generation: %d tokens, finish %q (reference %d)", sched, len(part.IDs), part.FinishReason, len(ref.IDs))
		}
		if !slices.Equal(part.IDs, ref.IDs[:len(part.IDs)]) || !slices.Equal(part.Logprobs, ref.Logprobs[:len(part.IDs)]) {
			t.Fatalf("engine=%v: the aborted tokens are not a prefix of the generation", sched)
		}
		if !isPaused(t, ts.URL) {
			t.Fatal("not paused")
		}
		// While paused, a new request waits.
		cont := req
		cont.PromptIDs = append(slices.Clone(prompt), part.IDs...)
		cont.MaxTokens -= len(part.IDs)
		go func() {
			g, err := c.Generate(ctx, cont)
			if err != nil {
				t.Error(err)
			}
			got <- g
		}()
		select {
		case g := <-got:
			t.Fatalf("a request ran while paused: %+v", g)
		case <-time.After(100 * time.Millisecond):
		}
		if err := c.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		rest := <-got
		if rest.FinishReason != "stop" {
			t.Fatalf("continuation finished %q", rest.FinishReason)
		}
		if !slices.Equal(append(slices.Clone(part.IDs), rest.IDs...), ref.IDs) || !slices.Equal(append(slices.Clone(part.Logprobs), rest.Logprobs...), ref.Logprobs) {
			t.Fatalf("engine=%v: paused+continued differs from the unpaused generation", sched)
		}
		ts.Close()
	}
}

// mode=wait lets in-flight requests finish before /pause answers.
func TestPauseWaitDrains(t *testing.T) {
	sim := New(Options{Scripts: []Script{{Key: "Say a lot.", Play: Play{Final: longAnswer}}}, CorrectRate: 1, TokenLatency: time.Millisecond})
	ts := httptest.NewServer(sim)
	defer ts.Close()
	ctx := context.Background()
	c := &engine.VLLM{BaseURL: ts.URL}
	prompt, _ := c.Render(ctx, []trajectory.Message{{Role: "user", Content: "Say a lot."}}, nil, tokenizer.RenderOptions{AddGenerationPrompt: true})
	got := make(chan *engine.GenerateResult, 1)
	go func() {
		g, _ := c.Generate(ctx, engine.GenerateRequest{PromptIDs: prompt, MaxTokens: 4000, Temperature: 1, TopP: 1})
		got <- g
	}()
	time.Sleep(30 * time.Millisecond)
	if err := c.Pause(ctx, false); err != nil {
		t.Fatal(err)
	}
	if g := <-got; g == nil || g.FinishReason != "stop" {
		t.Fatalf("a request in flight at /pause?mode=wait should finish: %+v", g)
	}
	sim.pause.mu.Lock()
	n := sim.pause.inflight
	sim.pause.mu.Unlock()
	if n != 0 {
		t.Fatal("/pause?mode=wait answered with a request in flight")
	}
	resp, err := http.Post(ts.URL+"/pause?mode=keep", "", nil)
	if err != nil || resp.StatusCode != 400 {
		t.Fatalf("mode=keep: %v %v", resp, err)
	}
}

func isPaused(t *testing.T, url string) bool {
	resp, err := http.Get(url + "/is_paused")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		IsPaused bool `json:"is_paused"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v.IsPaused
}

const longAnswer = "Here is a long answer that goes on for a while so that a pause lands in the middle of it: " +
	"one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen " +
	"eighteen nineteen twenty, and then the result, which is \\boxed{42}."
