package prorl

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prorl/prorl/core/trajectory"
)

var update = flag.Bool("update", false, "rewrite golden files")

// The ProRL-compatible /process body for a fixed trajectory.
func TestFromResultGolden(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	res := &trajectory.Result{
		ID: "r-1", GroupID: "g-1", Domain: "math", Status: trajectory.StatusCompleted, Reward: 1, Resolved: true, EndReason: "finish",
		Info:   json.RawMessage(`{"git_patch":"diff --git a/x b/x\n"}`),
		Tokens: trajectory.Tokens{IDs: []int{1, 2, 3, 4, 5, 6, 7, 8, 9}, LossMask: []int8{0, 0, 0, 1, 1, 0, 0, 1, 1}, Logprobs: []float64{0, 0, 0, -0.5, -0.25, 0, 0, -1, -0.125}, PromptLen: 3},
		Messages: []trajectory.Message{
			{Role: "system", Content: "S", Span: &[2]int{0, 1}},
			{Role: "user", Content: "U", Span: &[2]int{1, 3}},
			{Role: "assistant", Content: "A", ToolCalls: []trajectory.ToolCall{{ID: "c", Type: "function", Function: trajectory.FunctionCall{Name: "think", Arguments: `{"thought":"t"}`}}}, Span: &[2]int{3, 5}},
			{Role: "tool", Content: "ok", Span: &[2]int{5, 7}},
			{Role: "assistant", Content: "B", Span: &[2]int{7, 9}},
		},
		Tools:  []trajectory.Tool{{Type: "function", Function: trajectory.ToolFunction{Name: "think", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`)}}},
		Timing: trajectory.Timing{QueuedMS: 5, InitMS: 10, RunMS: 200, EvalMS: 30, TotalMS: 245}, SubmittedAt: at, FinishedAt: &at,
	}
	out := FromResult(res)
	out.InstanceID, out.TrajectoryID = "i-1", 0
	failed := *res
	failed.Status, failed.Failure = trajectory.StatusFailed, &trajectory.Failure{Stage: "run", Reason: "plugin_crashed", Message: "math: process restarted"}
	// Out of iterations after a tool turn: the trailing tool message goes.
	cut := *res
	cut.Status, cut.EndReason, cut.Messages = trajectory.StatusTruncated, "max_turns", res.Messages[:4]
	// The first prompt already overflows the context: no assistant turn,
	// so no success (ProRL: a run error), though truncated rollouts are.
	overflow := *res
	overflow.Status, overflow.EndReason, overflow.Messages = trajectory.StatusTruncated, "context_overflow", res.Messages[:2]
	overflow.Failure = &trajectory.Failure{Stage: "run", Reason: "context_overflow", Message: "the prompt has 9000 tokens, max_total_tokens is 8192"}
	got, _ := json.MarshalIndent(map[string]any{"completed": out, "failed": FromResult(&failed), "max_iterations": FromResult(&cut), "first_call_overflow": FromResult(&overflow)}, "", "  ")
	got = append(got, '\n')
	p := filepath.Join("testdata", "result.golden.json")
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if string(want) != string(got) {
		t.Errorf("differs from %s; run go test -update if intended\n%s", p, got)
	}
}

func TestSamplingFrom(t *testing.T) {
	s, turns, e := samplingFrom(map[string]any{"temperature": 0.7, "top_p": 0.9, "max_iterations": 5.0, "max_output_tokens": 256.0,
		"max_input_tokens": 1000.0, "ensure_thinking_end_properly": true, "model": "x", "token_level_generation": true})
	if e != nil || *s.Temperature != 0.7 || *s.TopP != 0.9 || turns != 5 || s.MaxTokensPerTurn != 256 || s.MaxTotalTokens != 1256 {
		t.Fatalf("%+v %d %v", s, turns, e)
	}
	for _, bad := range []struct {
		sp    map[string]any
		field string
	}{
		{map[string]any{"temperature": "hot"}, "sampling_params.temperature"},
		{map[string]any{"max_iterations": -5.0}, "sampling_params.max_iterations"},
		{map[string]any{"max_iterations": 0.5}, "sampling_params.max_iterations"},
		{map[string]any{"max_iterations": 0.0}, "sampling_params.max_iterations"},
		{map[string]any{"max_output_tokens": 1.5}, "sampling_params.max_output_tokens"},
	} {
		if _, _, e := samplingFrom(bad.sp); e == nil || e.Field != bad.field {
			t.Errorf("%v: %+v", bad.sp, e)
		}
	}
}
