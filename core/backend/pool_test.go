package backend

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/config"
)

func newPool(t *testing.T, n int, maxc int) (*Pool, []*Backend) {
	p := NewPool(hclog.NewNullLogger())
	var bs []*Backend
	for i := 0; i < n; i++ {
		b, err := p.Add(&Backend{URL: fmt.Sprintf("http://127.0.0.1:%d", 1000+i), Protocol: "vllm", MaxConcurrency: maxc})
		if err != nil {
			t.Fatal(err)
		}
		p.SetHealth(b.ID, nil) // these have no client: checked by hand
		bs = append(bs, b)
	}
	return p, bs
}

func TestLeastLoadedAndLateJoiner(t *testing.T) {
	p, _ := newPool(t, 2, 0)
	ctx := context.Background()
	var leases []*Lease
	for i := 0; i < 100; i++ {
		l, err := p.Acquire(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	for _, s := range p.List() {
		if s.InFlight != 50 {
			t.Fatalf("uneven spread: %+v", p.List())
		}
	}
	// Finish everything, then add a third backend: with a cumulative-count key it
	// would take the next 50 rollouts; keyed on load it takes a third of them.
	for _, l := range leases {
		l.Release()
	}
	late, err := p.Add(&Backend{URL: "http://127.0.0.1:2000", Protocol: "vllm"})
	if err != nil {
		t.Fatal(err)
	}
	p.SetHealth(late.ID, nil)
	leases = leases[:0]
	for i := 0; i < 30; i++ {
		l, _ := p.Acquire(ctx, 0)
		leases = append(leases, l)
	}
	for _, s := range p.List() {
		if s.InFlight != 10 {
			t.Fatalf("late joiner took an unfair share: %+v", p.List())
		}
	}
}

func TestCapacityWaitAndRelease(t *testing.T) {
	p, _ := newPool(t, 1, 2)
	ctx := context.Background()
	a, _ := p.Acquire(ctx, 0)
	if _, err := p.Acquire(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Acquire(ctx, 10*time.Millisecond); !errors.Is(err, ErrNoBackend) {
		t.Fatalf("full backend: err = %v", err)
	}
	go func() { time.Sleep(20 * time.Millisecond); a.Release() }()
	if _, err := p.Acquire(ctx, 5*time.Second); err != nil {
		t.Fatalf("release did not wake a waiter: %v", err)
	}
	a.Release() // idempotent
	if s := p.List()[0]; s.InFlight != 2 {
		t.Fatalf("in flight = %d", s.InFlight)
	}
}

// TestUncheckedBackendTakesNoWork: a backend is out of rotation until its
// first health check passes.
func TestUncheckedBackendTakesNoWork(t *testing.T) {
	p := NewPool(hclog.NewNullLogger())
	b, _ := p.Add(&Backend{URL: "http://127.0.0.1:3000", Protocol: "vllm"})
	if st := p.List()[0]; st.Healthy || st.LastError != "not checked yet" {
		t.Fatalf("before its first check: %+v", st)
	}
	if _, err := p.Acquire(context.Background(), 50*time.Millisecond); !errors.Is(err, ErrNoBackend) {
		t.Fatalf("an unchecked backend took work: %v", err)
	}
	p.SetHealth(b.ID, nil)
	if l, err := p.Acquire(context.Background(), 0); err != nil || l.B.ID != b.ID {
		t.Fatalf("after a passing check: %v %v", l, err)
	}
}

func TestHealthLeavesAndReturns(t *testing.T) {
	p, bs := newPool(t, 2, 0)
	p.SetHealth(bs[0].ID, errors.New("down"))
	for i := 0; i < 5; i++ {
		l, _ := p.Acquire(context.Background(), 0)
		if l.B.ID != bs[1].ID {
			t.Fatal("unhealthy backend was chosen")
		}
	}
	p.SetHealth(bs[1].ID, errors.New("down"))
	if _, err := p.Acquire(context.Background(), 0); !errors.Is(err, ErrNoBackend) {
		t.Fatalf("err = %v", err)
	}
	p.SetHealth(bs[0].ID, nil)
	l, err := p.Acquire(context.Background(), 0)
	if err != nil || l.B.ID != bs[0].ID {
		t.Fatalf("healthy again: %v %v", l, err)
	}
	if !p.Remove(bs[0].ID) || p.Remove(bs[0].ID) {
		t.Fatal("remove")
	}
	l.Release() // a lease outliving its backend's removal is harmless
	if _, err := p.Add(&Backend{URL: bs[1].URL}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate url: %v", err)
	}
}

// Each routing places as it says, on the same pool code the pipeline uses.
func TestRoutings(t *testing.T) {
	ctx := context.Background()
	acquire := func(t *testing.T, p *Pool, h Hint) *Lease {
		t.Helper()
		l, err := p.AcquireFor(ctx, 0, h)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	t.Run("prorl counts cumulative assignments, not load", func(t *testing.T) {
		p, bs := newPool(t, 2, 0)
		_ = p.SetRouting(RouteProRL)
		for i := 0; i < 4; i++ {
			acquire(t, p, Hint{}).Release() // b1, b2, b1, b2: all released
		}
		held := acquire(t, p, Hint{}) // b1 (tie on 2 each), held
		if held.B != bs[0] {
			t.Fatalf("got %s", held.B.ID)
		}
		acquire(t, p, Hint{}).Release() // b2: 3 each
		if l := acquire(t, p, Hint{}); l.B != bs[0] {
			// Cumulative counts tie, so b1 again although it holds a rollout.
			t.Fatalf("prorl chose %s", l.B.ID)
		}
	})
	t.Run("consistent-hash keeps a session on one backend", func(t *testing.T) {
		p, _ := newPool(t, 4, 0)
		_ = p.SetRouting(RouteConsistentHash)
		seen := map[string]bool{}
		for i := 0; i < 40; i++ {
			key := fmt.Sprintf("r-%d", i)
			a := acquire(t, p, Hint{Key: key})
			b := acquire(t, p, Hint{Key: key})
			if a.B != b.B {
				t.Fatalf("session %s on %s then %s", key, a.B.ID, b.B.ID)
			}
			seen[a.B.ID] = true
		}
		if len(seen) != 4 {
			t.Fatalf("40 sessions hashed onto %d of 4 backends", len(seen))
		}
	})
	t.Run("group-aware keeps groups whole and follows weights", func(t *testing.T) {
		p, bs := newPool(t, 3, 0)
		bs[0].Weight = 2 // twice the others
		_ = p.SetRouting(RouteGroup)
		place := map[string]map[string]int{}
		for g := 0; g < 8; g++ {
			gid := fmt.Sprintf("g%d", g)
			place[gid] = map[string]int{}
			for i := 0; i < 8; i++ {
				l := acquire(t, p, Hint{Key: fmt.Sprintf("%s-%d", gid, i), Group: gid, GroupSize: 8})
				place[gid][l.B.ID]++
			}
		}
		for gid, m := range place {
			if len(m) != 1 {
				t.Fatalf("group %s split: %v", gid, m)
			}
		}
		st := p.List()
		if st[0].InFlight != 32 || st[1].InFlight != 16 || st[2].InFlight != 16 {
			t.Fatalf("load not by weight: %+v", st)
		}
	})
	t.Run("round-robin and least-requests choose per request", func(t *testing.T) {
		for _, r := range []Routing{RouteRoundRobin, RouteLeastRequests} {
			p, _ := newPool(t, 3, 0)
			_ = p.SetRouting(r)
			l := acquire(t, p, Hint{Key: "s"})
			got := map[string]int{}
			var dones []func()
			for i := 0; i < 6; i++ {
				b, done := l.Route()
				got[b.ID]++
				dones = append(dones, done)
			}
			for _, d := range dones {
				d()
			}
			if len(got) != 3 || got["b1"] != 2 || got["b2"] != 2 {
				t.Fatalf("%s: one rollout's six requests went %v", r, got)
			}
			for _, s := range p.List() {
				if s.Requests != 0 {
					t.Fatalf("%s: requests in flight after all ended: %+v", r, s)
				}
			}
		}
	})
	t.Run("sticky routes every request to the lease's backend", func(t *testing.T) {
		p, _ := newPool(t, 3, 0)
		l := acquire(t, p, Hint{})
		for i := 0; i < 3; i++ {
			b, done := l.Route()
			done()
			if b != l.B {
				t.Fatalf("sticky lease on %s routed to %s", l.B.ID, b.ID)
			}
		}
	})
	if err := Routing("fastest").Check(); err == nil {
		t.Fatal("an unknown routing passed")
	}
}

func TestRoutingsMatchConfig(t *testing.T) {
	if len(Routings) != len(config.Routings) {
		t.Fatalf("backend %v, config %v", Routings, config.Routings)
	}
	for i, r := range Routings {
		if string(r) != config.Routings[i] {
			t.Fatalf("backend %v, config %v", Routings, config.Routings)
		}
	}
}

// Group-aware leases move off a backend whose requests queue up while
// another has room; a long rollout is not moved to a slower backend.
func TestGroupAwareRebalance(t *testing.T) {
	ctx := context.Background()
	acquire := func(p *Pool, key, group string, size int, cost float64) *Lease {
		l, err := p.AcquireFor(ctx, 0, Hint{Key: key, Group: group, GroupSize: size, Cost: cost})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	p, bs := newPool(t, 2, 0)
	_ = p.SetRouting(RouteGroup)
	var ls []*Lease
	for i := 0; i < 20; i++ {
		if l := acquire(p, fmt.Sprint(i), "g", 20, 10); l.B != bs[0] {
			t.Fatal("the group was not placed together")
		} else {
			ls = append(ls, l)
		}
	}
	var ends []func()
	for _, l := range ls[:9] {
		b, end := l.Route()
		if b != bs[0] {
			t.Fatalf("moved while the queues were within the slack (%s)", b.ID)
		}
		ends = append(ends, end)
	}
	// b1 has 9 requests in flight, b2 none: the next rollout moves, and stays.
	if b, end := ls[9].Route(); b != bs[1] || ls[9].B != bs[1] {
		t.Fatalf("not moved: %s", b.ID)
	} else {
		end()
	}
	if st := p.List(); st[0].InFlight != 19 || st[1].InFlight != 1 || st[1].MigratedIn != 1 {
		t.Fatalf("counts after the move: %+v", st)
	}
	for _, e := range ends {
		e()
	}
	for _, l := range ls {
		l.Release()
	}

	p, bs = newPool(t, 2, 0)
	_ = p.SetRouting(RouteGroup)
	bs[1].Weight = 0.5
	var short []*Lease
	for i := 0; i < 11; i++ {
		short = append(short, acquire(p, fmt.Sprint(i), "s", 11, 1))
	}
	long := acquire(p, "long", "l", 1, 1000)
	if long.B != bs[0] || short[10].B != bs[0] {
		t.Fatal("placement")
	}
	ends = ends[:0]
	for _, l := range short[:10] {
		_, e := l.Route()
		ends = append(ends, e)
	}
	if b, e := long.Route(); b != bs[0] {
		t.Fatalf("the long rollout moved to the slower %s", b.ID)
	} else {
		ends = append(ends, e)
	}
	if b, e := short[10].Route(); b != bs[1] {
		t.Fatalf("a short rollout stayed in the queue (%s)", b.ID)
	} else {
		ends = append(ends, e)
	}
	for _, e := range ends {
		e()
	}

	// Under admission (the backends' slots known) the waiting requests
	// balance the load: leases are not moved on top of that.
	p, bs = newPool(t, 2, 0)
	_ = p.SetRouting(RouteGroup)
	for _, b := range bs {
		b.Slots = 32
	}
	ls = ls[:0]
	for i := 0; i < 20; i++ {
		ls = append(ls, acquire(p, fmt.Sprint(i), "g", 20, 10))
	}
	ends = ends[:0]
	for _, l := range ls[:12] {
		b, end := l.Route()
		if b != bs[0] {
			t.Fatalf("a lease moved under admission (to %s)", b.ID)
		}
		ends = append(ends, end)
	}
	for _, e := range ends {
		e()
	}
}

// TestGroupPlacementFinishFirst: with known batch sizes, group-aware
// placement puts a group where it is expected to finish first — the later
// of the backend's work over its slots and one rollout at its speed — so a
// step's costliest groups (LPT order) go to the faster backends rather
// than alternating by load per weight, while the work of the whole step
// still ends up spread by weight.
func TestGroupPlacementFinishFirst(t *testing.T) {
	p, bs := newPool(t, 4, 0)
	for i, b := range bs {
		b.Slots, b.Weight = 32, 1
		if i >= 2 {
			b.Weight = 0.5
		}
	}
	_ = p.SetRouting(RouteGroup)
	load := map[string]float64{}
	for g := 0; g < 64; g++ {
		cost := 6000 - 80*float64(g) // largest first
		var at *Backend
		for i := 0; i < 8; i++ {
			l, err := p.AcquireFor(context.Background(), 0, Hint{Key: fmt.Sprintf("g%d-%d", g, i), Group: fmt.Sprint(g), GroupSize: 8, Cost: cost})
			if err != nil {
				t.Fatal(err)
			}
			if at != nil && l.B != at {
				t.Fatalf("group %d split", g)
			}
			at = l.B
		}
		load[at.ID] += 8 * cost / at.Weight
		if g < 8 && at.Weight != 1 {
			t.Fatalf("group %d of the 8 costliest placed on a half-speed backend", g)
		}
	}
	lo, hi := math.Inf(1), 0.0
	for _, l := range load {
		lo, hi = min(lo, l), max(hi, l)
	}
	if hi > 1.1*lo {
		t.Fatalf("load per weight %v: spread %.2f", load, hi/lo)
	}
}
