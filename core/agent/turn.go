package agent

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/prorl/prorl/core/engine"
	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/toolcall"
	"github.com/prorl/prorl/core/trajectory"
)

// The turn both engines take — the native loop (Runner.Run) and the
// gateway's Session.Complete: generate from the prompt's tokens (Generate),
// decode and parse the reply into an assistant message (Reply), keep its
// tokens scored and the observations' unscored (AppendGenerated,
// AppendUnscored), and record the turn (Record). The loop around them
// differs: the native loop calls the tools itself and splices their
// observations; a gateway session answers the harness, which does.

// ErrNoTokens is a generation that returned nothing.
var ErrNoTokens = errors.New("the backend returned no tokens")

// Generate runs one generation and says which backends served it (none
// when gen cannot move a rollout, or did not: the one asked).
func Generate(ctx context.Context, gen Generator, req engine.GenerateRequest) (g *engine.GenerateResult, backends []string, dur time.Duration, err error) {
	g0 := time.Now()
	g, err = gen.Generate(ctx, req)
	dur = time.Since(g0)
	if tb, ok := gen.(TurnBackends); ok {
		backends = tb.TakeTurnBackends()
	}
	if err == nil && len(g.IDs) == 0 {
		err = ErrNoTokens
	}
	return g, backends, dur, err
}

// Reply is a generation decoded and parsed.
type Reply struct {
	Text    string
	Parsed  toolcall.Parsed
	Message trajectory.Message // the assistant message, its calls named call_<prefix>_<j>; no span yet
}

// Decode is g's reply: its text (the backend's, or decoded) parsed for
// tool calls by parser.
func Decode(ctx context.Context, tok tokenizer.Tokenizer, parser toolcall.Parser, g *engine.GenerateResult, prefix string) (Reply, error) {
	text, err := Text(ctx, tok, g)
	if err != nil {
		return Reply{}, err
	}
	return Parse(parser, text, prefix), nil
}

// Parse is a reply's text parsed for tool calls by parser.
func Parse(parser toolcall.Parser, text, prefix string) Reply {
	parsed := parser.Parse(text)
	return Reply{Text: text, Parsed: parsed, Message: trajectory.Message{Role: "assistant", Content: parsed.Content,
		ReasoningContent: parsed.Reasoning, ToolCalls: ToolCalls(parsed, prefix)}}
}

// AppendGenerated keeps a generation's tokens, scored, and returns their
// span. A backend that gave no logprobs leaves zeros.
func AppendGenerated(tk *trajectory.Tokens, g *engine.GenerateResult) *[2]int {
	start := len(tk.IDs)
	tk.IDs = append(tk.IDs, g.IDs...)
	for range g.IDs {
		tk.LossMask = append(tk.LossMask, 1)
	}
	if len(g.Logprobs) == len(g.IDs) {
		tk.Logprobs = append(tk.Logprobs, g.Logprobs...)
	} else {
		tk.Logprobs = append(tk.Logprobs, make([]float64, len(g.IDs))...)
	}
	return &[2]int{start, len(tk.IDs)}
}

// AppendUnscored keeps tokens no model generated (a prompt's, the
// observations'): masked out of the loss, logprob 0.
func AppendUnscored(tk *trajectory.Tokens, ids []int) {
	tk.IDs = append(tk.IDs, ids...)
	tk.LossMask = append(tk.LossMask, make([]int8, len(ids))...)
	tk.Logprobs = append(tk.Logprobs, make([]float64, len(ids))...)
}

// Record fills a turn's record from its generation: the tokens (and the
// logprobs the backend gave), the
// policy versions that produced them (def when the backend names none),
// and the backends that served it (the last one finished it).
func Record(turn *trajectory.Turn, g *engine.GenerateResult, backends []string, def int64) {
	// Logprobs as the backend gave them: a generation without them shows
	// (the result is then mask_sample), while the sequence's are zeros.
	turn.ResponseIDs, turn.Logprobs, turn.FinishReason = g.IDs, g.Logprobs, g.FinishReason
	turn.PolicyVersion, turn.PolicySpans = g.PolicySpans(def)
	if len(backends) > 0 {
		turn.Backend = backends[len(backends)-1]
		if len(backends) > 1 {
			turn.Backends = backends
		}
	}
}

// ParserFor is p knowing the tools' schemas (formats whose argument values
// are untyped text need them).
func ParserFor(p toolcall.Parser, tools []trajectory.Tool) toolcall.Parser {
	if len(tools) == 0 {
		return p
	}
	schemas := make([]toolcall.ToolSchema, len(tools))
	for i, t := range tools {
		schemas[i] = toolcall.ToolSchema{Name: t.Function.Name, Parameters: t.Function.Parameters}
	}
	return toolcall.ForTools(p, schemas)
}

// Text is a generation's text: the backend's, or decoded from its ids.
func Text(ctx context.Context, tok tokenizer.Tokenizer, g *engine.GenerateResult) (string, error) {
	if g.HasText {
		return g.Text, nil
	}
	return tok.Decode(ctx, g.IDs)
}

// ToolCalls are a parse's calls as chat messages carry them, with ids
// call_<prefix>_<j>.
func ToolCalls(parsed toolcall.Parsed, prefix string) []trajectory.ToolCall {
	var out []trajectory.ToolCall
	for j, c := range parsed.Calls {
		out = append(out, trajectory.ToolCall{ID: "call_" + prefix + "_" + strconv.Itoa(j), Type: "function",
			Function: trajectory.FunctionCall{Name: c.Name, Arguments: string(c.Arguments)}})
	}
	return out
}
