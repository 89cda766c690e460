package groups

import (
	"encoding/json"

	"github.com/prorl/prorl/core/trajectory"
)

// DynamicKeyPrefix starts the keys of a dynamic-sampling batch's marks in
// the store's key table, where they expire with the idempotency keys; a
// trainer's keys may not start with it.
const DynamicKeyPrefix = "dynamic-batch:"

// dynBatch follows a dynamic-sampling batch (DAPO's dynamic sampling, on
// the server): its groups start as workers free up, in submission order;
// a group is informative when it finished with at least two usable results
// whose rewards differ (all-equal rewards give a zero advantage); once k
// are, the batch's unfinished rollouts are cancelled (reported, not
// dropped: status cancelled, reason early_stopped).
//
// Each result is stored with a mark of what it counts for (dynMark), in
// its own transaction, so a host restarted after a crash resumes the
// tally exactly: without it the groups finished before the crash would not
// count and those cut in half would never finish counting, and the batch
// would generate past its k.
type dynBatch struct {
	id                   string
	k, informative, live int
	fired                bool
	groups               map[string]*groupTally
}

type groupTally struct {
	Size   int     `json:"size"`
	Done   int     `json:"done"`
	Usable int     `json:"usable"`
	Lo     float64 `json:"lo"`
	Hi     float64 `json:"hi"`
}

// count adds a usable result's reward.
func (g *groupTally) count(reward float64) {
	if g.Usable == 0 || reward < g.Lo {
		g.Lo = reward
	}
	if g.Usable == 0 || reward > g.Hi {
		g.Hi = reward
	}
	g.Usable++
}

// informative: two usable results whose rewards differ.
func (g *groupTally) informative() bool { return g.Usable >= 2 && g.Hi > g.Lo }

// dynMark is what one result of a dynamic batch counts for, stored with
// it under dynKey(batch)/rollout id.
type dynMark struct {
	Group  string  `json:"group"`
	Usable bool    `json:"usable,omitempty"`
	Reward float64 `json:"reward,omitempty"`
}

// dynRecord is a batch's tally as hosts before marks stored it, under
// dynKey(batch): read when a batch under way has no marks.
type dynRecord struct {
	Informative int                    `json:"informative"`
	Groups      map[string]*groupTally `json:"groups,omitempty"`
}

func newDynBatch(id string, k int) *dynBatch {
	return &dynBatch{id: id, k: k, groups: map[string]*groupTally{}}
}

// trackDynamic counts a live rollout of a dynamic batch.
func (r *Rules) trackDynamic(m Member) {
	if m.Batch == "" {
		return
	}
	b, _, _ := r.tally(m)
	b.live++
}

// tally is m's batch and group, made if new (fresh: the batch was).
func (r *Rules) tally(m Member) (b *dynBatch, g *groupTally, fresh bool) {
	if b = r.dynamic[m.Batch]; b == nil {
		b, fresh = newDynBatch(m.Batch, m.K), true
		r.dynamic[m.Batch] = b
	}
	if g = b.groups[m.Group]; g == nil {
		g = &groupTally{Size: max(m.Size, 1)}
		b.groups[m.Group] = g
	}
	return b, g, fresh
}

// finishDynamic counts a finished rollout; it reports whether its batch
// just reached k informative groups.
func (r *Rules) finishDynamic(m Member, res *trajectory.Result) bool {
	b := r.dynamic[m.Batch]
	if m.Batch == "" || b == nil {
		return false
	}
	b.live--
	if b.live <= 0 {
		delete(r.dynamic, m.Batch)
	}
	g := b.groups[m.Group]
	if g == nil {
		return false
	}
	g.Done++
	if Usable(res) {
		g.count(res.Reward)
	}
	if g.Done < g.Size {
		return false
	}
	delete(b.groups, m.Group)
	if g.informative() {
		b.informative++
	}
	return b.reached()
}

// reached reports, once, that the batch has its k informative groups.
func (b *dynBatch) reached() bool {
	if b.fired || b.informative < b.k {
		return false
	}
	b.fired = true
	return true
}

func dynKey(id string) string { return DynamicKeyPrefix + id }

// dynMarkOf is the mark res is stored with, when r is in a dynamic batch.
func dynMarkOf(m Member, res *trajectory.Result) (trajectory.Mark, bool) {
	if m.Batch == "" {
		return trajectory.Mark{}, false
	}
	mk := dynMark{Group: m.Group}
	if Usable(res) {
		mk.Usable, mk.Reward = true, res.Reward
	}
	v, err := json.Marshal(mk)
	if err != nil { // a NaN reward: the result then counts as unusable
		v, _ = json.Marshal(dynMark{Group: m.Group})
	}
	return trajectory.Mark{Key: dynKey(m.Batch) + "/" + m.ID, Value: v}, true
}

// restoreDynamic resumes, before the rollouts are tracked again, the
// tallies of the dynamic batches among a crashed host's unfinished
// rollouts. A group's finished rollouts are its size less its unfinished
// ones; their rewards are their marks'. It returns the batches that
// already have their k.
func (r *Rules) restoreDynamic(st Store, ms []Member) (reached []*dynBatch) {
	var restored []*dynBatch
	left := map[*groupTally]int{} // unfinished rollouts of each group
	for i := range ms {
		m := &ms[i]
		if m.Batch == "" {
			continue
		}
		b, g, fresh := r.tally(*m)
		if fresh {
			restored = append(restored, b)
		}
		left[g]++
	}
	for g, n := range left {
		g.Done = max(g.Size-n, 0)
	}
	for _, b := range restored {
		if marks := st.Marks(dynKey(b.id) + "/"); len(marks) > 0 {
			r.resumeDynamic(b, marks)
		} else {
			r.resumeDynamicRecord(st, b)
		}
		for _, g := range b.groups {
			g.Usable = min(g.Usable, g.Done)
		}
		if b.reached() {
			reached = append(reached, b)
		}
	}
	return reached
}

// resumeDynamic counts b's stored results by their marks: into the groups
// under way, and the groups they finished.
func (r *Rules) resumeDynamic(b *dynBatch, marks map[string]json.RawMessage) {
	finished := map[string]*groupTally{}
	for key, v := range marks {
		var m dynMark
		if err := json.Unmarshal(v, &m); err != nil {
			// Its group is unknown: if that group finished, the batch
			// may generate a little past its k, never stop short of it.
			r.log.Warn("recover: unreadable dynamic-sampling mark; its result counts as unusable", "key", key, "error", err)
			continue
		}
		g := b.groups[m.Group]
		if g == nil {
			if g = finished[m.Group]; g == nil {
				g = &groupTally{}
				finished[m.Group] = g
			}
		}
		if m.Usable {
			g.count(m.Reward)
		}
	}
	for _, g := range finished {
		if g.informative() {
			b.informative++
		}
	}
}

// resumeDynamicRecord resumes b from the tally record of a host before
// marks, which may miss the last results stored before the crash (then
// taken as unusable).
func (r *Rules) resumeDynamicRecord(st Store, b *dynBatch) {
	sub, ok := st.Idempotent(dynKey(b.id))
	if !ok || len(sub.Note) == 0 {
		return
	}
	var rec dynRecord
	if err := json.Unmarshal(sub.Note, &rec); err != nil {
		r.log.Warn("recover: unreadable dynamic-sampling tally; counting from zero", "batch", b.id, "error", err)
		return
	}
	b.informative = rec.Informative
	for id, g := range b.groups {
		if s := rec.Groups[id]; s != nil {
			g.Usable, g.Lo, g.Hi = s.Usable, s.Lo, s.Hi
		}
	}
}
