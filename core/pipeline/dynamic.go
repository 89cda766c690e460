package pipeline

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/core/trajectory"
)

// DynamicKeyPrefix starts a dynamic-sampling batch's tally in the store's
// key table, where it expires with the idempotency keys; a trainer's keys
// may not start with it.
const DynamicKeyPrefix = "dynamic-batch:"

// dynBatch follows a dynamic-sampling batch (DAPO's dynamic sampling, on
// the server): its groups start as workers free up, in submission order;
// a group is informative when it finished with at least two usable results
// whose rewards differ (all-equal rewards give a zero advantage); once k
// are, the batch's unfinished rollouts are cancelled (reported, not
// dropped: status cancelled, reason early_stopped).
//
// The tally is kept in the store as it changes, so a host restarted after a
// crash resumes it: without it the groups finished before the crash would
// not count and those cut in half would never finish counting, and the
// batch would generate past its k.
type dynBatch struct {
	id                   string
	k, informative, live int
	fired                bool
	groups               map[string]*groupTally
	saver                tallySaver
}

// tallySaver coalesces the writes of one tally to the store.
type tallySaver struct {
	dirty  atomic.Bool // the tally changed since it was last written
	saving sync.Mutex  // held by the one goroutine writing it
}

type groupTally struct {
	Size   int     `json:"size"`
	Done   int     `json:"done"`
	Usable int     `json:"usable"`
	Lo     float64 `json:"lo"`
	Hi     float64 `json:"hi"`
}

// dynRecord is a batch's tally as stored: the groups finished informative,
// and those under way (groups finished flat or not started are not kept).
type dynRecord struct {
	Informative int                    `json:"informative"`
	Groups      map[string]*groupTally `json:"groups,omitempty"`
}

func newDynBatch(id string, k int) *dynBatch {
	return &dynBatch{id: id, k: k, groups: map[string]*groupTally{}}
}

// trackDynamic counts a live rollout of a dynamic batch; p.mu is held.
func (p *Pipeline) trackDynamic(r *Rollout) {
	if r.Req.Dynamic == "" {
		return
	}
	b := p.dynamic[r.Req.Dynamic]
	if b == nil {
		b = newDynBatch(r.Req.Dynamic, r.Req.DynamicK)
		p.dynamic[r.Req.Dynamic] = b
	}
	b.live++
	if b.groups[r.Req.GroupID] == nil {
		b.groups[r.Req.GroupID] = &groupTally{Size: max(r.Req.GroupSize, 1)}
	}
}

// untrackDynamic counts a finished rollout; it returns its batch, if any,
// and whether the batch just reached k informative groups. p.mu is held.
func (p *Pipeline) untrackDynamic(r *Rollout, res *trajectory.Result) (*dynBatch, bool) {
	b := p.dynamic[r.Req.Dynamic]
	if r.Req.Dynamic == "" || b == nil {
		return nil, false
	}
	b.live--
	if b.live <= 0 {
		delete(p.dynamic, r.Req.Dynamic)
	}
	g := b.groups[r.Req.GroupID]
	if g == nil {
		return b, false
	}
	g.Done++
	if Usable(res) {
		if g.Usable == 0 || res.Reward < g.Lo {
			g.Lo = res.Reward
		}
		if g.Usable == 0 || res.Reward > g.Hi {
			g.Hi = res.Reward
		}
		g.Usable++
	}
	if g.Done < g.Size {
		return b, false
	}
	delete(b.groups, r.Req.GroupID)
	if g.Usable >= 2 && g.Hi > g.Lo {
		b.informative++
	}
	return b, b.reached()
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

// saveTally writes a tally to the store under key, after a result it
// counts was stored (a tally ahead of the results would count a rollout
// that a crash then re-runs). Writes coalesce: a caller that finds another
// writing leaves the latest tally to it, which looks again after it lets
// go. note is called with p.mu held.
func (p *Pipeline) saveTally(s *tallySaver, key string, note func() any) {
	s.dirty.Store(true)
	for s.dirty.Load() {
		if !s.saving.TryLock() {
			return
		}
		if s.dirty.Swap(false) {
			p.mu.Lock()
			b, err := json.Marshal(note())
			p.mu.Unlock()
			if err == nil {
				err = p.d.Store.Submit(nil, &store.Keyed{Key: key, Replace: true, Sub: store.Submission{Note: b}})
			}
			if err != nil {
				// Only a crash now would cost anything: the tally would
				// restart behind, and the host generate more than asked.
				p.d.Log.Warn("store a tally", "key", key, "error", err)
			}
		}
		s.saving.Unlock()
	}
}

// saveDynamic writes b's tally.
func (p *Pipeline) saveDynamic(b *dynBatch) {
	p.saveTally(&b.saver, dynKey(b.id), func() any {
		rec := dynRecord{Informative: b.informative, Groups: make(map[string]*groupTally, len(b.groups))}
		for id, g := range b.groups {
			if g.Done > 0 {
				c := *g
				rec.Groups[id] = &c
			}
		}
		return rec
	})
}

// restoreDynamic resumes, before the rollouts are tracked again, the
// tallies of the dynamic batches among a crashed host's unfinished
// rollouts. A group's finished rollouts are its size less its unfinished
// ones; their rewards are the stored tally's, which may miss the last few
// results stored before the crash (then taken as unusable: the batch may
// generate a little past its k, never stop short of it). It returns the
// batches that already have their k. p.mu is held.
func (p *Pipeline) restoreDynamic(reqs []Request) (reached []*dynBatch) {
	var restored []*dynBatch
	left := map[*groupTally]int{} // unfinished rollouts of each group
	records := map[*dynBatch]dynRecord{}
	for i := range reqs {
		rq := &reqs[i]
		if rq.Dynamic == "" {
			continue
		}
		b := p.dynamic[rq.Dynamic]
		if b == nil {
			b = newDynBatch(rq.Dynamic, rq.DynamicK)
			p.dynamic[rq.Dynamic] = b
			restored = append(restored, b)
			var rec dynRecord
			if sub, ok := p.d.Store.Idempotent(dynKey(b.id)); ok && len(sub.Note) > 0 {
				if err := json.Unmarshal(sub.Note, &rec); err != nil {
					p.d.Log.Warn("recover: unreadable dynamic-sampling tally; counting from zero", "batch", b.id, "error", err)
					rec = dynRecord{}
				}
			}
			b.informative = rec.Informative
			records[b] = rec
		}
		g := b.groups[rq.GroupID]
		if g == nil {
			g = &groupTally{Size: max(rq.GroupSize, 1)}
			if s := records[b].Groups[rq.GroupID]; s != nil {
				g.Usable, g.Lo, g.Hi = s.Usable, s.Lo, s.Hi
			}
			b.groups[rq.GroupID] = g
		}
		left[g]++
	}
	for g, n := range left {
		g.Done = max(g.Size-n, 0)
		g.Usable = min(g.Usable, g.Done)
	}
	for _, b := range restored {
		if b.reached() {
			reached = append(reached, b)
		}
	}
	return reached
}

// stopDynamic cancels a batch's unfinished rollouts once it has its k.
func (p *Pipeline) stopDynamic(id string, k int) {
	why := fmt.Sprintf("dynamic sampling: %d informative groups of batch %s are done", k, id)
	p.cancelWhere(func(o *Rollout) bool { return o.Req.Dynamic == id }, trajectory.ReasonEarlyStopped, why)
}
