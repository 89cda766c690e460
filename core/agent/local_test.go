package agent

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/prorl/prorl/core/engine"
	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/toolcall"
	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/testmodels"
)

// localGen replies with fixed texts encoded by the Go tokenizer; rendering
// must not reach it when the runner has a local tokenizer.
type localGen struct {
	l       *tokenizer.Local
	replies []string
	calls   int
	prompts [][]int
}

func (g *localGen) Render(context.Context, []trajectory.Message, []trajectory.Tool, tokenizer.RenderOptions) ([]int, error) {
	return nil, errors.New("the backend's /tokenize was called")
}
func (g *localGen) Decode(context.Context, []int) (string, error) {
	return "", errors.New("the backend's /detokenize was called")
}
func (g *localGen) Health(context.Context) error { return nil }
func (g *localGen) Generate(_ context.Context, r engine.GenerateRequest) (*engine.GenerateResult, error) {
	g.prompts = append(g.prompts, append([]int(nil), r.PromptIDs...))
	stop, _ := g.l.BPE().TokenID("<|im_end|>")
	ids := append(g.l.EncodeText(g.replies[g.calls]), stop)
	g.calls++
	lps := make([]float64, len(ids))
	for i := range lps {
		lps[i] = -0.25
	}
	return &engine.GenerateResult{IDs: ids, Logprobs: lps, FinishReason: "stop"}, nil
}

func TestLocalTokenizerEpisode(t *testing.T) {
	l, err := tokenizer.LoadDir(filepath.Join(testmodels.Dir(t), "qwen3"), tokenizer.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tools := []trajectory.Tool{
		{Type: "function", Function: trajectory.ToolFunction{Name: "think", Description: "Think.", Parameters: json.RawMessage(`{"type":"object","properties":{"thought":{"type":"string"}}}`)}},
		{Type: "function", Function: trajectory.ToolFunction{Name: "finish", Description: "Finish.", Parameters: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}}}`)}},
	}
	gen := &localGen{l: l, replies: []string{
		"<think>\nFirst think.\n</think>\n\n<tool_call>\n{\"name\": \"think\", \"arguments\": {\"thought\": \"hmm\"}}\n</tool_call>",
		"<think>\nNow finish.\n</think>\n\n<tool_call>\n{\"name\": \"finish\", \"arguments\": {\"message\": \"42\"}}\n</tool_call>",
	}}
	rn := &Runner{Parser: toolcall.Hermes{}, Policy: func() int64 { return 1 }, Local: l, CheckTemplate: true}
	ep := Episode{Messages: []trajectory.Message{{Role: "system", Content: "Solve it."}, {Role: "user", Content: "What is 6*7?"}},
		Tools: tools, MaxTurns: 4, MaxTokensPerTurn: 512, MaxTotalTokens: 8192}
	out, err := rn.Run(context.Background(), ep, gen, "b0", tokenizer.NewSplicer(), toolsFunc(finishTools))
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != trajectory.StatusCompleted || out.FinalResponse != "42" {
		t.Fatalf("status %s %q", out.Status, out.FinalResponse)
	}
	// The second prompt is the first prompt, the first reply and the delta,
	// exactly; and the template renders the conversation as those tokens.
	tk := out.Tokens
	if len(gen.prompts) != 2 || len(tk.IDs) != len(gen.prompts[1])+len(out.Turns[1].ResponseIDs) {
		t.Fatalf("prompts %d, ids %d", len(gen.prompts), len(tk.IDs))
	}
	for i, id := range gen.prompts[1] {
		if tk.IDs[i] != id {
			t.Fatalf("token %d differs from what the backend saw", i)
		}
	}
	gen1 := 0
	for i, m := range tk.LossMask {
		gen1 += int(m)
		if m == 1 && tk.Logprobs[i] != -0.25 {
			t.Fatalf("logprob of generated token %d is %v", i, tk.Logprobs[i])
		}
	}
	if gen1 != len(out.Turns[0].ResponseIDs)+len(out.Turns[1].ResponseIDs) {
		t.Fatalf("loss mask covers %d tokens", gen1)
	}
	if out.Metrics["template_checked_turns"] != 1 || out.Metrics["template_mismatch_turns"] != 0 {
		t.Fatalf("metrics %v", out.Metrics)
	}
	if out.Messages[2].ReasoningContent != "First think." {
		t.Fatalf("reasoning %q", out.Messages[2].ReasoningContent)
	}
}
