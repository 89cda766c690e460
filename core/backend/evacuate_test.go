package backend

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/prorl/prorl/core/engine"
)

// TestEvacuation: once nothing waits and a backend twice as fast has a free
// slot for every request of a slower one, the pool has the slower one's
// generations aborted; a rollout whose request ended there meanwhile goes
// to the faster backend next, and the slower one takes work again once its
// abort is done. Not while requests wait, nor for a backend less than 1.5×
// slower, nor while its generations are younger than its requests run on
// average.
func TestEvacuation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ratio    float64
		waiting  bool
		history  time.Duration // how long the slower backend's earlier request took
		evacuate bool
	}{
		{"twice as fast, nothing waits", 2, false, 0, true},
		{"a request waits", 2, true, 0, false},
		{"only 1.2 times as fast", 1.2, false, 0, false},
		{"younger than its requests usually run", 2, false, 2 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, bs := newPool(t, 2, 0)
			fast, slow := bs[0], bs[1]
			fast.Weight, fast.Slots = tc.ratio, 2
			slow.Weight, slow.Slots = 1, 2
			slow.Client = &engine.VLLM{BaseURL: slow.URL} // it can abort (the evacuator here is the test's)
			if tc.waiting {
				// Full too, so that a request for the fast backend waits
				// (an evacuable backend takes new requests while it has room).
				slow.Slots = 1
			}
			calls := make(chan *Backend, 4)
			release := make(chan error)
			p.SetEvacuator(func(_ context.Context, b *Backend) error {
				calls <- b
				return <-release
			})
			ctx := context.Background()
			// The slower backend's rollouts start while the faster is out.
			p.SetHealth(fast.ID, errors.New("down"))
			onSlow, _ := p.Acquire(ctx, 0)
			other, _ := p.Acquire(ctx, 0)
			third, _ := p.Acquire(ctx, 0)
			earlier := waitRouted(t, routeAsync(ctx, other, 0, 10))
			time.Sleep(tc.history)
			earlier.end()
			waitRouted(t, routeAsync(ctx, third, 0, 10)).end()
			s := waitRouted(t, routeAsync(ctx, onSlow, 0, 10))
			if tc.history == 0 {
				// Older than the requests before it took, however loaded the machine.
				time.Sleep(300 * time.Millisecond)
			}
			p.SetHealth(fast.ID, nil)
			onFast, _ := p.Acquire(ctx, 0)
			if onSlow.B != slow || other.B != slow || onFast.B != fast || s.b != slow {
				t.Fatal("placement")
			}
			f1 := waitRouted(t, routeAsync(ctx, onFast, 0, 10))
			var w chan routed
			if tc.waiting {
				f2, _ := p.Acquire(ctx, 0)
				f2.B = fast // held for the fast backend: it waits
				waitRouted(t, routeAsync(ctx, onFast, 0, 10))
				w = routeAsync(ctx, f2, 0, 10)
				notYet(t, w)
			}
			f1.end() // a slot frees: the moment the pool looks
			if !tc.evacuate {
				select {
				case b := <-calls:
					t.Fatalf("evacuated %s", b.ID)
				case <-time.After(100 * time.Millisecond):
				}
				s.end()
				if w != nil {
					waitRouted(t, w).end()
				}
				return
			}
			select {
			case b := <-calls:
				if b != slow {
					t.Fatalf("evacuated %s", b.ID)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no evacuation")
			}
			// The abort ends the request with its tokens; the rollout goes on
			// on the faster backend.
			s.end()
			next := waitRouted(t, routeAsync(ctx, onSlow, 0, 20))
			if next.b != fast || onSlow.Current() != fast {
				t.Fatalf("continued on %s", next.b.ID)
			}
			// Until the abort returns, the slower backend takes nothing: a
			// rollout running there goes to the faster one (now full).
			o := waitRouted(t, routeAsync(ctx, other, 0, 10))
			if o.b != fast {
				t.Fatalf("sent to %s during the evacuation", o.b.ID)
			}
			release <- nil
			// Then it does again.
			r := waitRouted(t, routeAsync(ctx, third, 0, 10))
			if r.b != slow {
				t.Fatalf("sent to %s after the evacuation", r.b.ID)
			}
			for _, x := range []routed{r, o, next} {
				x.end()
			}
			if st := p.List()[1]; st.Evacuations != 1 {
				t.Fatalf("%d evacuations counted", st.Evacuations)
			}
		})
	}
}

// TestRequestAgesWithParallelCalls: a lease with two requests in flight
// (a gateway session's parallel calls) ends them in either order and the
// backend's account of its requests' ages comes back to nothing.
func TestRequestAgesWithParallelCalls(t *testing.T) {
	p, bs := newPool(t, 1, 0)
	bs[0].Slots = 4
	ctx := context.Background()
	l, _ := p.Acquire(ctx, 0)
	a := waitRouted(t, routeAsync(ctx, l, 0, 10))
	time.Sleep(20 * time.Millisecond)
	b := waitRouted(t, routeAsync(ctx, l, 0, 10))
	a.end()
	b.end()
	p.mu.Lock()
	defer p.mu.Unlock()
	if bs[0].requests != 0 || math.Abs(bs[0].startSum) > 1e-6 {
		t.Fatalf("%d requests, start-time sum %g after both ended", bs[0].requests, bs[0].startSum)
	}
}
