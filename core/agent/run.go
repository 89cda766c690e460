package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/prorl/prorl/core/engine"
	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/toolcall"
	"github.com/prorl/prorl/core/trajectory"
)

// Run runs the loop until finish, a stop without tool calls, max turns, a
// token budget, or an error.
func (rn *Runner) Run(ctx context.Context, ep Episode, gen Generator, backendID string, splicer *tokenizer.Splicer, tools Tools) (*Outcome, error) {
	l := &loop{rn: rn, ep: &ep, gen: gen, tok: gen, backendID: backendID, splicer: splicer, tools: tools,
		parser: ParserFor(rn.Parser, ep.Tools), out: &Outcome{Messages: slices.Clone(ep.Messages), Metrics: map[string]float64{}}}
	if rn.Local != nil {
		l.tok = rn.Local
	}
	delta, err := l.start(ctx)
	if err != nil {
		return l.out, err
	}
	for k := 0; ; k++ {
		if delta, err = l.turn(ctx, k, delta); delta == nil {
			return l.out, err
		}
	}
}

// loop is one rollout's run: the trajectory so far and what its turns share.
type loop struct {
	rn        *Runner
	ep        *Episode
	gen       Generator
	tok       tokenizer.Tokenizer
	parser    toolcall.Parser
	backendID string
	splicer   *tokenizer.Splicer
	tools     Tools
	out       *Outcome
	check     *tokenizer.Verifier
	repeats   loops
	// first is turn 0 when the server rendered and generated it in one
	// exchange (chatFirst), which took firstDur.
	first    *chatTurn
	firstDur time.Duration
	t0       time.Time
	// tokDur is the current turn's tokenizer time so far.
	tokDur time.Duration
}

// start renders the first prompt and sizes the token arrays; it returns
// turn 0's prompt delta (the whole prompt).
func (l *loop) start(ctx context.Context) ([]int, error) {
	rn, ep, out := l.rn, l.ep, l.out
	l.t0 = time.Now()
	opts := tokenizer.RenderOptions{AddGenerationPrompt: true, Kwargs: ep.TemplateKwargs}
	var prompt []int
	var err error
	// A lone rollout's first turn may be rendered by the server in the
	// same exchange that generates it (one request instead of two).
	l.first, l.firstDur = rn.chatFirst(ctx, *ep, l.gen)
	if first := l.first; first != nil {
		prompt, err = first.prompt, first.err
	} else if source := ep.TokenizerSource; rn.Prompts != nil && source != "" {
		if rn.Local != nil {
			source = "local"
		}
		prompt, err = rn.Prompts.Render(ctx, l.tok, source, ep.Messages, ep.Tools, opts)
	} else {
		prompt, err = l.tok.Render(ctx, ep.Messages, ep.Tools, opts)
	}
	if err != nil {
		if ae := (*Error)(nil); errors.As(err, &ae) {
			return nil, err // the chat exchange's empty answer: already a reason
		}
		what := "render prompt"
		if l.first != nil {
			what = "render and generate"
		}
		return nil, backendErr(ctx, what, err)
	}
	l.tokDur = time.Since(l.t0) - l.firstDur
	if len(prompt) >= ep.MaxTotalTokens {
		out.Tokens = trajectory.Tokens{IDs: prompt, LossMask: make([]int8, len(prompt)), Logprobs: make([]float64, len(prompt)), PromptLen: len(prompt)}
		return nil, fail(trajectory.ReasonContextOverflow, "the prompt has %d tokens, max_total_tokens is %d", len(prompt), ep.MaxTotalTokens)
	}
	if ep.MessageSpans {
		tt := time.Now()
		rn.spans(ctx, l.tok, *ep, prompt, out)
		l.tokDur += time.Since(tt)
	} else if n := len(out.Messages); n > 0 {
		out.Messages[n-1].Span = &[2]int{0, len(prompt)}
	}
	tk := &out.Tokens
	tk.PromptLen = len(prompt)
	// Room for a typical turn (for the first turn's own tokens when they
	// came with the prompt: most single-turn rollouts end there, and these
	// arrays were a tenth of the bytes a rollout allocates); longer
	// rollouts grow by appending.
	room := len(prompt) + min(ep.MaxTokensPerTurn, 256)
	if l.first != nil {
		room = len(prompt) + len(l.first.res.IDs)
	}
	if l.first != nil && cap(prompt) >= room {
		tk.IDs = prompt // the exchange's own, with room for its answer (ChatGenerator)
	} else {
		tk.IDs = append(make([]int, 0, room), prompt...)
	}
	tk.LossMask = make([]int8, len(prompt), room)
	tk.Logprobs = make([]float64, len(prompt), cap(tk.IDs))
	if rn.CheckTemplate && rn.Local != nil {
		l.check = tokenizer.NewVerifier(rn.Local)
		out.Metrics["template_checked_turns"] = 0
		out.Metrics["template_mismatch_turns"] = 0
	}
	return prompt, nil
}

// end sets how the rollout ended; the loop stops.
func (l *loop) end(status trajectory.Status, reason, final string) ([]int, error) {
	l.out.Status, l.out.EndReason, l.out.FinalResponse = status, reason, final
	return nil, nil
}

// generate is turn k's generation (turn 0's may have come with the
// prompt) and the backends that served it.
func (l *loop) generate(ctx context.Context, k, maxNew int) (*engine.GenerateResult, []string, time.Duration, error) {
	if k > 0 || l.first == nil {
		return Generate(ctx, l.gen, l.ep.request(l.out.Tokens.IDs, maxNew))
	}
	// Generated with the prompt; more than the budget left is cut (what a
	// request for maxNew would have given, token for token).
	g := l.first.res
	if len(g.IDs) > maxNew {
		g.Truncate(maxNew)
	}
	var backends []string
	if tb, ok := l.gen.(TurnBackends); ok {
		backends = tb.TakeTurnBackends()
	}
	if len(g.IDs) == 0 {
		return g, backends, l.firstDur, ErrNoTokens
	}
	return g, backends, l.firstDur, nil
}

// turn runs turn k from its prompt delta: generate, parse, call the tools,
// splice the observations. It returns the next turn's delta, or nil when
// the rollout ended (with the error that ended it, if any).
func (l *loop) turn(ctx context.Context, k int, delta []int) ([]int, error) {
	ep, out, tk := l.ep, l.out, &l.out.Tokens
	turnStart := time.Now()
	if k == 0 {
		turnStart = l.t0 // turn 0 includes rendering the prompt
	}
	maxNew := min(ep.MaxTokensPerTurn, ep.MaxTotalTokens-len(tk.IDs))
	turn := trajectory.Turn{Index: k, PromptDeltaIDs: delta, Backend: l.backendID}
	policy := l.rn.Policy() // the version asked for; the backend may say which served it
	g, backends, genDur, err := l.generate(ctx, k, maxNew)
	if errors.Is(err, ErrNoTokens) {
		return nil, fail(trajectory.ReasonInternal, "backend returned no tokens")
	}
	if err != nil {
		return nil, backendErr(ctx, "generate", err)
	}
	Record(&turn, g, backends, policy)
	t1 := time.Now()
	text, err := Text(ctx, l.tok, g)
	if err != nil {
		return nil, backendErr(ctx, "decode", err)
	}
	if !g.HasText {
		l.tokDur += time.Since(t1)
	}
	rep := Parse(l.parser, text, strconv.Itoa(k))
	parsed, am := rep.Parsed, rep.Message
	am.Span = AppendGenerated(tk, g)
	out.Messages = append(out.Messages, am)
	closeTurn := func(toolsDur time.Duration) {
		turn.ToolCalls = len(parsed.Calls)
		turn.GenerateMS = ms(genDur)
		turn.ToolsMS = ms(toolsDur)
		turn.OverheadMS = ms(time.Since(turnStart) - genDur - toolsDur - l.tokDur)
		out.Turns = append(out.Turns, turn)
		l.tokDur = 0
	}
	if g.FinishReason == "length" {
		out.metric(HealthRunaway, 1)
		closeTurn(0)
		msg := fmt.Sprintf("turn %d hit max_tokens=%d", k, maxNew)
		if len(tk.IDs) >= ep.MaxTotalTokens {
			msg = fmt.Sprintf("the sequence reached max_total_tokens=%d", ep.MaxTotalTokens)
		}
		out.Failure = &trajectory.Failure{Stage: trajectory.StageRun, Reason: trajectory.ReasonContextOverflow, Message: msg}
		return l.end(trajectory.StatusTruncated, trajectory.ReasonContextOverflow, parsed.Content)
	}
	if len(parsed.Calls) == 0 && len(parsed.Errors) == 0 {
		closeTurn(0)
		return l.end(trajectory.StatusCompleted, "stop", parsed.Content)
	}
	t0 := time.Now() // the tools' time includes spotting loops, as it always has
	looped := false
	for _, c := range parsed.Calls {
		if l.repeats.add(c.Name, c.Arguments) >= LoopRepeats {
			out.metric(HealthLoop, 1)
			looped = true
		}
	}
	if looped && ep.StrictLoopDetector {
		closeTurn(0)
		out.Failure = &trajectory.Failure{Stage: trajectory.StageRun, Reason: ReasonLoop,
			Message: fmt.Sprintf("the model repeated a tool call with the same arguments %d times (strict_loop_detector)", LoopRepeats)}
		return l.end(trajectory.StatusTruncated, ReasonLoop, parsed.Content)
	}
	obs, done, final, err := l.callTools(ctx, k, parsed, am.ToolCalls)
	toolsDur := time.Since(t0)
	switch {
	case err != nil:
		closeTurn(toolsDur)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	case done:
		closeTurn(toolsDur)
		return l.end(trajectory.StatusCompleted, "finish", final)
	case k+1 >= ep.MaxTurns:
		// No model will read these observations: keep them for humans, splice nothing.
		closeTurn(toolsDur)
		out.Messages = append(out.Messages, obs...)
		out.Failure = &trajectory.Failure{Stage: trajectory.StageRun, Reason: trajectory.ReasonMaxTurns, Message: fmt.Sprintf("reached max_turns=%d without finishing", ep.MaxTurns)}
		return l.end(trajectory.StatusTruncated, trajectory.ReasonMaxTurns, "")
	}
	t2 := time.Now()
	d, err := l.splicer.Delta(ctx, l.tok, g.IDs[len(g.IDs)-1], obs, ep.Tools, ep.TemplateKwargs)
	l.tokDur += time.Since(t2)
	closeTurn(toolsDur)
	if err != nil {
		if errors.Is(err, tokenizer.ErrNotAppendOnly) {
			return nil, fail(trajectory.ReasonInternal, "%v", err)
		}
		return nil, backendErr(ctx, "render observation", err)
	}
	if len(tk.IDs)+len(d) >= ep.MaxTotalTokens {
		out.Messages = append(out.Messages, obs...) // seen by no model; kept for humans, without spans
		out.Failure = &trajectory.Failure{Stage: trajectory.StageRun, Reason: trajectory.ReasonContextOverflow,
			Message: fmt.Sprintf("the observation would take the sequence past max_total_tokens=%d", ep.MaxTotalTokens)}
		return l.end(trajectory.StatusTruncated, trajectory.ReasonContextOverflow, parsed.Content)
	}
	l.splice(k, obs, d)
	return d, nil
}

// callTools answers turn k's calls (and its unparsable ones) in order,
// until one finishes the episode.
func (l *loop) callTools(ctx context.Context, k int, parsed toolcall.Parsed, calls []trajectory.ToolCall) (obs []trajectory.Message, done bool, final string, err error) {
	for _, perr := range parsed.Errors {
		obs = append(obs, trajectory.Message{Role: "tool", Content: "Error: could not parse the tool call: " + perr.Error(), ToolCallID: fmt.Sprintf("call_%d_error", k)})
	}
	for j, c := range parsed.Calls {
		id := calls[j].ID
		if !offered(l.ep.Tools, c.Name) {
			// A tool the episode did not offer is never dispatched: the
			// domain may have it, but not for this rollout (math with
			// python off has no sandbox to run it in).
			obs = append(obs, trajectory.Message{Role: "tool", Content: unknownTool(c.Name, l.ep.Tools), ToolCallID: id, Name: c.Name})
			continue
		}
		r, err := l.tools.Call(ctx, id, c.Name, c.Arguments)
		if err != nil {
			return obs, false, "", err
		}
		if r.Done {
			return obs, true, r.FinalResponse, nil
		}
		obs = append(obs, trajectory.Message{Role: "tool", Content: r.Output, ToolCallID: id, Name: c.Name})
	}
	return obs, false, "", nil
}

// splice appends turn k's observations and their tokens d (unscored).
func (l *loop) splice(k int, obs []trajectory.Message, d []int) {
	out, tk := l.out, &l.out.Tokens
	// The whole delta (bridge + observations + generation prompt) is the
	// first observation's span; later ones of the same turn get empty spans.
	for i := range obs {
		s := len(tk.IDs)
		if i == 0 {
			obs[i].Span = &[2]int{s, s + len(d)}
		} else {
			obs[i].Span = &[2]int{s + len(d), s + len(d)}
		}
	}
	out.Messages = append(out.Messages, obs...)
	AppendUnscored(tk, d)
	if l.check != nil {
		tc := time.Now()
		l.rn.checkTemplate(l.check, tk.IDs, out, *l.ep, k)
		l.tokDur += time.Since(tc)
	}
}
