package pipeline

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// idleWorkers waits until n workers wait on h.
func idleWorkers(t *testing.T, h *handoff, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h.mu.Lock()
		k := len(h.idle)
		h.mu.Unlock()
		if k == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d idle workers, want %d", k, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func rollouts(n int) []*Rollout {
	rs := make([]*Rollout, n)
	for i := range rs {
		rs[i] = &Rollout{ID: fmt.Sprint("r", i)}
	}
	return rs
}

func TestHandoffQueuesInOrder(t *testing.T) {
	h := newHandoff(3)
	ctx := context.Background()
	rs := rollouts(3)
	for _, r := range rs {
		if !h.put(ctx, r) {
			t.Fatal("put refused below the bound")
		}
	}
	if h.len() != 3 {
		t.Fatalf("len %d", h.len())
	}
	mb := make(chan *Rollout, 1)
	for _, want := range rs {
		if got, ok := h.get(ctx, mb); !ok || got != want {
			t.Fatalf("got %v, want %s", got, want.ID)
		}
	}
}

// The worker that went idle last gets the next rollout: the point of the
// type (its stack is the one most likely still grown).
func TestHandoffNewestIdleWorkerFirst(t *testing.T) {
	h := newHandoff(1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const workers = 4
	got := make(chan int, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok := h.get(ctx, make(chan *Rollout, 1)); ok {
				got <- i
			}
		}()
		idleWorkers(t, h, i+1) // idle in the order 0, 1, 2, 3
	}
	for want := workers - 1; want >= 0; want-- {
		h.put(ctx, &Rollout{ID: "r"})
		if w := <-got; w != want {
			t.Fatalf("worker %d took the rollout, want %d (the most recently idle)", w, want)
		}
	}
	wg.Wait()
}

func TestHandoffBound(t *testing.T) {
	h := newHandoff(1)
	bg := context.Background()
	rs := rollouts(2)
	h.put(bg, rs[0])
	ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
	defer cancel()
	if h.put(ctx, rs[1]) {
		t.Fatal("put past the bound did not wait")
	}
	// A waiting put goes through once a worker takes the queued one.
	done := make(chan bool)
	go func() { done <- h.put(bg, rs[1]) }()
	mb := make(chan *Rollout, 1)
	if r, _ := h.get(bg, mb); r != rs[0] {
		t.Fatalf("got %s", r.ID)
	}
	if !<-done {
		t.Fatal("put refused after room freed")
	}
	if r, _ := h.get(bg, mb); r != rs[1] {
		t.Fatalf("got %s", r.ID)
	}
}

// A worker that leaves (shutdown) must not be handed a rollout after.
func TestHandoffLeavingWorker(t *testing.T) {
	h := newHandoff(1)
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan bool)
	go func() {
		_, ok := h.get(ctx, make(chan *Rollout, 1))
		left <- ok
	}()
	idleWorkers(t, h, 1)
	cancel()
	if <-left {
		t.Fatal("got a rollout after its context ended with none handed")
	}
	r := &Rollout{ID: "r"}
	h.put(context.Background(), r)
	if h.len() != 1 {
		t.Fatal("rollout handed to a worker that had left")
	}
}

// A rollout handed to a worker as its context ends is still that worker's:
// the select may see both, and either way the rollout must come out.
func TestHandoffHandedAsWorkerLeaves(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 64 { // select picks at random between the two
		h := newHandoff(1)
		mb := make(chan *Rollout, 1)
		r := &Rollout{ID: "r"}
		mb <- r // as give does, between the worker's append and its select
		if got, ok := h.get(ctx, mb); !ok || got != r {
			t.Fatalf("try %d: rollout handed as the worker left was lost", i)
		}
	}
}

// A worker whose context ends just as it is taken off the idle list must
// still get the rollout: it is off the list, so nothing else will.
func TestHandoffWorkerLeavesAsPopped(t *testing.T) {
	h := newHandoff(1)
	ctx, cancel := context.WithCancel(context.Background())
	type got struct {
		r  *Rollout
		ok bool
	}
	res := make(chan got, 1)
	go func() {
		r, ok := h.get(ctx, make(chan *Rollout, 1))
		res <- got{r, ok}
	}()
	idleWorkers(t, h, 1)
	testHookPopped = func() {
		cancel()
		// Give the worker time to leave, if it can while the rollout is
		// in hand; under the lock it cannot, and this times out.
		select {
		case g := <-res:
			res <- g
		case <-time.After(100 * time.Millisecond):
		}
	}
	defer func() { testHookPopped = nil }()
	r := &Rollout{ID: "r"}
	h.put(context.Background(), r)
	if g := <-res; !g.ok || g.r != r {
		t.Fatal("the rollout handed to a worker leaving as it was taken off the idle list was lost")
	}
}

// Many producers and workers, workers leaving and coming back: every
// rollout is taken exactly once (run with -race).
func TestHandoffEveryRolloutOnce(t *testing.T) {
	const producers, workers, each = 4, 16, 500
	h := newHandoff(8)
	bg := context.Background()
	var mu sync.Mutex
	seen := map[*Rollout]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mb := make(chan *Rollout, 1)
			for {
				// Short contexts: workers often leave the idle list and rejoin.
				ctx, cancel := context.WithTimeout(bg, time.Millisecond)
				r, ok := h.get(ctx, mb)
				cancel()
				if ok {
					mu.Lock()
					seen[r]++
					mu.Unlock()
					continue
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	var all []*Rollout
	var pw sync.WaitGroup
	for range producers {
		rs := rollouts(each)
		all = append(all, rs...)
		pw.Add(1)
		go func() {
			defer pw.Done()
			for _, r := range rs {
				if !h.put(bg, r) {
					t.Error("put refused")
				}
			}
		}()
	}
	pw.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == len(all) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	for _, r := range all {
		if seen[r] != 1 {
			t.Fatalf("%s taken %d times", r.ID, seen[r])
		}
	}
}
