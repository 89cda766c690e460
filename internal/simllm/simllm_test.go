package simllm

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prorl/prorl/core/engine"
	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/syncbuf"
	"github.com/prorl/prorl/internal/testmodels"
)

func TestTokenizerRoundTrip(t *testing.T) {
	tok := NewTokenizer()
	for _, s := range []string{"", "hello world", "<|im_start|>user\nWhat is 1+1?<|im_end|>\n", "héllo 🙂 \\boxed{\\frac{1}{2}}", "<tool_call<|im_end|>"} {
		ids := tok.Encode(s)
		if got := tok.Decode(ids); got != s {
			t.Errorf("round trip %q -> %v -> %q", s, ids, got)
		}
	}
	if ids := tok.Encode("<|im_end|>"); !slices.Equal(ids, []int{idImEnd}) {
		t.Errorf("special token: %v", ids)
	}
}

func TestProtocolAndSplice(t *testing.T) {
	// The server writes a request's log entry after its response: read
	// the log under the writer's lock, and wait for the entry.
	var log syncbuf.Buffer
	sim := New(Options{Scripts: []Script{{Key: "What is 2+2?", Play: Play{
		Calls: []Call{{Tool: "think", Arguments: json.RawMessage(`{"thought": "2 and 2"}`)}}, Final: `The answer is \boxed{4}.`}}},
		CorrectRate: 1, Log: &log})
	ts := httptest.NewServer(sim)
	defer ts.Close()
	ctx := context.Background()
	for _, proto := range []string{"vllm", "generate"} {
		c, _ := engine.NewClient(proto, ts.URL, "prorl-sim")
		tools := []trajectory.Tool{{Type: "function", Function: trajectory.ToolFunction{Name: "finish", Description: "end", Parameters: json.RawMessage(`{"type":"object"}`)}}}
		msgs := []trajectory.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "What is 2+2?"}}
		prompt, err := c.Render(ctx, msgs, tools, tokenizer.RenderOptions{AddGenerationPrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(sim.tok.Decode(prompt), "<|im_start|>assistant\n") {
			t.Fatalf("no generation prompt: %q", sim.tok.Decode(prompt))
		}
		seed := int64(7)
		g, err := c.Generate(ctx, engine.GenerateRequest{PromptIDs: prompt, MaxTokens: 512, Temperature: 1, TopP: 1, Seed: &seed})
		if err != nil {
			t.Fatal(err)
		}
		if g.FinishReason != "stop" || g.IDs[len(g.IDs)-1] != idImEnd || len(g.Logprobs) != len(g.IDs) {
			t.Fatalf("%s: generation %+v", proto, g)
		}
		text, err := c.Decode(ctx, g.IDs)
		if err != nil || !strings.Contains(text, `"name": "think"`) {
			t.Fatalf("%s: first turn should think: %q %v", proto, text, err)
		}
		sp := tokenizer.NewSplicer()
		obs := []trajectory.Message{{Role: "tool", Content: "logged", ToolCallID: "c1"}}
		delta, err := sp.Delta(ctx, c, g.IDs[len(g.IDs)-1], obs, tools, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := "\n<|im_start|>user\n<tool_response>\nlogged\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
		if got := sim.tok.Decode(delta); got != want {
			t.Fatalf("delta %q, want %q", got, want)
		}
		next := append(append(slices.Clone(prompt), g.IDs...), delta...)
		g2, err := c.Generate(ctx, engine.GenerateRequest{PromptIDs: next, MaxTokens: 512, Temperature: 1, TopP: 1, Seed: &seed})
		if err != nil {
			t.Fatal(err)
		}
		if text, _ := c.Decode(ctx, g2.IDs); !strings.Contains(text, `\\boxed{4}`) || !strings.Contains(text, "finish") {
			t.Fatalf("second turn should finish with 4: %q", text)
		}
		g3, err := c.Generate(ctx, engine.GenerateRequest{PromptIDs: next, MaxTokens: 5, Seed: &seed})
		if err != nil || g3.FinishReason != "length" || len(g3.IDs) != 5 {
			t.Fatalf("max_tokens: %+v %v", g3, err)
		}
	}
	decision := `"decision":{"question":"What is 2+2?","answer":"The answer is \\boxed{4}.","correct":true,"action":"finish","scripted":true,"turn":1}`
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(log.String(), decision); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("log lacks the decision: %s", log.String())
		}
	}
	if _, err := (&engine.VLLM{BaseURL: ts.URL, Model: "nope"}).Generate(ctx, engine.GenerateRequest{PromptIDs: []int{1}, MaxTokens: 1}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("unknown model: %v", err)
	}
}

// Chaos and policy decisions hash a seed with a request counter: values for
// consecutive counters must be spread like independent draws.
func TestUnitSpreadsConsecutiveCounters(t *testing.T) {
	below, run, longest := 0, 0, 0
	for n := uint64(0); n < 2000; n++ {
		if unit("fail", int64(1), n) < 0.3 {
			below++
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	if below < 500 || below > 700 || longest > 12 {
		t.Fatalf("%d of 2000 below 0.3 (want about 600), longest run %d", below, longest)
	}
}

// With a model directory, the simulator tokenises and templates like the
// host's Go tokenizer: what /tokenize returns is what the host renders, and
// replies end with the model's <|im_end|>.
func TestModelDirectory(t *testing.T) {
	l, err := tokenizer.LoadDir(filepath.Join(testmodels.Dir(t), "qwen3"), tokenizer.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sim := New(Options{Scripts: []Script{{Key: "What is 2+2?", Play: Play{Final: `The answer is \boxed{4}.`}}}, CorrectRate: 1, Local: l})
	ts := httptest.NewServer(sim)
	defer ts.Close()
	ctx := context.Background()
	c, _ := engine.NewClient("vllm", ts.URL, "prorl-sim")
	msgs := []trajectory.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "What is 2+2?"}}
	remote, err := c.Render(ctx, msgs, nil, tokenizer.RenderOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	local, _ := l.Render(ctx, msgs, nil, tokenizer.RenderOptions{AddGenerationPrompt: true})
	if !slices.Equal(remote, local) {
		t.Fatalf("/tokenize %v, Go tokenizer %v", remote, local)
	}
	g, err := c.Generate(ctx, engine.GenerateRequest{PromptIDs: local, MaxTokens: 512, Temperature: 1, TopP: 1})
	if err != nil {
		t.Fatal(err)
	}
	imEnd, _ := l.BPE().TokenID("<|im_end|>")
	if g.IDs[len(g.IDs)-1] != imEnd || !strings.Contains(g.Text, `\boxed{4}`) {
		t.Fatalf("generation %+v", g)
	}
}

// TestPolicyPlaysAnyDomain: a scripted task plays its calls and answer (its
// wrong way when drawn wrong); an unknown task tries each offered tool once
// with arguments its schema accepts, then gives up; nothing depends on
// which domain offers the tools.
func TestPolicyPlaysAnyDomain(t *testing.T) {
	calc := json.RawMessage(`{"name":"calc","description":"c","parameters":{"type":"object","properties":{"expression":{"type":"string"},"n":{"type":"integer","minimum":3},"mode":{"type":"string","enum":["fast","slow"]}},"required":["expression","n","mode"]}}`)
	finish := json.RawMessage(`{"name":"finish","description":"f","parameters":{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}}`)
	script := Script{Key: "Make 16 from 3 5 2.", Play: Play{Calls: []Call{{Tool: "calc", Arguments: json.RawMessage(`{"expression":"(3+5)*2"}`)}}, Final: "<answer>(3+5)*2</answer>"},
		Wrong: &Play{Final: "<answer>3+5+2</answer>"}}
	for _, c := range []struct {
		name    string
		q       string
		correct float64
		tools   []Tool
		want    []string
	}{
		{"right", "Make 16 from 3 5 2.", 1, []Tool{{Type: "function", Function: calc}, {Type: "function", Function: finish}},
			[]string{`"name": "calc", "arguments": {"expression":"(3+5)*2"}`, `"name": "finish", "arguments": {"message":"\u003canswer\u003e(3+5)*2\u003c/answer\u003e"}`}},
		{"wrong", "Make 16 from 3 5 2. Show your work.", 0, []Tool{{Type: "function", Function: calc}, {Type: "function", Function: finish}},
			[]string{`"name": "finish", "arguments": {"message":"\u003canswer\u003e3+5+2\u003c/answer\u003e"}`}},
		{"no finish tool: the answer as text", "Make 16 from 3 5 2.", 1, []Tool{{Type: "function", Function: calc}},
			[]string{`"name": "calc"`, "<answer>(3+5)*2</answer>"}},
		{"unknown task explores", "Sort these words.", 1, []Tool{{Type: "function", Function: calc}, {Type: "function", Function: finish}},
			[]string{`"name": "calc", "arguments": {"expression":"test","mode":"fast","n":3}`, `"name": "finish", "arguments": {"message":"I do not know."}`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sim := New(Options{Scripts: []Script{script}, CorrectRate: c.correct})
			msgs := []Message{{Role: "user", Content: jsonString(c.q)}}
			for turn, want := range c.want {
				text := RenderChat(msgs, c.tools, true)
				out, _ := sim.policy(sim.tok.Encode(text), 1)
				if !strings.Contains(out, want) {
					t.Fatalf("turn %d: %q lacks %q", turn, out, want)
				}
				msgs = append(msgs, Message{Role: "assistant", Content: jsonString(out)}, Message{Role: "user", Content: jsonString("ok")})
			}
		})
	}
}

func jsonString(s string) *string { return &s }

func TestLoadScriptsIsStrict(t *testing.T) {
	for body, want := range map[string]string{
		`{"key": "q", "final": "1"}` + "\n":                                   "",
		`{"key": "q", "answer": "1"}`:                                         `unknown field "answer"`,
		`{"final": "1"}`:                                                      "key: empty",
		`{"key": "q", "calls": [{"tool": ""}]}`:                               "calls[0].tool: empty",
		`{"key": "q", "wrong": {"calls": [{"tool": "t", "arguments": [1]}]}}`: "wrong.calls[0].arguments: not a JSON object",
	} {
		p := filepath.Join(t.TempDir(), "s.jsonl")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadScripts(p)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
