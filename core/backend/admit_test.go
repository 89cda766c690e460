package backend

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prorl/prorl/core/engine"
)

// routeAsync starts a RouteWait and returns where its answer will arrive.
func routeAsync(ctx context.Context, l *Lease, prio, tokens int) chan routed {
	ch := make(chan routed, 1)
	go func() {
		b, end, err := l.RouteWait(ctx, prio, tokens)
		ch <- routed{b, end, err}
	}()
	return ch
}

type routed struct {
	b   *Backend
	end func()
	err error
}

func waitRouted(t *testing.T, ch chan routed) routed {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the request was never admitted")
	}
	return routed{}
}

func notYet(t *testing.T, ch chan routed) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("admitted to %v while it should wait", r.b.ID)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestAdmissionSlots: a backend gets at most Slots requests; the rest wait
// in the host and a freed slot goes to the best waiting one (lowest
// priority value, then the oldest).
func TestAdmissionSlots(t *testing.T) {
	p, bs := newPool(t, 1, 0)
	bs[0].Slots = 2
	ctx := context.Background()
	var ls []*Lease
	for range 5 {
		l, err := p.Acquire(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	a := waitRouted(t, routeAsync(ctx, ls[0], 0, 10))
	b := waitRouted(t, routeAsync(ctx, ls[1], 0, 10))
	late := routeAsync(ctx, ls[2], 5, 10)
	notYet(t, late)
	urgent := routeAsync(ctx, ls[3], -1, 10)
	notYet(t, urgent)
	a.end()
	u := waitRouted(t, urgent) // the lower priority value passes the older request
	notYet(t, late)
	b.end()
	l := waitRouted(t, late)
	u.end()
	l.end()
	if st := p.List()[0]; st.Requests != 0 {
		t.Fatalf("%d requests still counted", st.Requests)
	}
}

// fastSlow is a pool of two backends, the first twice as fast, with the
// slots given (0: the engine queues).
func fastSlow(t *testing.T, fastSlots, slowSlots int) (p *Pool, fast, slow *Backend) {
	t.Helper()
	p, bs := newPool(t, 2, 0)
	fast, slow = bs[0], bs[1]
	fast.Weight, fast.Slots = 2, fastSlots
	slow.Weight, slow.Slots = 1, slowSlots
	return p, fast, slow
}

// acquireOn places a lease for h on b: the pool's other backends are out
// of rotation meanwhile.
func acquireOn(t *testing.T, p *Pool, b *Backend, h Hint) *Lease {
	t.Helper()
	for _, o := range p.Backends() {
		if o != b {
			p.SetHealth(o.ID, errors.New("down"))
			defer p.SetHealth(o.ID, nil)
		}
	}
	l, err := p.AcquireFor(context.Background(), 0, h)
	if err != nil || l.B != b {
		t.Fatalf("placement: %v", err)
	}
	return l
}

// TestAdmissionSteals: a request whose backend is full goes at once to a
// backend with a free slot, and the lease moves with it.
// twoOnFirst is two backends of one slot each, with two leases on the
// first (the second out of rotation meanwhile) and one on the second.
func twoOnFirst(t *testing.T) (p *Pool, bs []*Backend, a, b, c *Lease) {
	t.Helper()
	p, bs = newPool(t, 2, 0)
	for _, b := range bs {
		b.Slots = 1
	}
	ctx := context.Background()
	p.SetHealth(bs[1].ID, errors.New("down"))
	a, _ = p.Acquire(ctx, 0)
	b, _ = p.Acquire(ctx, 0)
	p.SetHealth(bs[1].ID, nil)
	c, _ = p.Acquire(ctx, 0)
	if a.B != bs[0] || b.B != bs[0] || c.B != bs[1] {
		t.Fatal("placement")
	}
	return p, bs, a, b, c
}

func TestAdmissionSteals(t *testing.T) {
	_, bs, l1, l3, l2 := twoOnFirst(t)
	ctx := context.Background()
	r1 := waitRouted(t, routeAsync(ctx, l1, 0, 10))
	r3 := waitRouted(t, routeAsync(ctx, l3, 0, 10))
	if r3.b != bs[1] || l3.Current() != bs[1] {
		t.Fatalf("not moved to the free backend: %s (lease on %s)", r3.b.ID, l3.Current().ID)
	}
	// Both slots are taken now: l2 waits for its own, whoever frees first.
	w := routeAsync(ctx, l2, 0, 10)
	notYet(t, w)
	r1.end()
	r2 := waitRouted(t, w)
	r2.end()
	r3.end()
}

// TestAdmissionMovesShortContextsOnly: with a bound set, a waiting request
// moves its rollout to a backend with room only while its context is
// within it (moving prefills it there again); a longer one waits for its
// own backend, whichever frees.
func TestAdmissionMovesShortContextsOnly(t *testing.T) {
	const bound = 4096
	p, bs, busy, long, other := twoOnFirst(t)
	p.SetMigrateMaxTokens(bound)
	ctx := context.Background()
	r := waitRouted(t, routeAsync(ctx, busy, 0, 10))
	// bs[1] is free, but the context is long: it waits for bs[0].
	w := routeAsync(ctx, long, 0, bound+1)
	notYet(t, w)
	// bs[1]'s own rollout comes and goes: its freed slot is not given to
	// the long context either.
	o := waitRouted(t, routeAsync(ctx, other, 0, 10))
	o.end()
	notYet(t, w)
	r.end()
	if got := waitRouted(t, w); got.b != bs[0] || long.Current() != bs[0] {
		t.Fatalf("the long context moved to %s", got.b.ID)
	} else {
		got.end()
	}
	// Without the bound (the default) it moves at once.
	p.SetMigrateMaxTokens(0)
	r = waitRouted(t, routeAsync(ctx, busy, 0, 10))
	if got := waitRouted(t, routeAsync(ctx, long, 0, bound+1)); got.b != bs[1] {
		t.Fatalf("not moved without the bound: %s", got.b.ID)
	} else {
		got.end()
	}
	r.end()
}

// TestAdmissionCacheBudget: a rollout starts on a backend only while the
// contexts already there leave room for its own; the rollouts already
// there are never held up by it (else none could finish and make room).
func TestAdmissionCacheBudget(t *testing.T) {
	p, bs := newPool(t, 1, 0)
	bs[0].CacheTokens = 100
	p.SetCacheOvercommit(1) // the budget's accounting, exactly
	ctx := context.Background()
	l1, _ := p.Acquire(ctx, 0)
	l2, _ := p.Acquire(ctx, 0)
	r1 := waitRouted(t, routeAsync(ctx, l1, 0, 80))
	r1.end()
	w := routeAsync(ctx, l2, 0, 50)
	notYet(t, w)
	if got := p.WaitingFor(); got["cache"] != 1 || len(got) != 1 {
		t.Fatalf("waiting for %v, want cache room", got)
	}
	// l1's next turn, with a longer context, goes ahead of the waiting newcomer.
	r1 = waitRouted(t, routeAsync(ctx, l1, 0, 90))
	r1.end()
	if st := p.List()[0]; st.ContextTokens != 90 {
		t.Fatalf("context counted %d, want 90", st.ContextTokens)
	}
	l1.Release()
	r2 := waitRouted(t, w)
	r2.end()
	if st := p.List()[0]; st.ContextTokens != 50 {
		t.Fatalf("context counted %d, want 50", st.ContextTokens)
	}
	// Alone on a backend, a context larger than the budget still runs.
	l2.Release()
	l3, _ := p.Acquire(ctx, 0)
	waitRouted(t, routeAsync(ctx, l3, 0, 500)).end()
	l3.Release()
	if st := p.List()[0]; st.ContextTokens != 0 {
		t.Fatalf("context counted %d after every release", st.ContextTokens)
	}
}

// TestAdmissionCacheOvercommit: the budget is CacheTokens times the
// overcommit; raising it admits a rollout already waiting.
func TestAdmissionCacheOvercommit(t *testing.T) {
	tests := []struct {
		overcommit float64
		wait       bool // 80 active + a newcomer's 50 against 100 × overcommit
	}{
		{0, false}, // the default, 1.5: 130 ≤ 150
		{1, true},
		{1.2, true},
		{1.3, false},
		{2, false},
		{0.5, false}, // below 1: the default
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.overcommit), func(t *testing.T) {
			p, bs := newPool(t, 1, 0)
			bs[0].CacheTokens = 100
			p.SetCacheOvercommit(tc.overcommit)
			ctx := context.Background()
			l1, _ := p.Acquire(ctx, 0)
			l2, _ := p.Acquire(ctx, 0)
			defer l1.Release()
			defer l2.Release()
			waitRouted(t, routeAsync(ctx, l1, 0, 80)).end()
			w := routeAsync(ctx, l2, 0, 50)
			if !tc.wait {
				waitRouted(t, w).end()
				return
			}
			notYet(t, w)
			p.SetCacheOvercommit(2)
			waitRouted(t, w).end()
		})
	}
}

// TestAdmissionCancel: a waiting request whose context ends returns its
// error and holds nothing.
func TestAdmissionCancel(t *testing.T) {
	p, bs := newPool(t, 1, 0)
	bs[0].Slots = 1
	l1, _ := p.Acquire(context.Background(), 0)
	l2, _ := p.Acquire(context.Background(), 0)
	r1 := waitRouted(t, routeAsync(context.Background(), l1, 0, 1))
	ctx, cancel := context.WithCancel(context.Background())
	w := routeAsync(ctx, l2, 0, 1)
	notYet(t, w)
	if got := p.WaitingFor(); got["slots"] != 1 || len(got) != 1 {
		t.Fatalf("waiting for %v, want a slot", got)
	}
	cancel()
	if r := <-w; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err %v", r.err)
	}
	r1.end()
	if st := p.List()[0]; st.Requests != 0 {
		t.Fatalf("%d requests still counted", st.Requests)
	}
	waitRouted(t, routeAsync(context.Background(), l2, 0, 1)).end()
}

// TestAdmissionSlowerLeavesToFaster: a backend at half the speed of one
// with two slots takes a rollout's first request only while more than
// 2·(2/1 − 1) = 2 new requests wait; the first two wait for the faster
// backend, the third starts on the slower one at once, and a rollout
// already running on the slower backend is never held.
func TestAdmissionSlowerLeavesToFaster(t *testing.T) {
	p, fast, slow := fastSlow(t, 2, 2)
	ctx := context.Background()
	var onSlow []*Lease
	for range 4 {
		onSlow = append(onSlow, acquireOn(t, p, slow, Hint{}))
	}
	var onFast []*Lease
	for len(onFast) < 2 {
		l, _ := p.Acquire(ctx, 0)
		if l.B != fast {
			t.Fatalf("placed on %s", l.B.ID)
		}
		onFast = append(onFast, l)
	}
	f1 := waitRouted(t, routeAsync(ctx, onFast[0], 0, 10))
	f2 := waitRouted(t, routeAsync(ctx, onFast[1], 0, 10))
	if f1.b != fast || f2.b != fast {
		t.Fatal("the fast backend's own rollouts went elsewhere")
	}
	// The fast backend is full; the slow one is free.
	w1 := routeAsync(ctx, onSlow[0], 0, 10)
	notYet(t, w1)
	w2 := routeAsync(ctx, onSlow[1], 0, 10)
	notYet(t, w2)
	if got := p.WaitingFor(); got["faster"] != 2 || len(got) != 1 {
		t.Fatalf("waiting for %v, want two left to the faster backend", got)
	}
	s3 := waitRouted(t, routeAsync(ctx, onSlow[2], 0, 10))
	if s3.b != slow {
		t.Fatalf("the third waiting request went to %s", s3.b.ID)
	}
	// The fast backend frees a slot: the oldest waiting request takes it,
	// and its rollout moves there.
	f1.end()
	r1 := waitRouted(t, w1)
	if r1.b != fast || onSlow[0].Current() != fast {
		t.Fatalf("not moved to the faster backend: %s", r1.b.ID)
	}
	notYet(t, w2)
	// A later request of the rollout running on the slow backend is not
	// held, though only one new request waits.
	s3.end()
	again := waitRouted(t, routeAsync(ctx, onSlow[2], 0, 20))
	if again.b != slow {
		t.Fatalf("a running rollout's request went to %s", again.b.ID)
	}
	f2.end()
	r2 := waitRouted(t, w2)
	if r2.b != fast {
		t.Fatalf("the second waiting request went to %s", r2.b.ID)
	}
	for _, r := range []routed{r1, r2, again} {
		r.end()
	}
	// Equal speeds: nothing is held.
	slow.Weight = 2
	f1 = waitRouted(t, routeAsync(ctx, onFast[0], 0, 10))
	f2 = waitRouted(t, routeAsync(ctx, onFast[1], 0, 10))
	if r := waitRouted(t, routeAsync(ctx, onSlow[3], 0, 10)); r.b != slow {
		t.Fatalf("held at equal speeds, then sent to %s", r.b.ID)
	} else {
		r.end()
	}
	f1.end()
	f2.end()
}

// TestEvacuableSlowerTakesNewRequests: with the tail evacuated, a slower
// backend that can abort starts a new request while the faster one is
// full; one that cannot abort still leaves it to the faster backend.
func TestEvacuableSlowerTakesNewRequests(t *testing.T) {
	for _, tc := range []struct {
		name      string
		abortable bool
		takes     bool
	}{{"abortable", true, true}, {"cannot abort", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			p, fast, slow := fastSlow(t, 1, 2)
			if tc.abortable {
				slow.Client = &engine.VLLM{BaseURL: slow.URL} // never called: the evacuator is the test's
			}
			p.SetEvacuator(func(context.Context, *Backend) error { return nil })
			ctx := context.Background()
			onSlow, onFast := acquireOn(t, p, slow, Hint{}), acquireOn(t, p, fast, Hint{})
			f := waitRouted(t, routeAsync(ctx, onFast, 0, 10)) // the fast backend is full
			w := routeAsync(ctx, onSlow, 0, 10)
			if !tc.takes {
				notYet(t, w)
				f.end()
				if r := waitRouted(t, w); r.b != fast {
					t.Fatalf("went to %s", r.b.ID)
				} else {
					r.end()
				}
				return
			}
			if r := waitRouted(t, w); r.b != slow {
				t.Fatalf("went to %s", r.b.ID)
			} else {
				r.end()
			}
			f.end()
		})
	}
}

// TestNoHoldWithoutSlots: a backend without slots (its engine queues) is
// never made to leave a request to a faster one with slots, since nothing
// would give it back if the faster one went away.
func TestNoHoldWithoutSlots(t *testing.T) {
	p, fast, slow := fastSlow(t, 1, 0)
	ctx := context.Background()
	l, f := acquireOn(t, p, slow, Hint{}), acquireOn(t, p, fast, Hint{})
	busy := waitRouted(t, routeAsync(ctx, f, 0, 10))
	if r := waitRouted(t, routeAsync(ctx, l, 0, 10)); r.b != slow {
		t.Fatalf("sent to %s", r.b.ID)
	} else {
		r.end()
	}
	busy.end()
}

// TestAdmissionOrder: a freed slot goes by the trainer's priority first,
// then to a rollout under way before any new one (the one under way
// longest first), then to the new one expected to generate most (LPT),
// whatever the order they came in.
func TestAdmissionOrder(t *testing.T) {
	p, bs := newPool(t, 1, 0)
	bs[0].Slots = 1
	ctx := context.Background()
	lease := func(cost float64) *Lease {
		l, err := p.AcquireFor(ctx, 0, Hint{Cost: cost})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	holder, older, underWay, cheap, costly, urgent := lease(0), lease(1), lease(100), lease(10), lease(1000), lease(0)
	waitRouted(t, routeAsync(ctx, older, 0, 10)).end()
	waitRouted(t, routeAsync(ctx, underWay, 0, 10)).end()
	r := waitRouted(t, routeAsync(ctx, holder, 0, 10))
	// In the order they come: the worst first.
	wCheap := routeAsync(ctx, cheap, 0, 10)
	notYet(t, wCheap)
	wCostly := routeAsync(ctx, costly, 0, 10)
	notYet(t, wCostly)
	wUnderWay := routeAsync(ctx, underWay, 0, 20)
	notYet(t, wUnderWay)
	wOlder := routeAsync(ctx, older, 0, 20) // under way since before underWay
	notYet(t, wOlder)
	wUrgent := routeAsync(ctx, urgent, -1, 10)
	notYet(t, wUrgent)
	for _, next := range []chan routed{wUrgent, wOlder, wUnderWay, wCostly, wCheap} {
		r.end()
		r = waitRouted(t, next)
	}
	r.end()
	if st := p.List()[0]; st.Requests != 0 {
		t.Fatalf("%d requests still counted", st.Requests)
	}
}

// TestAdmissionKeepsLongOnFaster: a slower backend with a free slot does not
// take a rollout under way on a faster one, nor a new one costlier than
// the rollouts it holds on average (than all rollouts, while it holds
// none); a cheaper new one it takes.
func TestAdmissionKeepsLongOnFaster(t *testing.T) {
	for _, slowHolds := range []bool{true, false} {
		t.Run(fmt.Sprintf("slow holds a rollout: %v", slowHolds), func(t *testing.T) {
			p, fast, slow := fastSlow(t, 1, 4)
			// Abortable with an evacuator: the speed rule (leaveToFasterLocked)
			// holds nothing back, so what holds is the rule under test.
			slow.Client = &engine.VLLM{BaseURL: slow.URL}
			p.SetEvacuator(func(context.Context, *Backend) error { return nil })
			ctx := context.Background()
			acquire := func(on *Backend, cost float64) *Lease { return acquireOn(t, p, on, Hint{Cost: cost}) }
			if slowHolds {
				acquire(slow, 10) // average there 10; of all, 33
			} // else the average of all, 38.75
			underWay, long, cheap, other := acquire(fast, 50), acquire(fast, 50), acquire(fast, 5), acquire(fast, 50)
			waitRouted(t, routeAsync(ctx, underWay, 0, 10)).end() // its first turn: now under way on fast
			busy := waitRouted(t, routeAsync(ctx, other, 0, 10))  // fast is full
			var held []chan routed
			for _, tc := range []struct {
				name  string
				l     *Lease
				moves bool
			}{{"under way", underWay, false}, {"new, costlier", long, false}, {"new, cheaper", cheap, true}} {
				w := routeAsync(ctx, tc.l, 0, 10)
				if !tc.moves {
					notYet(t, w)
					held = append(held, w)
					continue
				}
				if r := waitRouted(t, w); r.b != slow || tc.l.Current() != slow {
					t.Fatalf("%s: went to %s", tc.name, r.b.ID)
				} else {
					r.end()
				}
			}
			// The held ones wait for the fast backend's slot, in turn.
			busy.end()
			for _, w := range held {
				if r := waitRouted(t, w); r.b != fast {
					t.Fatalf("went to %s", r.b.ID)
				} else {
					r.end()
				}
			}
		})
	}
}

// TestAdmissionUnderWayLeavesAFailedBackend: a rollout under way waits for
// its own backend rather than move to a slower one, until its backend
// leaves the rotation: then the slower one takes it at once.
func TestAdmissionUnderWayLeavesAFailedBackend(t *testing.T) {
	for _, leave := range []string{"unhealthy", "removed"} {
		t.Run(leave, func(t *testing.T) {
			p, fast, slow := fastSlow(t, 1, 1)
			ctx := context.Background()
			underWay, other := acquireOn(t, p, fast, Hint{}), acquireOn(t, p, fast, Hint{})
			waitRouted(t, routeAsync(ctx, underWay, 0, 10)).end()
			busy := waitRouted(t, routeAsync(ctx, other, 0, 10)) // fast is full
			w := routeAsync(ctx, underWay, 0, 20)
			notYet(t, w)
			if leave == "removed" {
				p.Remove(fast.ID)
			} else {
				p.SetHealth(fast.ID, errors.New("down"))
			}
			if r := waitRouted(t, w); r.b != slow {
				t.Fatalf("went to %s", r.b.ID)
			} else {
				r.end()
			}
			busy.end()
		})
	}
}
