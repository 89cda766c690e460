// Package groups keeps the rules a trainer submits groups under: early
// stop (cancel a group's unfinished rollouts once enough of it finished
// usable) and dynamic sampling (DAPO: cancel a batch's once k of its
// groups finished informative). It counts each finished result, gives the
// marks a result is stored with (what it counted for, in the result's own
// transaction), resumes the counts from those marks after a crash, and
// says what to cut when a rule is met. The pipeline calls it under its own
// lock: Rules is not safe for concurrent use.
package groups

import (
	"encoding/json"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/core/trajectory"
)

// Member is what the rules know of a rollout.
type Member struct {
	ID, Group string
	Size      int // the group's size
	// Batch is the dynamic-sampling batch ("" none), K its informative groups.
	Batch string
	K     int
	// EarlyMin is the group's early_stop_min_usable (0 none); EarlyKey the
	// group's own key (its first rollout's id: group ids may repeat).
	EarlyMin int
	EarlyKey string
}

// Cut names the rollouts to cancel, a batch's or else a group's, and why.
type Cut struct {
	Batch, Group, Why string
}

// Store is where a restarted host reads back what results counted for.
type Store interface {
	Marks(prefix string) map[string]json.RawMessage
	Idempotent(key string) (store.Submission, bool)
}

// Rules holds the counts of the groups and batches with live rollouts.
type Rules struct {
	log     hclog.Logger
	early   map[string]*earlyStop
	dynamic map[string]*dynBatch
}

// New returns empty rules.
func New(log hclog.Logger) *Rules {
	return &Rules{log: log, early: map[string]*earlyStop{}, dynamic: map[string]*dynBatch{}}
}

// Track counts a live rollout.
func (r *Rules) Track(m Member) {
	r.trackDynamic(m)
	r.trackEarly(m)
}

// Finish counts a finished rollout's result and returns what to cut now.
func (r *Rules) Finish(m Member, res *trajectory.Result) []Cut {
	var cuts []Cut
	if r.finishDynamic(m, res) {
		cuts = append(cuts, dynamicCut(m.Batch, m.K))
	}
	if stop, usable := r.finishEarly(m, res); stop {
		cuts = append(cuts, earlyCut(m.Group, usable, m.EarlyMin))
	}
	return cuts
}

// Restore resumes, before a crashed host's unfinished rollouts are
// tracked again, the counts of their groups and batches from the store;
// it returns what already met its rule (to cut at once).
func (r *Rules) Restore(st Store, ms []Member) []Cut {
	var cuts []Cut
	for _, b := range r.restoreDynamic(st, ms) {
		cuts = append(cuts, dynamicCut(b.id, b.k))
	}
	for _, e := range r.restoreEarly(st, ms) {
		cuts = append(cuts, earlyCut(e.group, e.usable, e.min))
	}
	return cuts
}

// Marks are the marks res is stored with: what it counts for.
func Marks(m Member, res *trajectory.Result) []trajectory.Mark {
	var out []trajectory.Mark
	if mk, ok := dynMarkOf(m, res); ok {
		out = append(out, mk)
	}
	if mk, ok := earlyMarkOf(m, res); ok {
		out = append(out, mk)
	}
	return out
}

// Idle reports that no group or batch is being counted.
func (r *Rules) Idle() bool { return len(r.early) == 0 && len(r.dynamic) == 0 }

// Usable reports whether a result can be trained on: it was scored and
// has at least one token under the loss mask (Polar's rule for early stop).
func Usable(res *trajectory.Result) bool {
	if trajectory.SampleOf(res.Status, res.Failure) != trajectory.SampleTrainable || res.MaskSample {
		return false
	}
	for _, m := range res.Tokens.LossMask {
		if m == 1 {
			return true
		}
	}
	return false
}

func dynamicCut(batch string, k int) Cut {
	return Cut{Batch: batch, Why: fmt.Sprintf("dynamic sampling: %d informative groups of batch %s are done", k, batch)}
}

func earlyCut(group string, usable, min int) Cut {
	return Cut{Group: group, Why: fmt.Sprintf("early stop: %d usable results in group %s reached early_stop_min_usable=%d", usable, group, min)}
}
