package backend

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
)

// Routing is how the pool places rollouts and their requests on backends.
type Routing string

// The routings. Sticky ones hold a rollout on one backend for its life (the
// backend's prefix cache keeps its conversation); per-request ones choose
// again for every generation, as a plain load balancer in front of
// inference servers does.
const (
	// RouteSticky: fewest rollouts in flight, then fewest assigned (sticky).
	RouteSticky Routing = "sticky"
	// RouteGroup: a group's rollouts on one backend (its shared prompt is
	// prefilled once) while that backend's load, per unit of weight, stays
	// within a group's size of the least loaded; new groups go where they
	// leave the load per weight lowest (sticky).
	RouteGroup Routing = "group-aware"
	// RouteProRL: ProRL Agent's min-heap on cumulative assignments (sticky).
	RouteProRL Routing = "prorl"
	// RouteConsistentHash: the session id hashed to a backend (rendezvous
	// hashing; what SkyRL, slime and prime-rl's routers do), load ignored.
	RouteConsistentHash Routing = "consistent-hash"
	// RouteRoundRobin: each request to the next backend in turn.
	RouteRoundRobin Routing = "round-robin"
	// RouteLeastRequests: each request to the backend with the fewest
	// requests in flight per unit of weight.
	RouteLeastRequests Routing = "least-requests"
)

// Routings lists every routing, the default first.
var Routings = []Routing{RouteSticky, RouteGroup, RouteProRL, RouteConsistentHash, RouteRoundRobin, RouteLeastRequests}

// Check says whether r is a known routing.
func (r Routing) Check() error {
	for _, k := range Routings {
		if r == k {
			return nil
		}
	}
	names := make([]string, len(Routings))
	for i, k := range Routings {
		names[i] = string(k)
	}
	return fmt.Errorf("unknown routing %q (one of %s)", r, strings.Join(names, ", "))
}

// PerRequest is whether the routing chooses a backend for every request.
func (r Routing) PerRequest() bool { return r == RouteRoundRobin || r == RouteLeastRequests }

// Hint describes the rollout a lease is for.
type Hint struct {
	Key       string // the session: stable across the rollout's calls
	Group     string
	GroupSize int
	// Cost is the rollout's expected work (e.g. tokens it will generate);
	// group-aware placement balances it per weight. 0: unknown, counted 1.
	Cost float64
}

func (h Hint) cost() float64 {
	if h.Cost <= 0 {
		return 1
	}
	return h.Cost
}

type groupPlace struct {
	id string
	n  int
}

// admits is whether the host holds b's requests beyond its slots or cache.
func (b *Backend) admits() bool { return b.Slots > 0 || b.CacheTokens > 0 }

func (b *Backend) weight() float64 {
	if b.Weight <= 0 {
		return 1
	}
	return b.Weight
}

// pickLocked is the backend with room that better ranks first.
func (p *Pool) pickLocked(better func(a, b *Backend) bool) *Backend {
	var b *Backend
	for _, c := range p.h {
		if !c.full() && (b == nil || better(c, b)) {
			b = c
		}
	}
	return b
}

func rendezvous(key, id string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(id))
	return h.Sum64()
}

func (p *Pool) groupPickLocked(h Hint) *Backend {
	g := float64(max(h.GroupSize, 1))
	c := h.cost()
	load := func(b *Backend, extra float64) float64 { return (b.load + extra) / b.weight() }
	least := -1.0
	for _, b := range p.h {
		if !b.full() && (least < 0 || load(b, c) < least) {
			least = load(b, c)
		}
	}
	if least < 0 {
		return nil
	}
	if gp := p.groups[h.Group]; h.Group != "" && gp != nil {
		// Its place was chosen for the whole group: the rest of it follows;
		// a later member (a retry) only while the place is not overloaded.
		if b := p.all[gp.id]; b != nil && b.index >= 0 && !b.full() && (gp.n < int(g) || load(b, c) <= least+g*c/b.weight()) {
			return b
		}
	}
	// A new group (or one that no longer fits): where it is expected to
	// finish first. With a known batch size (Slots) that is the later of
	// the backend's expected work, this group's included, spread over its
	// slots, and one of its rollouts alone at the backend's speed: a
	// rollout's own time goes as 1/speed whatever the load. Balancing load
	// per weight alone put the third and fourth costliest groups of a step
	// on the half-speed engines, and the step ended when a rollout of
	// theirs did (bench GRPOStep, SWE-like: the longest
	// rollout's group went there in 4 of 6 runs, and it decoded in
	// 150-155 s against 99-106 s on a fast engine). Without Slots, load
	// per weight. Ties to the faster, then the less loaded.
	finish := func(b *Backend) float64 {
		if b.Slots <= 0 {
			return load(b, g*c)
		}
		return max(load(b, g*c)/float64(b.Slots), c/b.weight())
	}
	return p.pickLocked(func(a, b *Backend) bool {
		if fa, fb := finish(a), finish(b); fa != fb {
			return fa < fb
		}
		if a.weight() != b.weight() {
			return a.weight() > b.weight()
		}
		if la, lb := load(a, g*c), load(b, g*c); la != lb {
			return la < lb
		}
		return a.ID < b.ID
	})
}

func (p *Pool) joinGroupLocked(l *Lease) {
	if l.hint.Group == "" || p.route != RouteGroup {
		return
	}
	gp := p.groups[l.hint.Group]
	if gp == nil {
		p.groups[l.hint.Group] = &groupPlace{id: l.B.ID, n: 1}
	} else if gp.id == l.B.ID {
		gp.n++
	}
}

func (p *Pool) leaveGroupLocked(l *Lease) {
	gp := p.groups[l.hint.Group]
	if gp == nil || gp.id != l.B.ID {
		return
	}
	if gp.n--; gp.n <= 0 {
		delete(p.groups, l.hint.Group)
	}
}

// migrateSlack is how many more requests in flight per unit of weight a
// rollout's backend must have than the least busy one before the rollout
// moves there: enough that the move's cost (prefilling its context again
// on a backend without it cached) is paid back by the queue it leaves.
const migrateSlack = 8

// rebalanceLocked moves a group-aware lease off a backend whose requests
// queue up while another has room: placement at the start balances the
// expected work, this corrects for what the rollouts really do.
func (p *Pool) rebalanceLocked(l *Lease) *Backend {
	cur := l.B
	if cur.index < 0 || cur.removed {
		return cur // out of rotation: the failover moves it, not this
	}
	best := p.pickLocked(func(a, c *Backend) bool {
		return float64(a.requests)/a.weight() < float64(c.requests)/c.weight()
	})
	if best == nil || best == cur || float64(cur.requests+1)/cur.weight() <= float64(best.requests+1)/best.weight()+migrateSlack {
		return cur
	}
	if best.weight() < cur.weight() && cur.inflight > 0 && l.hint.cost() > cur.load/float64(cur.inflight) {
		// A long rollout stays on the faster backend: the short ones move.
		return cur
	}
	return p.moveLocked(l, best)
}

// Current is the lease's backend, read under the pool's lock: rebalancing
// moves a group-aware lease between its requests.
func (l *Lease) Current() *Backend {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.B
}

// Route is the backend for the lease's next request, and the call that
// ends it: the lease's own backend unless the routing chooses per request.
// With admission (Backend.Slots) it may wait: see RouteWait.
func (l *Lease) Route() (*Backend, func()) {
	b, end, _ := l.RouteWait(context.Background(), 0, 0)
	return b, end
}

// RouteNow is the backend for a call that takes no engine slot (rendering,
// decoding): the routing's choice, not counted, never waiting.
func (l *Lease) RouteNow() (*Backend, func()) {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.p.chooseLocked(l), func() {}
}

// chooseLocked is the backend the routing picks for the lease's next request.
func (p *Pool) chooseLocked(l *Lease) *Backend {
	b := l.B
	switch p.route {
	case RouteGroup:
		if !b.admits() {
			// With admission, waiting requests balance the load (admit.go);
			// moving leases on top of it moved long contexts to backends
			// whose cache was full, where they waited again.
			b = p.rebalanceLocked(l)
		}
	case RouteRoundRobin:
		if len(p.h) > 0 {
			hs := append([]*Backend(nil), p.h...)
			sort.Slice(hs, func(i, j int) bool { return hs[i].ID < hs[j].ID })
			b = hs[p.rr%uint64(len(hs))]
			p.rr++
		}
	case RouteLeastRequests:
		if c := p.pickLocked(func(a, c *Backend) bool {
			la, lc := float64(a.requests)/a.weight(), float64(c.requests)/c.weight()
			if la != lc {
				return la < lc
			}
			if a.reqTotal != c.reqTotal {
				return a.reqTotal < c.reqTotal
			}
			return a.ID < c.ID
		}); c != nil {
			b = c
		}
	}
	return b
}
