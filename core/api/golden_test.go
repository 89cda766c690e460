package api

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
func TestToProRLGolden(t *testing.T) {
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
	out := ToProRL(res)
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
	got, _ := json.MarshalIndent(map[string]any{"completed": out, "failed": ToProRL(&failed), "max_iterations": ToProRL(&cut), "first_call_overflow": ToProRL(&overflow)}, "", "  ")
	got = append(got, '\n')
	p := filepath.Join("testdata", "prorl_result.golden.json")
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
