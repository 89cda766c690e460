// Package session keeps an agent harness's conversations with the policy
// token-exact: it renders each call with the model's chat template,
// generates token-in/token-out on the session's sticky backend, and keeps
// the exact tokens as traces. A call whose conversation extends a trace's
// (the harness sent back our replies unchanged) is merged into it: the new
// messages are spliced after the ids we generated, never re-tokenised.
// Package gateway serves it over the providers' HTTP APIs.
package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/agent"
	"github.com/prorl/prorl/core/engine"
	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/toolcall"
	"github.com/prorl/prorl/core/trajectory"
)

// ErrClosed is a call to a session that has ended.
var ErrClosed = errors.New("the session has ended")

// Config is what a session generates with and its budget.
type Config struct {
	ID, Key string
	// Model is the name the session's replies carry.
	Model     string
	Gen       engine.Client
	BackendID string
	Tok       tokenizer.Tokenizer
	Splicer   *tokenizer.Splicer
	Parser    toolcall.Parser
	Policy    func() int64
	// MaxCalls bounds the session's generations (its turns); a call past it
	// gets a clean stop (finish reason length) without generating.
	MaxCalls int
	// MaxConcurrent bounds the session's calls in flight, of any endpoint
	// (0: none); more are answered 429 at once, before their body is read.
	MaxConcurrent int
	// MaxRequests bounds the calls that generate nothing (token counts,
	// model lists; 0: none): rendering a long prompt costs the host CPU
	// and memory outside any sandbox, as a generation does.
	MaxRequests int
	// MaxTokensPerCall caps one generation; MaxTotalTokens one trace.
	MaxTokensPerCall, MaxTotalTokens int
	// The trainer's sampling: it wins over what a harness asks for, since
	// the trajectory must be sampled from the policy the trainer trains.
	Temperature, TopP float64
	TopK              int
	Seed              *int64
	Stop              []string
	TemplateKwargs    map[string]any
	// Log gets a debug line for each call that starts a trace while others
	// exist, saying where its conversation left theirs (nil: none).
	Log hclog.Logger
}

// Call is one request of a harness, in the provider-neutral form.
type Call struct {
	Messages []trajectory.Message
	Tools    []trajectory.Tool
	// MaxTokens is the harness's own cap (0: none); the session's applies too.
	MaxTokens int
	Stop      []string
}

// Reply is the generated assistant message.
type Reply struct {
	ID      string
	Message trajectory.Message
	// FinishReason is stop, tool_calls or length.
	FinishReason     string
	PromptTokens     int
	CompletionTokens int
	// Merged says the call extended a trace.
	Merged bool
}

// trace is one growing token sequence: the first call's prompt, then every
// generation (mask 1) and spliced observation (mask 0) of the calls merged
// into it.
type trace struct {
	msgs     []trajectory.Message // the conversation so far, our last reply last
	prompt   []trajectory.Message // the first call's messages
	tools    []trajectory.Tool
	toolsKey string
	tk       trajectory.Tokens
	// open: the last generation ended on a token the template can continue
	// after (not cut by max_tokens).
	open   bool
	busy   bool
	calls  int
	finish string
}

// Session is one harness's conversation(s) with the policy.
type Session struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{}

	mu       sync.Mutex
	closed   bool
	calls    int // generations started
	merged   int
	refused  int // calls answered with a clean stop for the budget
	inflight int // calls being served (admit)
	aux      int // calls that generate nothing, admitted
	traces   []*trace
	turns    []trajectory.Turn
	lastText string
}

// NewSession starts a session.
func NewSession(cfg Config) *Session {
	ctx, cancel := context.WithCancel(context.Background())
	if cfg.Policy == nil {
		cfg.Policy = func() int64 { return 0 }
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	return &Session{cfg: cfg, ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// ID is the session's id.
func (s *Session) ID() string { return s.cfg.ID }

// Key is the session's API key.
func (s *Session) Key() string { return s.cfg.Key }

// Model is the model name the session answers with.
func (s *Session) Model() string { return s.cfg.Model }

// Done is closed when the session is closed.
func (s *Session) Done() <-chan struct{} { return s.done }

// Close ends the session: later calls get ErrClosed, calls in flight are
// cancelled and not recorded. It returns once none is in flight.
func (s *Session) Close() {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if already {
		return
	}
	s.cancel()
	s.wg.Wait()
	close(s.done)
}

// Kind is what a call makes the host do.
type Kind int

const (
	Generate Kind = iota // a completion: the turn budget bounds it
	Count                // renders a prompt, generates nothing
	Meta                 // answers from the session's own state
)

// Refusal is a call the session will not take now, as a provider says it:
// too many at once is a rate limit (retry shortly); the session's budget
// spent is a quota (do not retry); an ended session is not found.
type Refusal struct {
	Reason     Reason
	RetryAfter int // seconds, when positive
	Msg        string
}

// Reason is why a call was refused.
type Reason int

const (
	Ended Reason = iota
	RateLimited
	OverQuota
)

func (r *Refusal) Error() string { return r.Msg }

// Admit takes a place for one call of the session, before its body is
// read, or refuses it when the session is over a bound. A completion past
// the turn budget is admitted: it gets a clean stop, as before.
func (s *Session) Admit(kind Kind) (release func(), refused *Refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, &Refusal{Reason: Ended, Msg: "the session has ended"}
	case s.cfg.MaxConcurrent > 0 && s.inflight >= s.cfg.MaxConcurrent:
		return nil, &Refusal{Reason: RateLimited, RetryAfter: 1,
			Msg: fmt.Sprintf("this session already has %d requests in flight; retry when one has finished", s.inflight)}
	case kind == Count && s.cfg.MaxCalls > 0 && s.calls >= s.cfg.MaxCalls:
		return nil, &Refusal{Reason: OverQuota, Msg: fmt.Sprintf("this session's budget of %d turns is spent", s.cfg.MaxCalls)}
	case kind != Generate && s.cfg.MaxRequests > 0 && s.aux >= s.cfg.MaxRequests:
		return nil, &Refusal{Reason: OverQuota, Msg: fmt.Sprintf("this session's budget of %d requests that generate nothing is spent", s.cfg.MaxRequests)}
	}
	if kind != Generate {
		s.aux++
	}
	s.inflight++
	return func() {
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}, nil
}

// Count renders a call's prompt and returns its token count (for the
// providers' token-counting endpoints); it generates nothing.
func (s *Session) Count(ctx context.Context, c Call) (int, error) {
	ids, err := s.cfg.Tok.Render(ctx, c.Messages, c.Tools, tokenizer.RenderOptions{AddGenerationPrompt: true, Kwargs: s.cfg.TemplateKwargs})
	if err != nil {
		return 0, err
	}
	return len(ids), nil
}

// Complete answers one call: merge or start a trace, generate, parse the
// tool calls, record.
func (s *Session) Complete(ctx context.Context, c Call) (*Reply, error) {
	start := time.Now()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if s.cfg.MaxCalls > 0 && s.calls >= s.cfg.MaxCalls {
		s.refused++
		s.mu.Unlock()
		return s.stopReply(), nil
	}
	s.calls++
	s.wg.Add(1)
	tk := toolsKey(c.Tools)
	t, suffix := s.matchLocked(c.Messages, tk)
	if t != nil {
		t.busy = true
	} else if len(s.traces) > 0 && s.cfg.Log.IsDebug() {
		s.cfg.Log.Debug("call starts a new trace", "session", s.cfg.ID, "why", s.whyNotLocked(c.Messages, tk))
	}
	s.mu.Unlock()
	defer s.wg.Done()
	ctx, cancel := mergeCancel(ctx, s.ctx)
	defer cancel()

	prompt, delta, t, err := s.prompt(ctx, c, t, suffix)
	if err != nil {
		s.uncount()
		return nil, err
	}
	merged := t != nil
	release := func() {
		if t != nil {
			s.mu.Lock()
			t.busy = false
			s.mu.Unlock()
		}
	}
	maxNew := s.cfg.MaxTotalTokens - len(prompt)
	if s.cfg.MaxTokensPerCall > 0 {
		maxNew = min(maxNew, s.cfg.MaxTokensPerCall)
	}
	if c.MaxTokens > 0 {
		maxNew = min(maxNew, c.MaxTokens)
	}
	if maxNew <= 0 {
		// The trace is full: a clean stop, nothing generated, the trajectory kept.
		release()
		s.mu.Lock()
		s.calls--
		s.refused++
		s.mu.Unlock()
		r := s.stopReply()
		r.PromptTokens = len(prompt)
		return r, nil
	}
	g, backends, genDur, err := agent.Generate(ctx, s.cfg.Gen, engine.GenerateRequest{PromptIDs: prompt, MaxTokens: maxNew, Temperature: s.cfg.Temperature,
		TopP: s.cfg.TopP, TopK: s.cfg.TopK, Seed: s.cfg.Seed, Stop: append(slices.Clip(s.cfg.Stop), c.Stop...)})
	if err != nil {
		release()
		s.uncount()
		if s.ctx.Err() != nil {
			return nil, ErrClosed
		}
		return nil, &BackendError{Err: err}
	}
	reply := &Reply{ID: NewID(), PromptTokens: len(prompt), CompletionTokens: len(g.IDs), Merged: merged, FinishReason: "stop"}
	rep, err := agent.Decode(ctx, s.cfg.Tok, agent.ParserFor(s.cfg.Parser, c.Tools), g, reply.ID)
	if err != nil {
		release()
		s.uncount()
		return nil, &BackendError{Err: fmt.Errorf("decode: %w", err)}
	}
	am := rep.Message
	if len(rep.Parsed.Errors) > 0 && len(rep.Parsed.Calls) == 0 {
		// A malformed call is the model's text: the harness sees it as such
		// (and usually tells the model), as with any API that cannot parse it.
		am.Content = toolcall.TrimEnd(rep.Text)
		am.ReasoningContent = ""
	}
	switch {
	case g.FinishReason == "length":
		reply.FinishReason = "length"
	case len(am.ToolCalls) > 0:
		reply.FinishReason = "tool_calls"
	}
	reply.Message = am
	reply.Message.ToolCalls = slices.Clone(am.ToolCalls) // the caller's copy: the trace keeps its own

	return s.record(c, t, tk, prompt, delta, g, backends, am, reply, start, genDur)
}

// prompt is a call's prompt: the trace t's tokens and the spliced suffix
// of messages when it continues t, else the messages rendered afresh (t
// is then nil, released if the splice failed).
func (s *Session) prompt(ctx context.Context, c Call, t *trace, suffix []trajectory.Message) (prompt, delta []int, _ *trace, _ error) {
	if t != nil {
		d, err := s.cfg.Splicer.Delta(ctx, s.cfg.Tok, t.tk.IDs[len(t.tk.IDs)-1], suffix, c.Tools, s.cfg.TemplateKwargs)
		if err == nil {
			return append(slices.Clip(t.tk.IDs), d...), d, t, nil
		}
		// Not append-only here (or no stop token to continue after):
		// this call starts a trace of its own.
		s.cfg.Log.Debug("call starts a new trace: the splice failed", "session", s.cfg.ID, "error", err)
		s.mu.Lock()
		t.busy = false
		s.mu.Unlock()
	}
	ids, err := s.cfg.Tok.Render(ctx, c.Messages, c.Tools, tokenizer.RenderOptions{AddGenerationPrompt: true, Kwargs: s.cfg.TemplateKwargs})
	if err != nil {
		return nil, nil, nil, &RequestError{Field: "messages", Err: fmt.Errorf("render the chat template: %w", err)}
	}
	return ids, ids, nil, nil
}

// record keeps a generated call in its trace (t, or a new one) and the
// session's turns.
func (s *Session) record(c Call, t *trace, tk string, prompt, delta []int, g *engine.GenerateResult, backends []string, am trajectory.Message, reply *Reply,
	start time.Time, genDur time.Duration) (*Reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.calls--
		return nil, ErrClosed
	}
	idx := -1
	if t == nil {
		t = &trace{prompt: slices.Clone(c.Messages), tools: c.Tools, toolsKey: tk, tk: trajectory.Tokens{PromptLen: len(prompt)}}
		agent.AppendUnscored(&t.tk, prompt)
		s.traces = append(s.traces, t)
		idx = len(s.traces) - 1
	} else {
		s.merged++
		idx = slices.Index(s.traces, t)
		agent.AppendUnscored(&t.tk, delta)
	}
	am.Span = agent.AppendGenerated(&t.tk, g)
	t.msgs = append(slices.Clone(c.Messages), am)
	t.open = g.FinishReason != "length"
	t.busy = false
	t.calls++
	t.finish = reply.FinishReason
	turn := trajectory.Turn{Index: len(s.turns), Trace: idx, PromptDeltaIDs: delta, Backend: s.cfg.BackendID, ToolCalls: len(am.ToolCalls),
		GenerateMS: ms(genDur), OverheadMS: ms(time.Since(start) - genDur)}
	agent.Record(&turn, g, backends, s.cfg.Policy())
	s.turns = append(s.turns, turn)
	s.lastText = am.Content
	return reply, nil
}

func (s *Session) uncount() {
	s.mu.Lock()
	s.calls--
	s.mu.Unlock()
}

// stopReply is the clean stop a call over the budget gets.
func (s *Session) stopReply() *Reply {
	return &Reply{ID: NewID(), Message: trajectory.Message{Role: "assistant"}, FinishReason: "length"}
}

// matchLocked finds the open trace whose conversation the call extends and
// returns it with the call's new messages.
func (s *Session) matchLocked(msgs []trajectory.Message, tk string) (*trace, []trajectory.Message) {
	for i := len(s.traces) - 1; i >= 0; i-- {
		t := s.traces[i]
		if t.busy || !t.open || t.toolsKey != tk || len(msgs) <= len(t.msgs) {
			continue
		}
		same := true
		for j, m := range t.msgs {
			if !sameMessage(m, msgs[j]) {
				same = false
				break
			}
		}
		if same {
			return t, msgs[len(t.msgs):]
		}
	}
	return nil, nil
}

// whyNotLocked says where a call's conversation leaves the last trace's.
func (s *Session) whyNotLocked(msgs []trajectory.Message, tk string) string {
	t := s.traces[len(s.traces)-1]
	switch {
	case t.busy:
		return "the last trace is generating"
	case !t.open:
		return "the last trace ended at max_tokens"
	case t.toolsKey != tk:
		return "other tools"
	case len(msgs) <= len(t.msgs):
		return fmt.Sprintf("%d messages, the trace has %d", len(msgs), len(t.msgs))
	}
	for j, m := range t.msgs {
		if !sameMessage(m, msgs[j]) {
			return fmt.Sprintf("message %d (%s) differs: kept %.200q, got %.200q", j, m.Role, describe(m), describe(msgs[j]))
		}
	}
	return "the splice failed"
}

func describe(m trajectory.Message) string {
	d := m.Role + ":" + m.Content
	for _, c := range m.ToolCalls {
		d += " +" + c.Function.Name + c.Function.Arguments
	}
	return d
}

// sameMessage reports whether a message the harness sent back is the one
// kept. An assistant message is compared by what the model wrote (text and
// calls, arguments as JSON values): harnesses drop reasoning, re-serialise
// arguments and renumber call ids without changing what the tokens were.
func sameMessage(kept, got trajectory.Message) bool {
	if kept.Role != got.Role || kept.Content != got.Content {
		return false
	}
	if kept.Role != "assistant" {
		return kept.Name == got.Name && kept.ToolCallID == got.ToolCallID
	}
	if len(kept.ToolCalls) != len(got.ToolCalls) {
		return false
	}
	for i, k := range kept.ToolCalls {
		g := got.ToolCalls[i]
		if k.Function.Name != g.Function.Name || !sameJSON(k.Function.Arguments, g.Function.Arguments) {
			return false
		}
	}
	return true
}

func sameJSON(a, b string) bool {
	if a == b {
		return true
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func toolsKey(tools []trajectory.Tool) string {
	if len(tools) == 0 {
		return ""
	}
	b, _ := json.Marshal(tools)
	return string(b)
}

// Outcome is what the session produced: its traces, every call as a turn,
// and the merge figures.
type Outcome struct {
	Traces []trajectory.Trace
	Turns  []trajectory.Turn
	// Last is the last trace's conversation (our reply last) and its text.
	Messages  []trajectory.Message
	Tools     []trajectory.Tool
	Tokens    trajectory.Tokens
	FinalText string
	Metrics   map[string]float64
}

// Outcome snapshots the session (call it after Close for the final one).
func (s *Session) Outcome() *Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := &Outcome{Turns: slices.Clone(s.turns), Traces: make([]trajectory.Trace, 0, len(s.traces)), FinalText: s.lastText,
		Messages: []trajectory.Message{}, Tools: []trajectory.Tool{}}
	for _, t := range s.traces {
		o.Traces = append(o.Traces, trajectory.Trace{
			PromptIDs: t.tk.IDs[:t.tk.PromptLen], ResponseIDs: t.tk.IDs[t.tk.PromptLen:], LossMask: t.tk.LossMask[t.tk.PromptLen:],
			ResponseLogprobs: t.tk.Logprobs[t.tk.PromptLen:], PromptMessages: t.prompt, ResponseMessages: t.msgs[len(t.prompt):],
			Tools: t.tools, FinishReason: t.finish, Calls: t.calls,
		})
	}
	if n := len(s.traces); n > 0 {
		t := s.traces[n-1]
		o.Messages, o.Tools = t.msgs, t.tools
		o.Tokens = t.tk
	}
	calls := len(s.turns)
	o.Metrics = map[string]float64{"gateway_calls": float64(calls), "gateway_traces": float64(len(s.traces)),
		"gateway_merged_calls": float64(s.merged), "gateway_budget_stops": float64(s.refused)}
	if calls > 1 {
		o.Metrics["gateway_merge_rate"] = float64(s.merged) / float64(calls-1)
	}
	return o
}

// mergeCancel is ctx, also cancelled when other ends.
func mergeCancel(ctx, other context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(other, cancel)
	return c, func() { stop(); cancel() }
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// RequestError is a call the gateway cannot serve as asked: a 400 naming
// the field in the provider's error shape.
type RequestError struct {
	Field string
	Err   error
}

func (e *RequestError) Error() string { return e.Err.Error() }
func (e *RequestError) Unwrap() error { return e.Err }

// BackendError is a generation that failed on the backend: a 502/503.
type BackendError struct{ Err error }

func (e *BackendError) Error() string { return "generation failed: " + e.Err.Error() }
func (e *BackendError) Unwrap() error { return e.Err }
