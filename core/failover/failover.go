// Package failover is a rollout's inference backend: its lease on the
// heap, a failing request retried on the same backend first; when that
// backend still fails, it leaves the heap (its health check brings it
// back) and the rollout moves to another healthy backend with the same
// prompt, so the tokens are unchanged. Every generation passes the policy
// gate; one aborted by a pause continues under the next policy.
package failover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/engine"
	"github.com/prorl/prorl/core/policy"
	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/trajectory"
)

// New is r's backend, starting on lease l.
func New(d Deps, r Rollout, l *backend.Lease) *Backend {
	if r.OnBackend == nil {
		r.OnBackend = func(string) {}
	}
	if r.OnGenerate == nil {
		r.OnGenerate = func(int64) {}
	}
	return &Backend{d: d, r: r, lease: l}
}

// Lease is the rollout's lease now.
func (f *Backend) Lease() *backend.Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lease
}

// maxFailovers bounds how many backends one rollout may move through.
const maxFailovers = 3

// Deps are what a rollout's backend uses of the host.
type Deps struct {
	Pool *backend.Pool
	Gate *policy.Gate
	Log  hclog.Logger
	// Wait is how long a move waits for another healthy backend.
	Wait time.Duration
	// SaltPerPolicy salts each generation's prefix cache with its policy
	// version (engine.GenerateRequest.CacheSalt).
	SaltPerPolicy bool
}

// saltOf is the cache salt of a generation under policy version v.
func (d *Deps) saltOf(v int64) string {
	if !d.SaltPerPolicy {
		return ""
	}
	return "prorl-policy-" + strconv.FormatInt(v, 10)
}

// Rollout is what the backend knows of its rollout.
type Rollout struct {
	ID       string
	Hint     backend.Hint
	Priority int
	// OnBackend, when set, is told the backend that serves the rollout
	// whenever it changes.
	OnBackend func(id string)
	// OnGenerate, when set, is told the policy version of every
	// generation request as it passes the gate.
	OnGenerate func(version int64)
}

// Backend is a rollout's backend (agent.Generator, engine.ChatGenerator,
// tokenizer.Tokenizer, agent.TurnBackends).
type Backend struct {
	d     Deps
	r     Rollout
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

func (f *Backend) retrying(b *backend.Backend) engine.Client {
	return &engine.Retrying{Client: b.Client, Attempts: 4, Backoff: 100 * time.Millisecond, OnRetry: func(err error) {
		f.d.Log.Warn("generation failed; retrying on the same backend", "rollout", f.r.ID, "backend", b.ID, "error", err)
	}}
}

// do runs call against the current backend, moving to another on a
// retriable failure. A generation of tokens context (>= 0) passes the
// pool's admission; other calls (rendering, decoding) take no engine slot.
func (f *Backend) do(ctx context.Context, tokens int, call func(b *backend.Backend, c engine.Client) error) error {
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
			if b, done, err = l.RouteWait(ctx, -f.r.Priority, tokens); err != nil {
				return err
			}
		}
		f.mu.Lock()
		f.turn = append(f.turn, b.ID)
		f.mu.Unlock()
		if cur := l.Current(); cur == b { // a sticky lease: it may have been moved (rebalancing)
			f.r.OnBackend(cur.ID)
		}
		err := call(b, f.retrying(b))
		done()
		if err == nil || errors.Is(err, policy.ErrCut) || !engine.Retriable(err) || ctx.Err() != nil || moves >= maxFailovers {
			return err
		}
		f.d.Pool.SetHealth(b.ID, err)
		next, aerr := f.d.Pool.AcquireFor(ctx, f.d.Wait, f.r.Hint)
		if aerr != nil {
			return err
		}
		f.d.Log.Warn("backend keeps failing; rollout moves to another", "rollout", f.r.ID, "from", b.ID, "to", next.B.ID, "error", err)
		l.Release()
		f.mu.Lock()
		f.lease = next
		f.moves++
		f.mu.Unlock()
		f.r.OnBackend(next.B.ID)
	}
}

// Release gives the lease back.
func (f *Backend) Release() {
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
func (f *Backend) Generate(ctx context.Context, req engine.GenerateRequest) (*engine.GenerateResult, error) {
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
func (f *Backend) generate(ctx context.Context, req engine.GenerateRequest, out *engine.GenerateResult) (*engine.GenerateResult, error) {
	for n := 0; ; n++ {
		if n > maxContinuations {
			return nil, fmt.Errorf("the generation was aborted %d times", maxContinuations)
		}
		var res *engine.GenerateResult
		var version int64
		err := f.do(ctx, len(req.PromptIDs), func(b *backend.Backend, c engine.Client) error {
			gctx, v, slot, err := f.d.Gate.Enter(ctx, b.ID)
			if err != nil {
				return err
			}
			version = v
			f.r.OnGenerate(v)
			sent := req
			sent.CacheSalt = f.d.saltOf(v)
			res, err = c.Generate(gctx, sent)
			if f.d.Gate.Leave(slot) && ctx.Err() == nil {
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
func (f *Backend) continues(out, res *engine.GenerateResult, version int64, req *engine.GenerateRequest) (*engine.GenerateResult, bool) {
	out = appendSegment(out, res, version)
	if res.FinishReason != engine.FinishAbort {
		return out, false
	}
	f.d.Gate.CountAbort()
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
func (f *Backend) GenerateChat(ctx context.Context, cr engine.ChatRequest) ([]int, *engine.GenerateResult, error) {
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
		gctx, v, slot, err := f.d.Gate.Enter(ctx, b.ID)
		if err != nil {
			return err
		}
		version = v
		f.r.OnGenerate(v)
		sent := cr
		sent.CacheSalt = f.d.saltOf(v)
		prompt, res, err = cg.GenerateChat(gctx, sent)
		if f.d.Gate.Leave(slot) && ctx.Err() == nil {
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
func (f *Backend) TakeTurnBackends() []string {
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

// Render renders on the rollout's backend (tokenizer.Tokenizer).
func (f *Backend) Render(ctx context.Context, msgs []trajectory.Message, tools []trajectory.Tool, opts tokenizer.RenderOptions) ([]int, error) {
	var ids []int
	err := f.do(ctx, -1, func(_ *backend.Backend, c engine.Client) (err error) {
		ids, err = c.Render(ctx, msgs, tools, opts)
		return err
	})
	return ids, err
}

// Decode decodes on the rollout's backend (tokenizer.Tokenizer).
func (f *Backend) Decode(ctx context.Context, ids []int) (string, error) {
	var text string
	err := f.do(ctx, -1, func(_ *backend.Backend, c engine.Client) (err error) { text, err = c.Decode(ctx, ids); return err })
	return text, err
}

// Health is the current backend's health.
func (f *Backend) Health(ctx context.Context) error {
	f.mu.Lock()
	l := f.lease
	f.mu.Unlock()
	return l.Current().Client.Health(ctx)
}
