// Package agent runs the multi-turn loop of one rollout: generate from token
// ids, parse tool calls, dispatch them, splice the observations' tokens. The
// sequence only ever grows: turn k+1's prompt is turn k's prompt, its
// generated ids exactly, then the newly rendered observation tokens.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prorl/prorl/core/engine"
	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/toolcall"
	"github.com/prorl/prorl/core/trajectory"
)

// Error is a failure with a reason from the vocabulary.
type Error struct {
	Reason string
	Err    error
}

func (e *Error) Error() string { return e.Reason + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func fail(reason string, format string, args ...any) *Error {
	return &Error{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// ToolResult is one tool call's outcome.
type ToolResult struct {
	Output        string
	Done          bool
	FinalResponse string
	IsError       bool
}

// Tools executes tool calls for the rollout (through its plugin). An error
// fails the rollout; it should be an *Error naming the reason.
type Tools interface {
	Call(ctx context.Context, id, name string, args json.RawMessage) (ToolResult, error)
}

// Generator is the rollout's backend: generation plus its tokenizer.
type Generator interface {
	engine.Client
}

// TurnBackends is implemented by generators that can move a rollout to
// another backend: the backends that served the last generation, in order.
type TurnBackends interface {
	TakeTurnBackends() []string
}

// Episode is what one rollout runs.
type Episode struct {
	Messages         []trajectory.Message
	Tools            []trajectory.Tool
	TemplateKwargs   map[string]any
	MaxTurns         int
	MaxTokensPerTurn int
	MaxTotalTokens   int
	Temperature      float64
	TopP             float64
	TopK             int
	Seed             *int64
	Stop             []string
	// MessageSpans computes each initial message's own token span (ProRL's
	// per-message token_ids) at the cost of one render per message.
	MessageSpans bool
	// StrictLoopDetector (ProRL's sampling flag) ends a rollout whose model
	// repeats one tool call with the same arguments LoopRepeats times; it
	// is always detected and counted (metric health_loop).
	StrictLoopDetector bool
	// TokenizerSource names what renders the prompt through the generator
	// (a backend's model) so that Runner.Prompts may cache it; "": not
	// cached (a rollout alone in its group).
	TokenizerSource string
}

// LoopRepeats is how many times one tool call with the same arguments
// makes a loop.
const LoopRepeats = 3

// Health checks a rollout's metrics carry (1 when it tripped).
const (
	HealthLoop    = "health_loop"
	HealthRunaway = "health_runaway_generation"
)

// Outcome is the trajectory so far; on error it is the partial trajectory.
type Outcome struct {
	Status        trajectory.Status
	EndReason     string
	FinalResponse string
	Failure       *trajectory.Failure
	Turns         []trajectory.Turn
	Tokens        trajectory.Tokens
	Messages      []trajectory.Message
	Metrics       map[string]float64
	// Traces are a gateway session's sequences (Tokens is the last one).
	Traces []trajectory.Trace
}

// Runner holds what is shared across rollouts.
type Runner struct {
	Parser toolcall.Parser
	// Policy returns the current policy version, stamped on every turn.
	Policy func() int64
	// Local is the Go tokenizer; nil means the backend's /tokenize.
	Local tokenizer.TextTokenizer
	// CheckTemplate renders the whole conversation after every turn and
	// records in the metrics whether it equals the tokens kept.
	CheckTemplate bool
	// Prompts caches first prompts by their whole input (a group's
	// rollouts share theirs); nil: none.
	Prompts *tokenizer.PromptCache
}

// spans gives each initial message the tokens it adds to the rendered
// prompt; the generation prompt belongs to the last one. When the template
// is not prefix-consistent, the whole prompt goes to the last message.
func (rn *Runner) spans(ctx context.Context, gen tokenizer.Tokenizer, ep Episode, prompt []int, out *Outcome) {
	n := len(ep.Messages)
	prev := 0
	for i := 1; i < n; i++ {
		ids, err := gen.Render(ctx, ep.Messages[:i], ep.Tools, tokenizer.RenderOptions{Kwargs: ep.TemplateKwargs})
		if err != nil || len(ids) < prev || len(ids) > len(prompt) || !slices.Equal(ids, prompt[:len(ids)]) {
			for j := range out.Messages[:n] {
				out.Messages[j].Span = &[2]int{0, 0}
			}
			out.Messages[n-1].Span = &[2]int{0, len(prompt)}
			out.Metrics["prompt_spans_exact"] = 0
			return
		}
		out.Messages[i-1].Span = &[2]int{prev, len(ids)}
		prev = len(ids)
	}
	out.Messages[n-1].Span = &[2]int{prev, len(prompt)}
	out.Metrics["prompt_spans_exact"] = 1
}

// checkTemplate compares the sequence with the template's rendering of the
// conversation so far.
func (rn *Runner) checkTemplate(v *tokenizer.Verifier, ids []int, out *Outcome, ep Episode, turn int) {
	off, err := v.Check(ids, out.Messages, ep.Tools, ep.TemplateKwargs)
	out.Metrics["template_checked_turns"]++
	if err != nil || off >= 0 {
		out.Metrics["template_mismatch_turns"]++
		if _, seen := out.Metrics["template_first_mismatch_turn"]; !seen {
			out.Metrics["template_first_mismatch_turn"] = float64(turn)
			out.Metrics["template_first_mismatch_byte"] = float64(off)
		}
	}
}

func backendErr(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var se *engine.StatusError
	if errors.As(err, &se) && se.Status/100 == 4 {
		// The backend refused the request itself (context length, bad ids): retrying will not help.
		if strings.Contains(se.Body, "maximum context length") {
			return &Error{Reason: trajectory.ReasonContextOverflow, Err: fmt.Errorf("%s: %w", what, err)}
		}
		return &Error{Reason: trajectory.ReasonInternal, Err: fmt.Errorf("%s: %w", what, err)}
	}
	return &Error{Reason: trajectory.ReasonBackendUnavailable, Err: fmt.Errorf("%s: %w", what, err)}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// offered reports whether the episode shows the model a tool of that name.
// With no list at all the domain itself answers unknown names.
func offered(tools []trajectory.Tool, name string) bool {
	if len(tools) == 0 {
		return true
	}
	for _, t := range tools {
		if t.Function.Name == name {
			return true
		}
	}
	return false
}

func unknownTool(name string, tools []trajectory.Tool) string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Function.Name
	}
	return fmt.Sprintf("Error: unknown tool %q. Available tools: %s.", name, strings.Join(names, ", "))
}

// ReasonLoop ends a rollout stopped by the strict loop detector.
const ReasonLoop = "loop_detected"

func (o *Outcome) metric(k string, v float64) {
	if o.Metrics == nil {
		o.Metrics = map[string]float64{}
	}
	o.Metrics[k] = v
}

// request is a turn's generation request.
func (ep *Episode) request(prompt []int, maxNew int) engine.GenerateRequest {
	return engine.GenerateRequest{
		PromptIDs: prompt, MaxTokens: maxNew, Temperature: ep.Temperature, TopP: ep.TopP, TopK: ep.TopK, Seed: ep.Seed, Stop: ep.Stop,
	}
}

// chatTurn is a first turn rendered and generated in one exchange.
type chatTurn struct {
	prompt []int
	res    *engine.GenerateResult
	err    error
}

// chatFirst renders and generates the first turn in one exchange when the
// generator can and nothing else needs the prompt first: no Go tokenizer,
// no group sharing a cached render, no per-message spans, and a prompt
// that surely leaves a whole turn's room (else a request sized to the
// room left is wanted). nil: render apart (also when the server declines).
func (rn *Runner) chatFirst(ctx context.Context, ep Episode, gen Generator) (*chatTurn, time.Duration) {
	cg, ok := gen.(engine.ChatGenerator)
	if !ok || rn.Local != nil || (rn.Prompts != nil && ep.TokenizerSource != "") || ep.MessageSpans {
		return nil, 0
	}
	bound := promptBound(ep.Messages, ep.Tools)
	if bound > ep.MaxTotalTokens-ep.MaxTokensPerTurn {
		return nil, 0
	}
	t0 := time.Now()
	prompt, res, err := cg.GenerateChat(ctx, engine.ChatRequest{Messages: ep.Messages, Tools: ep.Tools, Kwargs: ep.TemplateKwargs,
		PromptEstimate: bound / 4, GenerateRequest: ep.request(nil, ep.MaxTokensPerTurn)})
	if errors.Is(err, engine.ErrNoChat) {
		return nil, 0
	}
	if err == nil && len(res.IDs) == 0 {
		err = fail(trajectory.ReasonInternal, "backend returned no tokens")
	}
	return &chatTurn{prompt: prompt, res: res, err: err}, time.Since(t0)
}

// promptBound is more tokens than a chat template can make of messages
// and tools: a token spans at least one byte of the rendered text, tools
// render as JSON at most twice their compact size, and the template's own
// text is allowed 1024 tokens and 32 a message.
func promptBound(msgs []trajectory.Message, tools []trajectory.Tool) int {
	n := 1024
	for _, m := range msgs {
		n += 32 + len(m.Role) + len(m.Content) + len(m.ReasoningContent) + len(m.Name) + len(m.ToolCallID)
		for _, c := range m.ToolCalls {
			n += 32 + len(c.ID) + len(c.Function.Name) + 2*len(c.Function.Arguments)
		}
	}
	for _, t := range tools {
		n += 64 + len(t.Function.Name) + 2*len(t.Function.Description) + 2*len(t.Function.Parameters)
	}
	return n
}

// loops counts tool calls by name and canonical arguments. A name's first
// call is kept raw: most names are called once (a single-turn rollout's
// finish), and canonical JSON costs a decode and an encode.
type loops struct {
	first  map[string]json.RawMessage // name -> its one call so far
	counts map[string]int             // name and canonical arguments -> calls
}

// add counts a call and returns how many calls had its name and arguments.
func (l *loops) add(name string, args json.RawMessage) int {
	if args == nil {
		args = json.RawMessage{} // nil marks a first call already counted
	}
	if l.first == nil {
		l.first, l.counts = map[string]json.RawMessage{}, map[string]int{}
	}
	a, seen := l.first[name]
	if !seen {
		l.first[name] = args
		return 1
	}
	if a != nil { // the name's second call: its first is counted now
		l.counts[name+"\x00"+canonicalJSON(a)]++
		l.first[name] = nil
	}
	k := name + "\x00" + canonicalJSON(args)
	l.counts[k]++
	return l.counts[k]
}

// canonicalJSON is arguments with key order and spacing normalised, so a
// repeated call is recognised however the model wrote it.
func canonicalJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v) // maps marshal with sorted keys
	return string(b)
}
