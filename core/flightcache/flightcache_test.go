package flightcache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestGetKeepsAndEvicts(t *testing.T) {
	c := New[int](2)
	fills := 0
	get := func(k string, v int) int {
		got, err := c.Get(context.Background(), k, func() (int, error) { fills++; return v, nil })
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	steps := []struct {
		key        string
		fillValue  int
		want       int
		totalFills int
	}{
		{"a", 1, 1, 1},
		{"a", 9, 1, 1}, // kept
		{"b", 2, 2, 2},
		{"a", 9, 1, 2}, // a is now the most recent
		{"c", 3, 3, 3}, // evicts b
		{"b", 4, 4, 4},
		{"a", 5, 5, 5}, // c and b were more recent: a went
	}
	for i, s := range steps {
		if got := get(s.key, s.fillValue); got != s.want || fills != s.totalFills {
			t.Fatalf("step %d (%s): got %d after %d fills, want %d after %d", i, s.key, got, fills, s.want, s.totalFills)
		}
	}
	if calls, hits := c.Stats(); calls != 7 || hits != 2 {
		t.Fatalf("stats: %d calls, %d hits", calls, hits)
	}
}

func TestErrorsAreNotKept(t *testing.T) {
	c := New[int](4)
	boom := errors.New("boom")
	if _, err := c.Get(context.Background(), "k", func() (int, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	v, err := c.Get(context.Background(), "k", func() (int, error) { return 7, nil })
	if err != nil || v != 7 {
		t.Fatalf("after a failure: %d %v", v, err)
	}
}

// TestOneFillForConcurrentCallers: a group asks at once; one fills.
func TestOneFillForConcurrentCallers(t *testing.T) {
	c := New[int](4)
	release := make(chan struct{})
	var fills atomic.Int32
	var wg sync.WaitGroup
	got := make([]int, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = c.Get(context.Background(), "k", func() (int, error) { fills.Add(1); <-release; return 42, nil })
		}()
	}
	for { // all 8 asked before the fill ends
		if calls, _ := c.Stats(); calls == 8 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if fills.Load() != 1 {
		t.Fatalf("%d fills", fills.Load())
	}
	for _, v := range got {
		if v != 42 {
			t.Fatalf("got %v", got)
		}
	}
}

// TestWaitersOfAFailedFillFillThemselves: the filler's own cancellation
// is not the waiters' answer.
func TestWaitersOfAFailedFillFillThemselves(t *testing.T) {
	c := New[int](4)
	started, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := c.Get(context.Background(), "k", func() (int, error) {
			close(started)
			<-release
			return 0, context.Canceled
		})
		first <- err
	}()
	<-started
	second := make(chan int, 1)
	go func() {
		v, _ := c.Get(context.Background(), "k", func() (int, error) { return 5, nil })
		second <- v
	}()
	for {
		if calls, _ := c.Stats(); calls == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("filler: %v", err)
	}
	if v := <-second; v != 5 {
		t.Fatalf("waiter got %d", v)
	}
	// A waiter whose own context ends stops waiting.
	block := make(chan struct{})
	defer close(block)
	go func() { _, _ = c.Get(context.Background(), "slow", func() (int, error) { <-block; return 1, nil }) }()
	for {
		if calls, _ := c.Stats(); calls == 3 { // the slow fill started
			break
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Get(ctx, "slow", func() (int, error) { return 2, nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
}
