package groups

import (
	"encoding/json"

	"github.com/prorl/prorl/core/trajectory"
)

// EarlyKeyPrefix starts the keys of an early-stop group's marks in the
// store's key table, where they expire with the idempotency keys; a
// trainer's keys may not start with it.
const EarlyKeyPrefix = "early-stop:"

// earlyStop follows a group submitted with an early stop. Each usable
// result is stored with a mark under the group's own key (its first
// rollout's id, Member.EarlyKey: group ids are the trainer's and may
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

// trackEarly counts a live rollout of an early-stop group.
func (r *Rules) trackEarly(m Member) {
	if m.EarlyMin <= 0 {
		return
	}
	e := r.early[m.Group]
	if e == nil {
		e = &earlyStop{min: m.EarlyMin, group: m.Group, key: m.EarlyKey}
		r.early[m.Group] = e
	}
	e.live++
}

// finishEarly counts a finished rollout of an early-stop group: it
// reports whether the group just reached its usable count (the rest are
// then cancelled), and the count.
func (r *Rules) finishEarly(m Member, res *trajectory.Result) (stop bool, usable int) {
	e := r.early[m.Group]
	if m.EarlyMin <= 0 || e == nil {
		return false, 0
	}
	e.live--
	if e.live <= 0 {
		delete(r.early, m.Group)
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
func earlyMarkOf(m Member, res *trajectory.Result) (trajectory.Mark, bool) {
	if m.EarlyMin <= 0 || m.EarlyKey == "" || !Usable(res) {
		return trajectory.Mark{}, false
	}
	return trajectory.Mark{Key: earlyKey(m.EarlyKey) + "/" + m.ID, Value: json.RawMessage(`{"usable":true}`)}, true
}

// restoreEarly resumes, before the rollouts are tracked again, the usable
// counts of the early-stop groups among a crashed host's unfinished
// rollouts; it returns the groups that already have theirs.
func (r *Rules) restoreEarly(st Store, ms []Member) (reached []*earlyStop) {
	for i := range ms {
		m := &ms[i]
		if m.EarlyMin <= 0 || m.EarlyKey == "" || r.early[m.Group] != nil {
			continue
		}
		e := &earlyStop{min: m.EarlyMin, group: m.Group, key: m.EarlyKey}
		r.early[m.Group] = e
		if marks := st.Marks(earlyKey(e.key) + "/"); len(marks) > 0 {
			e.usable = len(marks)
		} else if sub, ok := st.Idempotent(earlyKey(e.key)); ok && len(sub.Note) > 0 {
			var rec earlyRecord
			if err := json.Unmarshal(sub.Note, &rec); err != nil {
				r.log.Warn("recover: unreadable early-stop tally; counting from zero", "group", m.Group, "error", err)
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
