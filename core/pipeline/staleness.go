package pipeline

import (
	"fmt"
	"time"

	"github.com/prorl/prorl/core/trajectory"
)

// ReasonStale ends an attempt whose tokens the policy left more than the
// request's max_staleness versions behind; the sample runs again. It is
// an attempt's reason, never a result's.
const ReasonStale = "stale"

// StaleModes are what a request's stale_mode may say.
var StaleModes = []string{"restart", "mark"}

// maxStaleRestarts bounds how often one sample is run again for
// staleness: a policy that moves faster than a sample can finish would
// restart it forever.
const maxStaleRestarts = 10

// generated records the policy version of one of r's generations: the
// first is the attempt's oldest token.
func (r *Rollout) generated(version int64) {
	r.oldest.CompareAndSwap(noToken, version)
}

// staleBy is how many versions r's oldest token is behind v (0 before any).
func (r *Rollout) staleBy(v int64) int64 {
	o := r.oldest.Load()
	if o == noToken {
		return 0
	}
	return v - o
}

// stalenessOf is r's staleness when it finishes under version v, and
// whether that is past its request's bound.
func (r *Rollout) stalenessOf(v int64) (*trajectory.Staleness, bool) {
	o := r.oldest.Load()
	if o == noToken {
		return nil, false
	}
	st := &trajectory.Staleness{InQueue: o - r.policy, InFlight: v - o}
	return st, r.Req.MaxStaleness != nil && st.InFlight > *r.Req.MaxStaleness
}

// checkStaleness runs again every live sample, of a request that bounds
// staleness and asks for restarts, whose oldest token the new version v
// leaves past the bound: its stage (generation, tools, evaluation) is
// stopped and work starts it over (restartStale). One that cannot run
// again (its deadline, its restarts spent) finishes and is marked stale.
func (p *Pipeline) checkStaleness(v int64) {
	for _, r := range p.live() {
		if r.Req.MaxStaleness == nil || r.Req.StaleMode == "mark" || r.staleBy(v) <= *r.Req.MaxStaleness || r.cancelled.Load() != nil {
			continue
		}
		if _, ok := p.restartLeft(r); !ok {
			continue
		}
		why := &trajectory.Failure{Reason: ReasonStale, Message: fmt.Sprintf("its first token's policy version %d is %d behind version %d (max_staleness %d)",
			r.oldest.Load(), r.staleBy(v), v, *r.Req.MaxStaleness)}
		if !r.restart.CompareAndSwap(nil, why) {
			continue
		}
		r.mu.Lock()
		cancel := r.cancel
		r.mu.Unlock()
		if cancel != nil {
			cancel() // work sees the mark when the stage returns
		}
		// Between stages it is seen when its next stage starts.
	}
}

// restartLeft is how long r may still run for, and whether it may be
// run again for staleness: before its deadline and its restarts cap.
func (p *Pipeline) restartLeft(r *Rollout) (time.Duration, bool) {
	left, ok := p.retryLeft(r, p.deadlineOf(r))
	return left, ok && r.attemptsEnded(ReasonStale) < maxStaleRestarts
}

// deadlineOf is r's retry deadline: its request's, else three timeouts.
func (p *Pipeline) deadlineOf(r *Rollout) time.Duration {
	if r.Req.Retry != nil && r.Req.Retry.Deadline > 0 {
		return r.Req.Retry.Deadline
	}
	return defaultDeadlineTimeouts * r.Req.Timeout
}

// restartStale runs r again after its stage stopped for staleness. It
// reports false when it could not (the host stopping, the store
// refusing), and then the caller reports r with why.
func (p *Pipeline) restartStale(r *Rollout, stage string, why *trajectory.Failure) bool {
	left, ok := p.restartLeft(r)
	if !ok || !p.mayRunAgain(r) {
		return false
	}
	f := *why
	f.Stage = stage
	return p.again(r, &f, left)
}
