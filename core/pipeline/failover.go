package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/engine"
	"github.com/prorl/prorl/core/policy"
	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/trajectory"
)

// maxFailovers bounds how many backends one rollout may move through.
const maxFailovers = 3

// failover is a rollout's backend: its lease, retried on the same backend
// first; when that backend still fails, it leaves the heap (its health
// check brings it back) and the rollout moves to another healthy backend
// with the same prompt, so the tokens are unchanged.
type failover struct {
	p     *Pipeline
	r     *Rollout
	mu    sync.Mutex
	lease *backend.Lease
	moves int
	turn  []string // backends that served the current generation
	// prompt is the rollout's first prompt (zero before its first
	// generation); prompted, the lease told of it (the pool counts a
	// prompt shared by a group once: prefix.go).
	prompt   backend.Prompt
	prompted *backend.Lease
}

func (f *failover) retrying(b *backend.Backend) engine.Client {
	return &engine.Retrying{Client: b.Client, Attempts: 4, Backoff: 100 * time.Millisecond, OnRetry: func(err error) {
		f.p.d.Log.Warn("generation failed; retrying on the same backend", "rollout", f.r.ID, "backend", b.ID, "error", err)
	}}
}

// hintOf is what the pool's routing knows of the rollout.
func hintOf(r *Rollout) backend.Hint {
	return backend.Hint{Key: r.ID, Group: r.Req.GroupID, GroupSize: r.Req.GroupSize, Cost: float64(r.Req.Expected())}
}

// do runs call against the current backend, moving to another on a
// retriable failure. A generation of tokens context (>= 0) passes the
// pool's admission; other calls (rendering, decoding) take no engine slot.
func (f *failover) do(ctx context.Context, tokens int, call func(b *backend.Backend, c engine.Client) error) error {
	for {
		f.mu.Lock()
		l, moves := f.lease, f.moves
		prompt, tell := f.prompt, f.prompt != (backend.Prompt{}) && f.prompted != l
		if tell {
			f.prompted = l
		}
		f.mu.Unlock()
		if tell {
			l.SetPrompt(prompt)
		}
		// The lease's backend, unless the routing picks per request; with
		// admission it waits for a slot (a rollout of higher priority first).
		var b *backend.Backend
		var done func()
		if tokens < 0 {
			b, done = l.RouteNow()
		} else {
			var err error
			if b, done, err = l.RouteWait(ctx, -f.r.Req.Priority, tokens); err != nil {
				return err
			}
		}
		f.mu.Lock()
		f.turn = append(f.turn, b.ID)
		f.mu.Unlock()
		if cur := l.Current(); cur == b { // a sticky lease: it may have been moved (rebalancing)
			f.r.mu.Lock()
			f.r.backendID = cur.ID
			f.r.mu.Unlock()
		}
		err := call(b, f.retrying(b))
		done()
		if err == nil || errors.Is(err, policy.ErrCut) || !engine.Retriable(err) || ctx.Err() != nil || moves >= maxFailovers {
			return err
		}
		f.p.d.Pool.SetHealth(b.ID, err)
		next, aerr := f.p.d.Pool.AcquireFor(ctx, f.p.d.Cfg.Backends.WaitForBackend.Duration, hintOf(f.r))
		if aerr != nil {
			return err
		}
		f.p.d.Log.Warn("backend keeps failing; rollout moves to another", "rollout", f.r.ID, "from", b.ID, "to", next.B.ID, "error", err)
		l.Release()
		f.mu.Lock()
		f.lease = next
		f.moves++
		f.mu.Unlock()
		f.r.mu.Lock()
		f.r.backendID = next.B.ID
		f.r.mu.Unlock()
	}
}

func (f *failover) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lease.Release()
}

// maxContinuations bounds how often one turn may be aborted and continued.
const maxContinuations = 64

// Generate runs one turn's generation. Each request passes the policy gate
// (held while paused); a request aborted by a pause comes back with its
// tokens so far, and the turn continues from them under the next policy;
// one cut (its backend cannot abort) generates again.
func (f *failover) Generate(ctx context.Context, req engine.GenerateRequest) (*engine.GenerateResult, error) {
	f.mu.Lock()
	f.turn = f.turn[:0]
	if f.prompt == (backend.Prompt{}) {
		f.prompt = backend.PromptOf(req.PromptIDs)
	}
	f.mu.Unlock()
	return f.generate(ctx, req, nil)
}

// generate makes requests until one ends without an abort, each adding
// its tokens to out (nil: the turn's first).
func (f *failover) generate(ctx context.Context, req engine.GenerateRequest, out *engine.GenerateResult) (*engine.GenerateResult, error) {
	for n := 0; ; n++ {
		if n > maxContinuations {
			return nil, fmt.Errorf("the generation was aborted %d times", maxContinuations)
		}
		var res *engine.GenerateResult
		var version int64
		err := f.do(ctx, len(req.PromptIDs), func(b *backend.Backend, c engine.Client) error {
			gctx, v, slot, err := f.p.gate.Enter(ctx, b.ID)
			if err != nil {
				return err
			}
			version = v
			res, err = c.Generate(gctx, req)
			if f.p.gate.Leave(slot) && ctx.Err() == nil {
				return policy.ErrCut
			}
			return err
		})
		if errors.Is(err, policy.ErrCut) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var more bool
		if out, more = f.continues(out, res, version, &req); !more {
			return out, nil
		}
	}
}

// continues adds res to out and says whether the turn goes on: an abort
// with room left continues from the tokens kept, with req changed to ask
// for the rest.
func (f *failover) continues(out, res *engine.GenerateResult, version int64, req *engine.GenerateRequest) (*engine.GenerateResult, bool) {
	out = appendSegment(out, res, version)
	if res.FinishReason != engine.FinishAbort {
		return out, false
	}
	f.p.gate.CountAbort()
	if req.MaxTokens -= len(res.IDs); req.MaxTokens <= 0 {
		out.FinishReason = "length"
		return out, false
	}
	req.PromptIDs = append(slices.Clip(req.PromptIDs), res.IDs...)
	return out, true
}

// GenerateChat renders and generates a rollout's first turn in one
// exchange (engine.ChatGenerator). An abort continues through Generate's
// path from the prompt the server rendered; a cut, or a backend that
// cannot, answers engine.ErrNoChat and the caller renders apart.
func (f *failover) GenerateChat(ctx context.Context, cr engine.ChatRequest) ([]int, *engine.GenerateResult, error) {
	f.mu.Lock()
	f.turn = f.turn[:0]
	f.mu.Unlock()
	var prompt []int
	var res *engine.GenerateResult
	var version int64
	err := f.do(ctx, cr.PromptEstimate, func(b *backend.Backend, c engine.Client) error {
		cg, ok := c.(engine.ChatGenerator)
		if !ok {
			return engine.ErrNoChat
		}
		gctx, v, slot, err := f.p.gate.Enter(ctx, b.ID)
		if err != nil {
			return err
		}
		version = v
		prompt, res, err = cg.GenerateChat(gctx, cr)
		if f.p.gate.Leave(slot) && ctx.Err() == nil {
			return policy.ErrCut
		}
		return err
	})
	if errors.Is(err, policy.ErrCut) {
		return nil, nil, fmt.Errorf("%w: the generation was cut", engine.ErrNoChat)
	}
	if err != nil {
		return nil, nil, err
	}
	f.mu.Lock()
	if f.prompt == (backend.Prompt{}) {
		f.prompt = backend.PromptOf(prompt)
	}
	f.mu.Unlock()
	req := cr.GenerateRequest
	req.PromptIDs = prompt
	out, more := f.continues(nil, res, version, &req)
	if more {
		out, err = f.generate(ctx, req, out)
	}
	return prompt, out, err
}

// appendSegment adds one request's tokens to a turn's generation.
func appendSegment(out, res *engine.GenerateResult, version int64) *engine.GenerateResult {
	if out == nil {
		r := *res
		if len(res.IDs) > 0 {
			r.Segments = []engine.Segment{{Tokens: len(res.IDs), Policy: version}}
		}
		return &r
	}
	if len(res.IDs) > 0 {
		out.IDs = append(out.IDs, res.IDs...)
		out.Logprobs = append(out.Logprobs, res.Logprobs...)
		// The text is decoded whole: a character may straddle the parts.
		out.Text, out.HasText = "", false
		out.Segments = append(out.Segments, engine.Segment{Tokens: len(res.IDs), Policy: version})
	}
	out.FinishReason = res.FinishReason
	return out
}

// TakeTurnBackends implements agent.TurnBackends.
func (f *failover) TakeTurnBackends() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := append([]string(nil), f.turn...)
	// Consecutive tries on one backend are one backend.
	dedup := out[:0]
	for _, b := range out {
		if len(dedup) == 0 || dedup[len(dedup)-1] != b {
			dedup = append(dedup, b)
		}
	}
	return dedup
}

func (f *failover) Render(ctx context.Context, msgs []trajectory.Message, tools []trajectory.Tool, opts tokenizer.RenderOptions) ([]int, error) {
	var ids []int
	err := f.do(ctx, -1, func(_ *backend.Backend, c engine.Client) (err error) {
		ids, err = c.Render(ctx, msgs, tools, opts)
		return err
	})
	return ids, err
}

func (f *failover) Decode(ctx context.Context, ids []int) (string, error) {
	var text string
	err := f.do(ctx, -1, func(_ *backend.Backend, c engine.Client) (err error) { text, err = c.Decode(ctx, ids); return err })
	return text, err
}

func (f *failover) Health(ctx context.Context) error {
	f.mu.Lock()
	l := f.lease
	f.mu.Unlock()
	return l.Current().Client.Health(ctx)
}
