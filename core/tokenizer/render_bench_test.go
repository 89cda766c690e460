package tokenizer

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/testmodels"
)

// BenchmarkRenderTools renders a single-turn prompt with two tools through
// Qwen3's template: what the host does per rollout with [tokenizer]
// model_dir instead of a /tokenize call.
func BenchmarkRenderTools(b *testing.B) {
	l, err := LoadDir(filepath.Join(testmodels.Dir(b), "qwen3"), LocalOptions{})
	if err != nil {
		b.Fatal(err)
	}
	tool := func(name, desc, params string) trajectory.Tool {
		var t trajectory.Tool
		t.Type, t.Function.Name, t.Function.Description, t.Function.Parameters = "function", name, desc, json.RawMessage(params)
		return t
	}
	tools := []trajectory.Tool{
		tool("python", "Run Python code in a sandbox and return its output.",
			`{"type":"object","properties":{"code":{"type":"string","description":"The code to run."},"timeout":{"type":"integer","description":"Seconds.","minimum":1}},"required":["code"]}`),
		tool("finish", "Submit the final answer.", `{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`),
	}
	msgs := []trajectory.Message{{Role: "system", Content: "You are a careful mathematician."},
		{Role: "user", Content: "What is the sum of the first 100 positive integers? Put the answer in \\boxed{}."}}
	ctx := context.Background()
	for b.Loop() {
		if _, err := l.Render(ctx, msgs, tools, RenderOptions{AddGenerationPrompt: true}); err != nil {
			b.Fatal(err)
		}
	}
}
