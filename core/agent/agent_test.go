package agent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/prorl/prorl/core/engine"
	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/toolcall"
	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/simllm"
)

// scripted is a generator that replies with fixed texts, tokenised and
// templated like the simulator.
type scripted struct {
	tok     *simllm.Tokenizer
	replies []string
	calls   int
	failAt  int // 1-based call that fails with HTTP 500
	renders int
}

func (s *scripted) Render(_ context.Context, msgs []trajectory.Message, tools []trajectory.Tool, o tokenizer.RenderOptions) ([]int, error) {
	s.renders++
	b, _ := json.Marshal(map[string]any{"messages": msgs, "tools": tools})
	var in struct {
		Messages []simllm.Message `json:"messages"`
		Tools    []simllm.Tool    `json:"tools"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, err
	}
	return s.tok.Encode(simllm.RenderChat(in.Messages, in.Tools, o.AddGenerationPrompt)), nil
}

func (s *scripted) Decode(_ context.Context, ids []int) (string, error) {
	return s.tok.Decode(ids), nil
}
func (s *scripted) Health(context.Context) error { return nil }

func (s *scripted) Generate(_ context.Context, r engine.GenerateRequest) (*engine.GenerateResult, error) {
	s.calls++
	if s.calls == s.failAt {
		return nil, &engine.StatusError{URL: "sim", Status: 500, Body: "boom"}
	}
	text := s.replies[min(s.calls-1, len(s.replies)-1)]
	ids := append(s.tok.Encode(text), 2) // <|im_end|>
	fr := "stop"
	if len(ids) > r.MaxTokens {
		ids, fr = ids[:r.MaxTokens], "length"
	}
	lps := make([]float64, len(ids))
	for i := range lps {
		lps[i] = -0.5
	}
	return &engine.GenerateResult{IDs: ids, Logprobs: lps, FinishReason: fr}, nil
}

type toolsFunc func(name string, args json.RawMessage) (ToolResult, error)

func (f toolsFunc) Call(_ context.Context, _, name string, args json.RawMessage) (ToolResult, error) {
	return f(name, args)
}

func finishTools(name string, args json.RawMessage) (ToolResult, error) {
	switch name {
	case "finish":
		var a struct{ Message string }
		_ = json.Unmarshal(args, &a)
		return ToolResult{Done: true, FinalResponse: a.Message}, nil
	case "think":
		return ToolResult{Output: "logged"}, nil
	}
	return ToolResult{Output: "Error: unknown tool " + name, IsError: true}, nil
}

const (
	think  = "<tool_call>\n{\"name\": \"think\", \"arguments\": {\"thought\": \"hmm\"}}\n</tool_call>"
	finish = "done <tool_call>\n{\"name\": \"finish\", \"arguments\": {\"message\": \"\\\\boxed{4}\"}}\n</tool_call>"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name      string
		replies   []string
		failAt    int
		tools     toolsFunc
		maxTurns  int
		perTurn   int
		total     int
		status    trajectory.Status
		endReason string
		final     string
		errReason string
		turns     int
		check     func(t *testing.T, o *Outcome)
	}{
		{name: "finish", replies: []string{think, finish}, status: trajectory.StatusCompleted, endReason: "finish", final: `\boxed{4}`, turns: 2},
		{name: "stop without tool", replies: []string{"The answer is 4."}, status: trajectory.StatusCompleted, endReason: "stop", final: "The answer is 4.", turns: 1},
		{name: "max turns", replies: []string{think}, maxTurns: 2, status: trajectory.StatusTruncated, endReason: "max_turns", turns: 2},
		{name: "malformed call is shown to the model", replies: []string{"<tool_call>{oops</tool_call>", finish}, status: trajectory.StatusCompleted, endReason: "finish", turns: 2,
			check: func(t *testing.T, o *Outcome) {
				if m := o.Messages[3]; m.Role != "tool" || !strings.Contains(m.Content, "could not parse") {
					t.Errorf("observation %+v", m)
				}
			}},
		{name: "unclosed call", replies: []string{"<tool_call>{\"name\": \"think\"", finish}, status: trajectory.StatusCompleted, endReason: "finish", turns: 2},
		{name: "unknown tool is an error observation", replies: []string{"<tool_call>{\"name\":\"fly\",\"arguments\":{}}</tool_call>", finish}, status: trajectory.StatusCompleted, endReason: "finish", turns: 2},
		{name: "turn hits max tokens", replies: []string{strings.Repeat("word ", 100)}, perTurn: 20, status: trajectory.StatusTruncated, endReason: "context_overflow", turns: 1},
		{name: "observation overflows budget", replies: []string{think}, total: 0, status: trajectory.StatusTruncated, endReason: "context_overflow", turns: 1},
		{name: "backend failure", replies: []string{think, finish}, failAt: 2, errReason: trajectory.ReasonBackendUnavailable, turns: 1},
		{name: "tool failure fails the rollout", replies: []string{think}, tools: func(string, json.RawMessage) (ToolResult, error) {
			return ToolResult{}, &Error{Reason: trajectory.ReasonToolError, Err: errors.New("sandbox gone")}
		}, errReason: trajectory.ReasonToolError, turns: 1},
	}
	for _, tt := range tests {
		for _, chat := range []bool{false, true} {
			name := tt.name
			if chat {
				name += ", first turn in one chat exchange"
			}
			t.Run(name, func(t *testing.T) {
				var gen Generator = &scripted{tok: simllm.NewTokenizer(), replies: tt.replies, failAt: tt.failAt}
				if chat {
					gen = &chatScripted{scripted: gen.(*scripted)}
				}
				sc := scriptedOf(gen)
				tools := tt.tools
				if tools == nil {
					tools = finishTools
				}
				ep := Episode{
					Messages: []trajectory.Message{{Role: "system", Content: "S"}, {Role: "user", Content: "What is 2+2?"}},
					Tools: []trajectory.Tool{{Type: "function", Function: trajectory.ToolFunction{Name: "finish", Parameters: json.RawMessage(`{"type":"object"}`)}},
						{Type: "function", Function: trajectory.ToolFunction{Name: "think", Parameters: json.RawMessage(`{"type":"object"}`)}}},
					MaxTurns: 8, MaxTokensPerTurn: 512, MaxTotalTokens: 4096, Temperature: 1, TopP: 1,
				}
				if tt.maxTurns > 0 {
					ep.MaxTurns = tt.maxTurns
				}
				if tt.perTurn > 0 {
					ep.MaxTokensPerTurn = tt.perTurn
				}
				prompt, _ := gen.Render(context.Background(), ep.Messages, ep.Tools, tokenizer.RenderOptions{AddGenerationPrompt: true})
				sc.renders = 0
				if tt.name == "observation overflows budget" {
					first, _ := gen.Generate(context.Background(), engine.GenerateRequest{MaxTokens: 1 << 20})
					sc.calls = 0
					ep.MaxTotalTokens = len(prompt) + len(first.IDs) + 5 // room for the turn, not the observation
				}
				rn := &Runner{Parser: toolcall.Hermes{}, Policy: func() int64 { return 7 }}
				out, err := rn.Run(context.Background(), ep, gen, "b1", tokenizer.NewSplicer(), tools)
				if tt.errReason != "" {
					var ae *Error
					if !errors.As(err, &ae) || ae.Reason != tt.errReason {
						t.Fatalf("err = %v, want reason %s", err, tt.errReason)
					}
				} else if err != nil {
					t.Fatal(err)
				} else if out.Status != tt.status || out.EndReason != tt.endReason || (tt.final != "" && out.FinalResponse != tt.final) {
					t.Fatalf("status %s end %s final %q", out.Status, out.EndReason, out.FinalResponse)
				}
				if len(out.Turns) != tt.turns {
					t.Fatalf("turns %d, want %d", len(out.Turns), tt.turns)
				}
				// Invariants hold even for partial trajectories.
				tk := out.Tokens
				var seq []int
				gen1 := 0
				for _, turn := range out.Turns {
					seq = append(append(seq, turn.PromptDeltaIDs...), turn.ResponseIDs...)
					gen1 += len(turn.ResponseIDs)
					if turn.PolicyVersion != 7 || turn.Backend != "b1" {
						t.Errorf("turn stamp %+v", turn)
					}
				}
				ones := 0
				for _, m := range tk.LossMask {
					ones += int(m)
				}
				if err != nil && len(tk.IDs) > len(seq) {
					seq = append(seq, tk.IDs[len(seq):]...) // the delta sent with the failed request
				}
				if len(out.Turns) > 0 && (!equal(seq, tk.IDs) || ones != gen1 || len(tk.Logprobs) != len(tk.IDs)) {
					t.Fatalf("token invariant broken: %d ids, %d from turns, mask ones %d vs %d generated", len(tk.IDs), len(seq), ones, gen1)
				}
				if tt.status == trajectory.StatusTruncated && out.Failure == nil {
					t.Error("truncated without a failure reason")
				}
				if tt.check != nil {
					tt.check(t, out)
				}
				if c, ok := gen.(*chatScripted); ok && tt.name != "observation overflows budget" {
					if c.chats != 1 {
						t.Errorf("%d chat exchanges", c.chats)
					}
					if len(out.Turns) > 0 && !equal(out.Turns[0].PromptDeltaIDs, prompt) {
						t.Error("the chat exchange's prompt is not the rendered one")
					}
				}
			})
		}
	}
}

// chatScripted renders and generates the first turn in one call, as
// vLLM's chat endpoint does; refuse answers engine.ErrNoChat.
type chatScripted struct {
	*scripted
	chats  int
	refuse bool
	// extra is ids the server's prompt has beyond the messages' render.
	extra int
	empty bool // answer no tokens
}

func (c *chatScripted) GenerateChat(ctx context.Context, r engine.ChatRequest) ([]int, *engine.GenerateResult, error) {
	c.chats++
	if c.refuse {
		return nil, nil, engine.ErrNoChat
	}
	prompt, err := c.Render(ctx, r.Messages, r.Tools, tokenizer.RenderOptions{AddGenerationPrompt: true})
	if err != nil {
		return nil, nil, err
	}
	prompt = append(prompt, make([]int, c.extra)...)
	c.renders--
	r.GenerateRequest.PromptIDs = prompt
	g, err := c.Generate(ctx, r.GenerateRequest)
	if err != nil {
		return nil, nil, err
	}
	g.Text, g.HasText = c.tok.Decode(g.IDs), true
	if c.empty {
		g.IDs, g.Logprobs, g.Text = nil, nil, ""
	}
	return prompt, g, nil
}

// TestChatFirstTurnEmpty: a chat answer without tokens fails the rollout
// as the same answer to a completion request does (internal), not as a
// backend that is down.
func TestChatFirstTurnEmpty(t *testing.T) {
	gen := &chatScripted{scripted: &scripted{tok: simllm.NewTokenizer(), replies: []string{finish}}, empty: true}
	ep := Episode{Messages: []trajectory.Message{{Role: "user", Content: "What is 2+2?"}}, MaxTurns: 2, MaxTokensPerTurn: 64, MaxTotalTokens: 4096}
	_, err := (&Runner{Parser: toolcall.Hermes{}, Policy: func() int64 { return 0 }}).Run(context.Background(), ep, gen, "b", tokenizer.NewSplicer(), toolsFunc(finishTools))
	var ae *Error
	if !errors.As(err, &ae) || ae.Reason != trajectory.ReasonInternal || gen.chats != 1 {
		t.Fatalf("err = %v after %d chat exchanges", err, gen.chats)
	}
}

func scriptedOf(g Generator) *scripted {
	if c, ok := g.(*chatScripted); ok {
		return c.scripted
	}
	return g.(*scripted)
}

// TestChatFirstTurn: when the first turn goes in one exchange and when it
// does not (the server declines, a group shares a render, per-message
// spans are asked for), and a prompt that leaves less room than a turn.
func TestChatFirstTurn(t *testing.T) {
	ep := Episode{
		Messages: []trajectory.Message{{Role: "system", Content: "S"}, {Role: "user", Content: "What is 2+2?"}},
		Tools:    []trajectory.Tool{{Type: "function", Function: trajectory.ToolFunction{Name: "finish", Parameters: json.RawMessage(`{"type":"object"}`)}}},
		MaxTurns: 4, MaxTokensPerTurn: 512, MaxTotalTokens: 4096, Temperature: 1, TopP: 1,
	}
	long := strings.Repeat("word ", 40)
	for _, tt := range []struct {
		name    string
		mod     func(*Episode, *chatScripted, *Runner)
		reply   string
		chats   int
		renders int
		status  trajectory.Status
		finish  string
	}{
		{"alone", nil, finish, 1, 0, trajectory.StatusCompleted, "stop"},
		{"declined", func(_ *Episode, c *chatScripted, _ *Runner) { c.refuse = true }, finish, 1, 1, trajectory.StatusCompleted, "stop"},
		{"group renders once", func(e *Episode, _ *chatScripted, r *Runner) {
			e.TokenizerSource, r.Prompts = "model m", tokenizer.NewPromptCache(16)
		}, finish, 0, 1, trajectory.StatusCompleted, "stop"},
		{"message spans", func(e *Episode, _ *chatScripted, _ *Runner) { e.MessageSpans = true }, finish, 0, 2, trajectory.StatusCompleted, "stop"},
		{"prompt near the budget", func(e *Episode, _ *chatScripted, _ *Runner) { e.MaxTotalTokens = 1100 }, finish, 0, 1, trajectory.StatusCompleted, "stop"},
		// The server's prompt leaves 10 ids of room: a turn of more is cut
		// there, as a request for 10 would have ended.
		{"cut to the room left", func(e *Episode, c *chatScripted, _ *Runner) { e.MaxTotalTokens, c.extra = 2200, -10 }, long, 1, 0, trajectory.StatusTruncated, "length"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gen := &chatScripted{scripted: &scripted{tok: simllm.NewTokenizer(), replies: []string{tt.reply}}}
			e := ep
			rn := &Runner{Parser: toolcall.Hermes{}, Policy: func() int64 { return 1 }}
			if tt.mod != nil {
				tt.mod(&e, gen, rn)
			}
			prompt, _ := gen.Render(context.Background(), e.Messages, e.Tools, tokenizer.RenderOptions{AddGenerationPrompt: true})
			gen.renders = 0
			if gen.extra < 0 { // room for -extra generated ids
				gen.extra += e.MaxTotalTokens - len(prompt)
			}
			out, err := rn.Run(context.Background(), e, gen, "b", tokenizer.NewSplicer(), toolsFunc(finishTools))
			if err != nil {
				t.Fatal(err)
			}
			if gen.chats != tt.chats || gen.renders != tt.renders {
				t.Fatalf("%d chat exchanges, %d renders; want %d, %d", gen.chats, gen.renders, tt.chats, tt.renders)
			}
			if out.Status != tt.status || out.Turns[0].FinishReason != tt.finish {
				t.Fatalf("status %s, first turn's finish %s", out.Status, out.Turns[0].FinishReason)
			}
			if gen.extra == 0 && !equal(out.Turns[0].PromptDeltaIDs, prompt) {
				t.Fatal("the first turn's prompt is not the rendered one")
			}
			if tt.finish == "length" {
				tk := out.Tokens
				if len(tk.IDs) != e.MaxTotalTokens || len(out.Turns[0].ResponseIDs) != 10 || out.Messages[len(out.Messages)-1].Content != gen.tok.Decode(out.Turns[0].ResponseIDs) {
					t.Fatalf("%d ids of %d, %d generated, text %q", len(tk.IDs), e.MaxTotalTokens, len(out.Turns[0].ResponseIDs), out.Messages[len(out.Messages)-1].Content)
				}
			}
		})
	}
}

func TestPromptTooLong(t *testing.T) {
	gen := &scripted{tok: simllm.NewTokenizer(), replies: []string{finish}}
	ep := Episode{Messages: []trajectory.Message{{Role: "user", Content: strings.Repeat("x", 100)}}, MaxTurns: 2, MaxTokensPerTurn: 10, MaxTotalTokens: 20}
	_, err := (&Runner{Parser: toolcall.Hermes{}, Policy: func() int64 { return 0 }}).Run(context.Background(), ep, gen, "b", tokenizer.NewSplicer(), toolsFunc(finishTools))
	var ae *Error
	if !errors.As(err, &ae) || ae.Reason != trajectory.ReasonContextOverflow {
		t.Fatalf("err = %v", err)
	}
}

// TestToolNotOffered: a call to a tool the episode did not offer gets an
// "unknown tool" observation and never reaches the domain.
func TestToolNotOffered(t *testing.T) {
	gen := &scripted{tok: simllm.NewTokenizer(), replies: []string{think, finish}}
	ep := Episode{Messages: []trajectory.Message{{Role: "user", Content: "Q"}}, MaxTurns: 4, MaxTokensPerTurn: 512, MaxTotalTokens: 4096,
		Tools: []trajectory.Tool{{Type: "function", Function: trajectory.ToolFunction{Name: "finish", Parameters: json.RawMessage(`{"type":"object"}`)}}}}
	var dispatched []string
	tools := toolsFunc(func(name string, args json.RawMessage) (ToolResult, error) {
		dispatched = append(dispatched, name)
		return finishTools(name, args)
	})
	out, err := (&Runner{Parser: toolcall.Hermes{}, Policy: func() int64 { return 0 }}).Run(context.Background(), ep, gen, "b", tokenizer.NewSplicer(), tools)
	if err != nil {
		t.Fatal(err)
	}
	if len(dispatched) != 1 || dispatched[0] != "finish" {
		t.Fatalf("dispatched %v", dispatched)
	}
	found := false
	for _, m := range out.Messages {
		found = found || (m.Role == "tool" && strings.Contains(m.Content, `unknown tool "think"`) && strings.Contains(m.Content, "finish"))
	}
	if !found || out.Status != trajectory.StatusCompleted {
		t.Fatalf("no unknown-tool observation: %s %+v", out.Status, out.Messages)
	}
}

func TestMessageSpans(t *testing.T) {
	gen := &scripted{tok: simllm.NewTokenizer(), replies: []string{think, finish}}
	ep := Episode{Messages: []trajectory.Message{{Role: "system", Content: "S"}, {Role: "user", Content: "Q"}}, MaxTurns: 4, MaxTokensPerTurn: 512, MaxTotalTokens: 4096, MessageSpans: true}
	out, err := (&Runner{Parser: toolcall.Hermes{}, Policy: func() int64 { return 0 }}).Run(context.Background(), ep, gen, "b", tokenizer.NewSplicer(), toolsFunc(finishTools))
	if err != nil {
		t.Fatal(err)
	}
	var seq []int
	for _, m := range out.Messages {
		if m.Span == nil {
			t.Fatalf("%s message without span", m.Role)
		}
		seq = append(seq, out.Tokens.IDs[m.Span[0]:m.Span[1]]...)
	}
	if !equal(seq, out.Tokens.IDs) || out.Metrics["prompt_spans_exact"] != 1 {
		t.Fatalf("spans do not tile the sequence (%d of %d)", len(seq), len(out.Tokens.IDs))
	}
	if s := out.Messages[0].Span; s[0] != 0 || s[1] == 0 {
		t.Fatalf("system span %v", s)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHealthChecks: a model that repeats one tool call (same arguments,
// however they are spaced or ordered) is flagged a loop, and stopped when
// the strict loop detector is on; a turn that hits its token cap is
// flagged runaway generation.
func TestHealthChecks(t *testing.T) {
	loop1 := "<tool_call>\n{\"name\": \"think\", \"arguments\": {\"a\": 1, \"b\": \"x\"}}\n</tool_call>"
	loop2 := "<tool_call>\n{\"name\": \"think\", \"arguments\": {\"b\":\"x\",\"a\":1}}\n</tool_call>"
	other := "<tool_call>\n{\"name\": \"think\", \"arguments\": {\"a\": 2}}\n</tool_call>"
	tests := []struct {
		name    string
		replies []string
		strict  bool
		perTurn int
		status  trajectory.Status
		reason  string
		flags   map[string]float64
		turns   int
	}{
		{"no loop", []string{loop1, other, loop2, finish}, false, 0, trajectory.StatusCompleted, "finish", map[string]float64{}, 4},
		{"loop flagged", []string{loop1, loop2, other, loop1, finish}, false, 0, trajectory.StatusCompleted, "finish", map[string]float64{HealthLoop: 1}, 5},
		{"loop stopped", []string{loop1, loop2, loop1, finish}, true, 0, trajectory.StatusTruncated, ReasonLoop, map[string]float64{HealthLoop: 1}, 3},
		{"runaway", []string{strings.Repeat("word ", 100)}, false, 20, trajectory.StatusTruncated, "context_overflow", map[string]float64{HealthRunaway: 1}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gen := &scripted{tok: simllm.NewTokenizer(), replies: tt.replies}
			ep := Episode{
				Messages: []trajectory.Message{{Role: "user", Content: "go"}},
				Tools: []trajectory.Tool{{Type: "function", Function: trajectory.ToolFunction{Name: "finish", Parameters: json.RawMessage(`{"type":"object"}`)}},
					{Type: "function", Function: trajectory.ToolFunction{Name: "think", Parameters: json.RawMessage(`{"type":"object"}`)}}},
				MaxTurns: 8, MaxTokensPerTurn: 512, MaxTotalTokens: 4096, StrictLoopDetector: tt.strict,
			}
			if tt.perTurn > 0 {
				ep.MaxTokensPerTurn = tt.perTurn
			}
			parser, _ := toolcall.New("hermes")
			rn := &Runner{Parser: parser, Policy: func() int64 { return 0 }}
			o, err := rn.Run(context.Background(), ep, gen, "b1", tokenizer.NewSplicer(), toolsFunc(finishTools))
			if err != nil {
				t.Fatal(err)
			}
			if o.Status != tt.status || o.EndReason != tt.reason || len(o.Turns) != tt.turns {
				t.Fatalf("status %s reason %s turns %d", o.Status, o.EndReason, len(o.Turns))
			}
			for _, k := range []string{HealthLoop, HealthRunaway} {
				if o.Metrics[k] != tt.flags[k] {
					t.Errorf("%s = %v, want %v", k, o.Metrics[k], tt.flags[k])
				}
			}
		})
	}
}

func TestLoopsCount(t *testing.T) {
	type call struct {
		name, args string
		want       int
	}
	for _, tt := range []struct {
		name  string
		calls []call
	}{
		{"same call respaced and reordered", []call{{"bash", `{"a":1,"b":2}`, 1}, {"bash", `{"b":2, "a":1}`, 2}, {"bash", `{ "a": 1, "b": 2 }`, 3}}},
		{"other arguments", []call{{"bash", `{"a":1}`, 1}, {"bash", `{"a":2}`, 1}, {"bash", `{"a":1}`, 2}}},
		{"other names", []call{{"a", `{}`, 1}, {"b", `{}`, 1}, {"a", `{}`, 2}}},
		{"no arguments", []call{{"finish", "", 1}, {"finish", "", 2}, {"finish", "", 3}}},
		{"invalid JSON compared raw", []call{{"x", `{`, 1}, {"x", `{`, 2}, {"x", `{ `, 1}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var l loops
			for i, c := range tt.calls {
				var args json.RawMessage
				if c.args != "" {
					args = json.RawMessage(c.args)
				}
				if got := l.add(c.name, args); got != c.want {
					t.Errorf("call %d %s(%s): count %d, want %d", i, c.name, c.args, got, c.want)
				}
			}
		})
	}
}
