package pipeline

import (
	"time"

	"github.com/prorl/prorl/core/sessions"
	"github.com/prorl/prorl/core/trajectory"
)

// retry runs r again as a new attempt when an infrastructure failure
// ended this one and its request's policy allows it: within the budget
// of that failure's reason and before the sample's deadline, not after a
// cancel or while the host stops. The attempt's end is stored before
// anything else, so a restarted host reports it and counts it; nothing
// this attempt produced reaches the result. It reports whether r was
// queued again (else the caller finalizes it).
func (p *Pipeline) retry(r *Rollout, st trajectory.Status, f *trajectory.Failure) bool {
	rp := r.Req.Retry
	if rp == nil || trajectory.SampleOf(st, f) != trajectory.SampleInfrastructure || !p.mayRunAgain(r) {
		return false
	}
	left, ok := p.retryLeft(r, rp.Deadline)
	if !ok || r.attemptsEnded(f.Reason) >= rp.Budget[f.Reason] {
		return false
	}
	return p.again(r, f, left)
}

// mayRunAgain: r was not cancelled and the host is not stopping.
func (p *Pipeline) mayRunAgain(r *Rollout) bool {
	return r.cancelled.Load() == nil && !p.closing.Load() && p.base.Err() == nil
}

// attemptsEnded counts r's earlier attempts that reason ended.
func (r *Rollout) attemptsEnded(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, a := range r.attempts {
		if a.Reason == reason {
			n++
		}
	}
	return n
}

// retryLeft is how long r may still run for under deadline, from its
// first attempt's start, and whether any time is left.
func (p *Pipeline) retryLeft(r *Rollout, deadline time.Duration) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := r.started
	if len(r.attempts) > 0 {
		first = r.attempts[0].StartedAt
	}
	left := time.Until(first.Add(deadline))
	return left, left > 0
}

// again ends r's attempt with f and queues its next, which may run for
// left at most. The attempt's end is stored first, so a restarted host
// reports it and counts it; nothing this attempt produced reaches the
// result. It reports false when the store refused the record.
func (p *Pipeline) again(r *Rollout, f *trajectory.Failure, left time.Duration) bool {
	now := time.Now()
	r.mu.Lock()
	ended := trajectory.Attempt{Attempt: r.Attempt, Stage: f.Stage, Reason: f.Reason, Message: f.Message,
		PolicyVersion: r.policy, StartedAt: r.started, EndedAt: now}
	if r.outcome != nil {
		for _, t := range r.outcome.Turns {
			ended.GeneratedTokens += len(t.ResponseIDs)
		}
	}
	r.mu.Unlock()
	if err := p.d.Store.Retry(r.ID, r.Attempt+1, &ended); err != nil {
		// Finished meanwhile (a cancel), or the store refused the write: a
		// retry not on record could run twice after a crash.
		p.d.Log.Warn("retry not recorded; the attempt's failure is the result", "rollout", r.ID, "error", err)
		return false
	}
	p.d.Log.Info("running a rollout again as a new attempt", "rollout", r.ID, "group", r.Req.GroupID,
		"attempt", r.Attempt+1, "stage", f.Stage, "reason", f.Reason, "message", f.Message)
	plug := p.holder(r)
	r.mu.Lock()
	reserved := r.reserved
	r.attempts = append(r.attempts, ended)
	r.Attempt++
	r.remaining = min(r.Req.Timeout, left)
	r.stage, r.started, r.policy, r.backendID = trajectory.StageInit, time.Time{}, p.gate.Version(), ""
	r.taskID, r.finishTool, r.episode, r.sandboxID, r.reserved, r.evalSandbox = "", "", nil, "", nil, nil
	r.outcome, r.score, r.remote = nil, nil, nil
	if r.Req.Agent == AgentGateway {
		r.session = sessions.NewSlot()
	}
	r.oldest.Store(noToken)
	r.restart.Store(nil)
	r.mu.Unlock()
	// What the failed attempt held goes, as finalize lets it go.
	p.letGo(r, plug, reserved)
	if r.Req.Agent == AgentGateway {
		p.gw.Remove(r.ID)
		p.gw.Expect(r.ID, r.Req.SessionKey)
	}
	if p.d.Metrics != nil {
		p.d.Metrics.Retries.WithLabelValues(f.Reason).Inc()
	}
	p.initReserved.Add(1)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if !p.initQ.push(p.base, r) {
			p.initReserved.Add(-1)
			p.finalize(r, trajectory.StatusCancelled, &trajectory.Failure{Stage: trajectory.StageInit, Reason: trajectory.ReasonCancelled, Message: "host shutting down"})
		}
	}()
	return true
}
