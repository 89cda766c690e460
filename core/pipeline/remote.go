package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/prorl/prorl/core/trajectory"
)

// Executor runs a rollout on another host (a coordinator's node) and
// returns the result it reported. It calls retry, saying why, before
// running it again elsewhere (the node it ran on was lost): the rollout
// keeps its id with the next attempt number, persisted first with the
// lost attempt's end.
type Executor interface {
	Execute(ctx context.Context, r *Rollout, retry func(why string) (attempt int, err error)) (*trajectory.Result, error)
}

// remotePool runs up to n rollouts on nodes at once, a goroutine each
// while it is out (a coordinator may have tens of thousands out; idle
// workers would cost their stacks and the collector's time).
func (p *Pipeline) remotePool(n int) {
	sem := make(chan struct{}, n)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			select {
			case sem <- struct{}{}:
			case <-p.base.Done():
				return
			}
			r, ok := p.initQ.pop(p.base)
			if !ok {
				return
			}
			p.initReserved.Add(-1)
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer func() { <-sem }()
				// One stage, shown as run: the nodes report their own.
				p.work(r, 1, p.remoteStage, nil)
			}()
		}
	}()
}

func (p *Pipeline) remoteStage(ctx context.Context, r *Rollout) error {
	res, err := p.d.Remote.Execute(ctx, r, func(why string) (int, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		now := time.Now()
		ended := trajectory.Attempt{Attempt: r.Attempt, Stage: trajectory.StageRun, Reason: trajectory.ReasonInterrupted, Message: why,
			PolicyVersion: r.policy, StartedAt: r.started, EndedAt: now}
		if err := p.d.Store.Retry(r.ID, r.Attempt+1, &ended); err != nil {
			return r.Attempt, fmt.Errorf("record attempt %d: %w", r.Attempt+1, err)
		}
		r.attempts = append(r.attempts, ended)
		r.Attempt++
		r.started = now
		return r.Attempt, nil
	})
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.remote = res
	r.mu.Unlock()
	return nil
}

// remoteResult is a node's result as the coordinator reports it: the
// node's trajectory under the coordinator's attempt number, sequence and
// total time. r.mu is held.
func remoteResult(r *Rollout, rr *trajectory.Result, now time.Time) *trajectory.Result {
	res := *rr
	res.ID, res.GroupID, res.SampleIndex, res.Attempt, res.Seq = r.ID, r.Req.GroupID, r.Req.Index, max(r.Attempt, rr.Attempt), 0
	// The attempts lost with nodes, then those the node ran again itself
	// (numbered on from the attempt it was given).
	res.Attempts = append(append([]trajectory.Attempt(nil), r.attempts...), rr.Attempts...)
	res.SubmittedAt, res.FinishedAt = r.submitted, &now
	res.Timing.TotalMS = ms(now.Sub(r.submitted))
	return &res
}

// Assigned is a rollout a coordinator places on this host: its id and
// attempt are the coordinator's.
type Assigned struct {
	ID      string          `json:"id"`
	Attempt int             `json:"attempt"`
	Request json.RawMessage `json:"request"`
}

// AssignedState is what became of an assigned rollout: "accepted",
// "running" (already here, live) or "finished" (already here, done).
type AssignedState struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

// SubmitAssigned queues rollouts under the ids and attempts a coordinator
// gave them; one this host already has (running or finished, e.g. sent
// again after the coordinator restarted) is not run twice.
func (p *Pipeline) SubmitAssigned(as []Assigned) ([]AssignedState, error) {
	if p.closing.Load() {
		return nil, ErrShuttingDown
	}
	out := make([]AssignedState, len(as))
	var ids []string
	var attempts []int
	var reqs []Request
	for i, a := range as {
		out[i] = AssignedState{ID: a.ID, State: "accepted"}
		if _, live := p.Lookup(a.ID); live {
			out[i].State = "running"
			continue
		}
		if _, done := p.d.Store.Get(a.ID); done {
			out[i].State = "finished"
			continue
		}
		var rq Request
		if err := json.Unmarshal(a.Request, &rq); err != nil {
			return nil, fmt.Errorf("rollouts[%d].request: %w", i, err)
		}
		ids, attempts, reqs = append(ids, a.ID), append(attempts, max(1, a.Attempt)), append(reqs, rq)
	}
	if len(reqs) > 0 {
		if _, err := p.admit(ids, attempts, reqs, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}
