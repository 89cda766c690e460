package pipeline

import (
	"encoding/json"
	"fmt"

	"github.com/prorl/prorl/core/trajectory"
)

// EarlyKeyPrefix starts the keys of an early-stop group's marks in the
// store's key table, where they expire with the idempotency keys; a
// trainer's keys may not start with it.
const EarlyKeyPrefix = "early-stop:"

// earlyStop follows a group submitted with an early stop. Each usable
// result is stored with a mark under the group's own key (its first
// rollout's id, Request.EarlyKey: group ids are the trainer's and may
// repeat), so a host restarted after a crash resumes the usable count
// rather than ask the group for min more usable results.
type earlyStop struct {
	min, live, usable int
	fired             bool
	group, key        string
}

// earlyRecord is a group's count as hosts before marks stored it, under
// earlyKey: read when a group under way has no marks.
type earlyRecord struct {
	Usable int `json:"usable"`
}

// trackEarly counts a live rollout of an early-stop group; p.mu is held.
func (p *Pipeline) trackEarly(r *Rollout) {
	if r.Req.EarlyStopMin <= 0 {
		return
	}
	e := p.early[r.Req.GroupID]
	if e == nil {
		e = &earlyStop{min: r.Req.EarlyStopMin, group: r.Req.GroupID, key: r.Req.EarlyKey}
		p.early[r.Req.GroupID] = e
	}
	e.live++
}

// untrackEarly counts a finished rollout of an early-stop group: it
// reports whether the group just reached its usable count (the rest are
// then cancelled), and the count. p.mu is held.
func (p *Pipeline) untrackEarly(r *Rollout, res *trajectory.Result) (stop bool, usable int) {
	e := p.early[r.Req.GroupID]
	if r.Req.EarlyStopMin <= 0 || e == nil {
		return false, 0
	}
	e.live--
	if e.live <= 0 {
		delete(p.early, r.Req.GroupID)
	}
	if !Usable(res) {
		return false, e.usable
	}
	e.usable++
	if !e.fired && e.usable >= e.min {
		e.fired, stop = true, true
	}
	return stop, e.usable
}

func earlyKey(key string) string { return EarlyKeyPrefix + key }

// earlyMarkOf is the mark res is stored with, when r is in an early-stop
// group and res is usable (the others count for nothing).
func earlyMarkOf(r *Rollout, res *trajectory.Result) (trajectory.Mark, bool) {
	if r.Req.EarlyStopMin <= 0 || r.Req.EarlyKey == "" || !Usable(res) {
		return trajectory.Mark{}, false
	}
	return trajectory.Mark{Key: earlyKey(r.Req.EarlyKey) + "/" + r.ID, Value: json.RawMessage(`{"usable":true}`)}, true
}

// restoreEarly resumes, before the rollouts are tracked again, the usable
// counts of the early-stop groups among a crashed host's unfinished
// rollouts; it returns the groups that already have theirs. p.mu is held.
func (p *Pipeline) restoreEarly(reqs []Request) (reached []*earlyStop) {
	for i := range reqs {
		rq := &reqs[i]
		if rq.EarlyStopMin <= 0 || rq.EarlyKey == "" || p.early[rq.GroupID] != nil {
			continue
		}
		e := &earlyStop{min: rq.EarlyStopMin, group: rq.GroupID, key: rq.EarlyKey}
		p.early[rq.GroupID] = e
		if marks := p.d.Store.Marks(earlyKey(e.key) + "/"); len(marks) > 0 {
			e.usable = len(marks)
		} else if sub, ok := p.d.Store.Idempotent(earlyKey(e.key)); ok && len(sub.Note) > 0 {
			var rec earlyRecord
			if err := json.Unmarshal(sub.Note, &rec); err != nil {
				p.d.Log.Warn("recover: unreadable early-stop tally; counting from zero", "group", rq.GroupID, "error", err)
				continue
			}
			e.usable = rec.Usable
		}
		if e.usable >= e.min {
			e.fired = true
			reached = append(reached, e)
		}
	}
	return reached
}

// stopEarly cancels an early-stop group's unfinished rollouts.
func (p *Pipeline) stopEarly(group string, usable, min int) {
	why := fmt.Sprintf("early stop: %d usable results in group %s reached early_stop_min_usable=%d", usable, group, min)
	p.cancelWhere(func(o *Rollout) bool { return o.Req.GroupID == group }, trajectory.ReasonEarlyStopped, why)
}
