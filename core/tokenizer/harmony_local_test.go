package tokenizer

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prorl/prorl/core/tokenizer/harmony"
	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/testmodels"
)

// TestHarmonyTurns: GPT-OSS's tokenizer with chat_format "harmony"
// renders the prompt as openai-harmony does (checked in package harmony)
// and splices a multi-turn episode: after a tool call the model ends with
// <|call|>, the observation is the tool's message and the next assistant
// header; after an answer ending <|return|>, the user's next message.
func TestHarmonyTurns(t *testing.T) {
	dir := filepath.Join(testmodels.Dir(t), "gptoss")
	l, err := LoadDir(dir, LocalOptions{ChatFormat: "harmony", HarmonyOptions: harmony.Options{ReasoningEffort: "high", Date: "2025-06-28"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tools := []trajectory.Tool{{Type: "function", Function: trajectory.ToolFunction{Name: "bash", Description: "Run a command.",
		Parameters: []byte(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}}}
	msgs := []trajectory.Message{{Role: "system", Content: "Fix the bug."}, {Role: "user", Content: "Go."}}
	prompt, err := l.Render(ctx, msgs, tools, RenderOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	text, _ := l.Decode(ctx, prompt)
	for _, want := range []string{"Current date: 2025-06-28", "Reasoning: high", "# Instructions\n\nFix the bug.", "type bash = (_: {\ncommand: string,\n}) => any;", "<|start|>user<|message|>Go.<|end|><|start|>assistant"} {
		if !strings.Contains(text, want) {
			t.Fatalf("prompt lacks %q:\n%s", want, text)
		}
	}
	sp := NewSplicer()
	id := func(s string) int {
		v, ok := l.BPE().TokenID(s)
		if !ok {
			t.Fatalf("no %s", s)
		}
		return v
	}
	d, err := sp.Delta(ctx, l, id("<|call|>"), []trajectory.Message{{Role: "tool", Name: "bash", ToolCallID: "c1", Content: "a.py"}}, tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Decode(ctx, d); got != "<|start|>functions.bash to=assistant<|channel|>commentary<|message|>a.py<|end|><|start|>assistant" {
		t.Fatalf("delta after a call: %q", got)
	}
	d, err = sp.Delta(ctx, l, id("<|return|>"), []trajectory.Message{{Role: "user", Content: "Again."}}, tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Decode(ctx, d); got != "<|start|>user<|message|>Again.<|end|><|start|>assistant" {
		t.Fatalf("delta after an answer: %q", got)
	}
	// A kwarg overrides the effort; other tokenizers cannot render harmony.
	text, err = l.RenderText(msgs, nil, RenderOptions{AddGenerationPrompt: true, Kwargs: map[string]any{"reasoning_effort": "low"}})
	if err != nil || !strings.Contains(text, "Reasoning: low") {
		t.Fatalf("kwarg: %v %q", err, text)
	}
	if _, err := LoadDir(filepath.Join(testmodels.Dir(t), "qwen3"), LocalOptions{ChatFormat: "harmony"}); err == nil || !strings.Contains(err.Error(), "<|start|>") {
		t.Fatalf("qwen3 with harmony: %v", err)
	}
	if _, err := LoadDir(dir, LocalOptions{ChatFormat: "chatml"}); err == nil {
		t.Fatal("an unknown chat format loaded")
	}
}
