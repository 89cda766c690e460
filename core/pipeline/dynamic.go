package pipeline

import "github.com/prorl/prorl/core/trajectory"

// dynBatch follows a dynamic-sampling batch (DAPO's dynamic sampling, on
// the server): its groups start as workers free up, in submission order;
// a group is informative when it finished with at least two usable results
// whose rewards differ (all-equal rewards give a zero advantage); once k
// are, the batch's unfinished rollouts are cancelled (reported, not
// dropped: status cancelled, reason early_stopped).
type dynBatch struct {
	k, informative, live int
	fired                bool
	groups               map[string]*groupTally
}

type groupTally struct {
	size, done, usable int
	lo, hi             float64
}

// trackDynamic counts a live rollout of a dynamic batch; p.mu is held.
func (p *Pipeline) trackDynamic(r *Rollout) {
	if r.Req.Dynamic == "" {
		return
	}
	b := p.dynamic[r.Req.Dynamic]
	if b == nil {
		b = &dynBatch{k: r.Req.DynamicK, groups: map[string]*groupTally{}}
		p.dynamic[r.Req.Dynamic] = b
	}
	b.live++
	if b.groups[r.Req.GroupID] == nil {
		b.groups[r.Req.GroupID] = &groupTally{size: max(r.Req.GroupSize, 1)}
	}
}

// untrackDynamic counts a finished rollout; it reports whether its batch
// just reached k informative groups. p.mu is held.
func (p *Pipeline) untrackDynamic(r *Rollout, res *trajectory.Result) bool {
	b := p.dynamic[r.Req.Dynamic]
	if r.Req.Dynamic == "" || b == nil {
		return false
	}
	b.live--
	defer func() {
		if b.live <= 0 {
			delete(p.dynamic, r.Req.Dynamic)
		}
	}()
	g := b.groups[r.Req.GroupID]
	if g == nil {
		return false
	}
	g.done++
	if Usable(res) {
		if g.usable == 0 || res.Reward < g.lo {
			g.lo = res.Reward
		}
		if g.usable == 0 || res.Reward > g.hi {
			g.hi = res.Reward
		}
		g.usable++
	}
	if g.done < g.size {
		return false
	}
	delete(b.groups, r.Req.GroupID)
	if g.usable >= 2 && g.hi > g.lo {
		b.informative++
	}
	if !b.fired && b.informative >= b.k {
		b.fired = true
		return true
	}
	return false
}
