package backend

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
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
