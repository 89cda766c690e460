package tokenizer

import (
	"context"
	"encoding/json"
	"github.com/prorl/prorl/internal/testmodels"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prorl/prorl/core/trajectory"
)

func standardTools(t *testing.T) []trajectory.Tool {
	var set struct {
		Standard []trajectory.Tool `json:"standard"`
	}
	b, err := os.ReadFile(filepath.Join("testdata", "corpus", "tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &set); err != nil {
		t.Fatal(err)
	}
	return set.Standard
}

// TestTextSplicing runs a three-turn tool-using episode through the text
// splicer on real tokenizers and templates: the delta never re-encodes the
// past, and the verifier reports exactly the templates that do not
// reproduce the tokens kept.
func TestTextSplicing(t *testing.T) {
	dir := testmodels.Dir(t)
	tools := standardTools(t)
	cases := []struct {
		model, template string
		kwargs          map[string]any
		stop            string
		opts            LocalOptions
		// gen is what the model writes in turn k (its stop token is added).
		gen          func(k int) string
		wantMismatch bool
	}{
		{model: "qwen3", template: "model", stop: "<|im_end|>",
			gen: func(k int) string {
				return "<think>\nStep " + string(rune('0'+k)) + ".\n</think>\n\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>"
			}},
		{model: "qwen3", template: "model", stop: "<|im_end|>", kwargs: map[string]any{"enable_thinking": false},
			// The prompt ends in an empty think block that the template drops
			// when it renders the turn as history: not append-only.
			gen: func(int) string {
				return "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>"
			},
			wantMismatch: true},
		{model: "qwen3", template: "qwen2.5", stop: "<|im_end|>",
			gen: func(int) string {
				return "<tool_call>\n{\"name\": \"python\", \"arguments\": {\"code\": \"print(1)\"}}\n</tool_call>"
			}},
		{model: "qwen3", template: "qwen2.5", stop: "<|im_end|>",
			// The model spaces its JSON differently from tojson: the kept
			// tokens are what it wrote, and the verifier says so.
			gen: func(int) string {
				return "<tool_call>\n{\"name\":\"python\",\"arguments\":{\"code\":\"print(1)\"}}\n</tool_call>"
			},
			wantMismatch: true},
		{model: "llama3_1", template: "llama3.1-tools", stop: "<|eot_id|>", kwargs: map[string]any{"date_string": "22 Nov 2026"},
			gen: func(int) string { return "{\"name\": \"bash\", \"parameters\": {\"command\": \"ls\"}}" }},
	}
	for _, c := range cases {
		t.Run(c.model+"/"+c.template, func(t *testing.T) {
			opts := c.opts
			if c.template != "model" {
				src, err := os.ReadFile(filepath.Join("testdata", "templates", c.template+".jinja"))
				if err != nil {
					t.Fatal(err)
				}
				opts.ChatTemplate = string(src)
			}
			l, err := LoadDir(filepath.Join(dir, c.model), opts)
			if err != nil {
				t.Fatal(err)
			}
			stopID, ok := l.BPE().TokenID(c.stop)
			if !ok {
				t.Fatalf("no token %q", c.stop)
			}
			ctx := context.Background()
			msgs := []trajectory.Message{{Role: "system", Content: "You are an agent."}, {Role: "user", Content: "List the files."}}
			ids, err := l.Render(ctx, msgs, tools, RenderOptions{AddGenerationPrompt: true, Kwargs: c.kwargs})
			if err != nil {
				t.Fatal(err)
			}
			v := NewVerifier(l)
			sp := NewSplicer()
			mismatch := false
			for k := range 3 {
				text := c.gen(k)
				gen := append(l.EncodeText(text), stopID)
				before := slices.Clone(ids)
				ids = append(ids, gen...)
				am := trajectory.Message{Role: "assistant", ToolCalls: []trajectory.ToolCall{{ID: "c", Type: "function", Function: trajectory.FunctionCall{Name: "bash", Arguments: `{"command": "ls"}`}}}}
				switch c.model + c.template {
				case "qwen3model":
					am.ReasoningContent = "Step " + string(rune('0'+k)) + "."
					if c.kwargs != nil {
						am.ReasoningContent = ""
					}
				case "qwen3qwen2.5":
					am.ToolCalls[0].Function = trajectory.FunctionCall{Name: "python", Arguments: `{"code": "print(1)"}`}
				}
				obs := []trajectory.Message{{Role: "tool", Content: "file-" + string(rune('a'+k)), ToolCallID: "c", Name: "bash"}}
				msgs = append(msgs, am)
				d, err := sp.Delta(ctx, l, stopID, obs, tools, c.kwargs)
				if err != nil {
					t.Fatal(err)
				}
				msgs = append(msgs, obs...)
				ids = append(ids, d...)
				if !slices.Equal(ids[:len(before)], before) {
					t.Fatal("the past changed")
				}
				off, err := v.Check(ids, msgs, tools, c.kwargs)
				if err != nil {
					t.Fatal(err)
				}
				if off >= 0 {
					mismatch = true
					if !c.wantMismatch {
						want, _ := l.RenderText(msgs, tools, RenderOptions{AddGenerationPrompt: true, Kwargs: c.kwargs})
						t.Fatalf("turn %d: template and tokens differ at byte %d:\n%q\nvs\n%q", k, off, v.Text()[max(off-80, 0):], want[max(off-80, 0):])
					}
				}
			}
			if mismatch != c.wantMismatch {
				t.Fatalf("mismatch reported: %v, want %v", mismatch, c.wantMismatch)
			}
		})
	}
}

// A turn the model ends with another of its stop tokens (Qwen's
// <|endoftext|> where the template writes <|im_end|>) gets the same bridge.
func TestDeltaAfterAnotherStopToken(t *testing.T) {
	l, err := LoadDir(filepath.Join(testmodels.Dir(t), "qwen3"), LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	imEnd, _ := l.BPE().TokenID("<|im_end|>")
	eot, _ := l.BPE().TokenID("<|endoftext|>")
	obs := []trajectory.Message{{Role: "tool", Content: "ok", ToolCallID: "c"}}
	want, err := NewSplicer().Delta(context.Background(), l, imEnd, obs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := NewSplicer().Delta(context.Background(), l, eot, obs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("delta after <|endoftext|> %v, after <|im_end|> %v", got, want)
	}
	if s := l.tok.Decode(want); !strings.HasPrefix(s, "\n<|im_start|>user\n<tool_response>") {
		t.Fatalf("delta %q", s)
	}
}
