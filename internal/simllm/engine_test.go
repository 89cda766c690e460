package simllm

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"
)

func seq(n, from int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// The engine's simulated time matches the model's arithmetic: a lone
// request costs its prefill and one step per token at batch one; a second
// request with the same prompt finds it in the prefix cache.
func TestEngineArithmetic(t *testing.T) {
	m := EngineModel{Slots: 4, StepBase: 6 * time.Millisecond, StepPerSeq: time.Millisecond, PrefillPerToken: 10 * time.Microsecond,
		PrefillChunk: 8192, CacheTokens: 1 << 20, BlockSize: 16, Speed: 2, TimeScale: 0.01}
	e := NewEngine(m)
	prompt := seq(1600, 10)
	if err := e.Generate(context.Background(), prompt, seq(100, 5000), 0); err != nil {
		t.Fatal(err)
	}
	st := e.Stats()
	// prefill step: 6 ms + 16 ms (1600 tokens), first token sampled; 99 decode steps of 7 ms; all at speed 2.
	want := (0.006 + 0.016 + 99*0.007) / 2
	if math.Abs(st.BusySeconds-want) > 1e-9 || st.GeneratedTokens != 100 || st.PrefillTokens != 1600 || st.CachedTokens != 0 {
		t.Fatalf("stats %+v, want busy %.4f", st, want)
	}
	if err := e.Generate(context.Background(), prompt, seq(10, 7000), 0); err != nil {
		t.Fatal(err)
	}
	st = e.Stats()
	// A hit ends at the last whole block before the prompt's last token.
	if st.CachedTokens != 1584 || st.PrefillTokens != 1616 {
		t.Fatalf("second request: cached %d prefill %d", st.CachedTokens, st.PrefillTokens)
	}
	// The first conversation's prompt+output continues: its blocks are cached.
	next := append(append(append([]int{}, prompt...), seq(100, 5000)...), seq(40, 9000)...)
	if err := e.Generate(context.Background(), next, seq(1, 1), 0); err != nil {
		t.Fatal(err)
	}
	if st2 := e.Stats(); st2.CachedTokens-st.CachedTokens != 1696 {
		t.Fatalf("continuation hit %d tokens, want 1696 (106 full blocks)", st2.CachedTokens-st.CachedTokens)
	}
}

// Concurrent requests batch: eight at once take far less than eight times one.
func TestEngineBatches(t *testing.T) {
	m := EngineModel{Slots: 8, StepBase: 10 * time.Millisecond, StepPerSeq: time.Millisecond, PrefillPerToken: time.Microsecond,
		CacheTokens: 0, BlockSize: 16, Speed: 1, TimeScale: 0.01}
	e := NewEngine(m)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.Generate(context.Background(), seq(32, 100*i+1), seq(200, 1), 0); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	st := e.Stats()
	one := 200 * 0.011
	if st.BusySeconds > 2*one || st.BusySeconds < one || st.GeneratedTokens != 1600 {
		t.Fatalf("busy %.3f s for 8 batched requests (one alone: %.3f s); stats %+v", st.BusySeconds, one, st)
	}
	if u := st.SlotSeconds / (st.BusySeconds * 8); u < 0.8 {
		t.Fatalf("slot occupancy %.2f while busy", u)
	}
}

// A cancelled request leaves the batch and returns at once.
func TestEngineCancel(t *testing.T) {
	e := NewEngine(EngineModel{Slots: 1, StepBase: 10 * time.Millisecond, TimeScale: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := e.Generate(ctx, seq(8, 1), seq(10000, 1), 0); err == nil {
		t.Fatal("a 100 s generation finished within its 50 ms deadline")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("cancel did not return")
	}
	// The slot frees: the next request runs.
	if err := e.Generate(context.Background(), seq(8, 1), seq(2, 1), 0); err != nil {
		t.Fatal(err)
	}
}

// With priority scheduling, waiting requests are admitted lowest priority
// value first, ties in arrival order.
func TestEnginePriority(t *testing.T) {
	e := NewEngine(EngineModel{Slots: 1, StepBase: time.Millisecond, TimeScale: 1, Priority: true})
	started := make(chan struct{})
	go func() {
		close(started)
		_ = e.Generate(context.Background(), seq(4, 1), seq(200, 1), 0) // holds the slot ~200 ms
	}()
	<-started
	time.Sleep(20 * time.Millisecond)
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for _, p := range []int{5, 1, 3, 1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.Generate(context.Background(), seq(4, 10*p), seq(30, 1), p); err != nil { // 30 ms each: completions far apart
				t.Error(err)
			}
			mu.Lock()
			order = append(order, p)
			mu.Unlock()
		}()
		time.Sleep(10 * time.Millisecond) // arrival order as listed
	}
	wg.Wait()
	if fmt.Sprint(order) != "[1 1 3 5]" {
		t.Fatalf("admitted in order %v", order)
	}
}

// TestEngineStop: a stopped engine's loop returns once idle (it holds the
// engine, and its cache, for good otherwise); Stop twice is fine.
func TestEngineStop(t *testing.T) {
	m := DefaultEngine()
	m.TimeScale = 0.001
	e := NewEngine(m)
	if err := e.Generate(context.Background(), seq(100, 1), seq(50, 500), 0); err != nil {
		t.Fatal(err)
	}
	withLoop := runtime.NumGoroutine()
	e.Stop()
	e.Stop()
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() >= withLoop; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, as many as with the loop", runtime.NumGoroutine())
		}
	}
}

// TestBlockCacheEvictsTailFirst: when the prefix cache is full, an idle
// sequence loses its last blocks first and keeps a usable prefix, as vLLM
// frees a request's blocks in reverse order (a plain LRU touched front to
// back evicts the first block, and with it every match of that sequence).
func TestBlockCacheEvictsTailFirst(t *testing.T) {
	const bs = 4
	seq := func(first, blocks int) []int {
		ids := make([]int, blocks*bs)
		for i := range ids {
			ids[i] = first + i
		}
		return ids
	}
	for _, tc := range []struct {
		name        string
		capacity    int // blocks
		a, b        int // blocks of sequence a, then of b
		wantA, wanB int // blocks of each still matched
	}{
		{"room for both", 8, 4, 4, 4, 4},
		{"two over", 6, 4, 4, 2, 4},
		{"b fills it", 4, 4, 4, 0, 4},
		{"b longer than the cache", 3, 2, 5, 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newBlockCache(tc.capacity)
			a, b := seq(1000, tc.a), seq(2000, tc.b)
			c.hold(a, bs, 0, nil, len(a)/bs) // one request's blocks, then another's
			c.hold(b, bs, 0, nil, len(b)/bs)
			if got := c.match(a, bs, 0); got != tc.wantA*bs {
				t.Errorf("a: %d tokens matched, want %d", got, tc.wantA*bs)
			}
			if got := c.match(b, bs, 0); got != tc.wanB*bs {
				t.Errorf("b: %d tokens matched, want %d", got, tc.wanB*bs)
			}
		})
	}
}

// TestCacheSalt: blocks cached under one cache_salt are found only under
// the same salt, as vLLM hashes the salt into a prompt's first block.
func TestCacheSalt(t *testing.T) {
	const bs = 4
	ids := make([]int, 4*bs)
	for i := range ids {
		ids[i] = 100 + i
	}
	c := newBlockCache(64)
	v1, v2 := saltSeed("prorl-policy-1"), saltSeed("prorl-policy-2")
	c.hold(ids, bs, v1, nil, 0)
	for _, tc := range []struct {
		name string
		seed uint64
		want int
	}{{"same salt", v1, len(ids)}, {"another salt", v2, 0}, {"no salt", 0, 0}} {
		if got := c.match(ids, bs, tc.seed); got != tc.want {
			t.Errorf("%s: %d tokens matched, want %d", tc.name, got, tc.want)
		}
	}
}
