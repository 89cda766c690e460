package store

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prorl/prorl/core/trajectory"
)

// BenchmarkBoltFinishKeys: the durable store's CPU per finished result with
// rollout ids in random order (the host's ids before they began with a
// count) and in creation order (pipeline.NewID now). A result's commit puts
// its index entry and deletes its pending record, both keyed by id: random
// ids put every result of a commit on its own B-tree page in each bucket.
// 10,000 rollouts are submitted, then finished by 64 workers as a host's
// run stage does, each result about 3 kB.
func BenchmarkBoltFinishKeys(b *testing.B) {
	for _, order := range []string{"random", "ordered"} {
		b.Run(order, func(b *testing.B) {
			const n = 10_000
			r := rand.New(rand.NewSource(1))
			ids := make([]string, n)
			for i := range ids {
				if order == "random" {
					ids[i] = fmt.Sprintf("r-%018x", r.Uint64()) // 9 random bytes in the host's ids
				} else {
					ids[i] = fmt.Sprintf("r-%016x%08x", uint64(time.Now().UnixNano())+uint64(i), r.Uint32())
				}
			}
			req := json.RawMessage(`{"domain":"math","task":{"question":"` + strings.Repeat("q", 300) + `","answer":"1"},"sampling":{"temperature":1}}`)
			text := strings.Repeat("t", 3000)
			var cpu, pages, commits float64
			for range b.N {
				st, err := OpenBolt(filepath.Join(b.TempDir(), "s.db"), n)
				if err != nil {
					b.Fatal(err)
				}
				for i := 0; i < n; i += 500 {
					ps := make([]Pending, 0, 500)
					for _, id := range ids[i : i+500] {
						ps = append(ps, Pending{ID: id, Attempt: 1, Request: req, SubmittedAt: time.Now()})
					}
					if err := st.Submit(ps, nil); err != nil {
						b.Fatal(err)
					}
				}
				w0, c0, t0 := writes(st), st.batches.Load(), cpuTime()
				finishAll(b, st, n, func(i int) *trajectory.Result {
					return &trajectory.Result{ID: ids[i], Status: trajectory.StatusCompleted, FinalResponse: text}
				})
				cpu += (cpuTime() - t0).Seconds()
				pages += float64(writes(st) - w0)
				commits += float64(st.batches.Load() - c0)
				if err := st.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(cpu/float64(b.N*n)*1e6, "cpu-µs/result")
			b.ReportMetric(pages/float64(b.N*n), "page-writes/result")
			b.ReportMetric(float64(b.N*n)/commits, "results/commit")
		})
	}
}

// finishAll finishes results 0..n-1 (made by result) from 64 workers, as
// a host's run stage does: their commits are shared.
func finishAll(b *testing.B, st *Bolt, n int, result func(i int) *trajectory.Result) {
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := st.Finish(result(i)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// cpuTime is the process's CPU time so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func writes(st *Bolt) int64 {
	s := st.db.Stats()
	return s.TxStats.GetWrite()
}

// BenchmarkBoltOpen: opening a file that holds 10,000 unacknowledged
// results of a realistic shape (one turn: a 400-token prompt, a 60-token
// answer with its logprobs; two messages), each decoded into the memory
// view.
func BenchmarkBoltOpen(b *testing.B) {
	const n = 10_000
	path := filepath.Join(b.TempDir(), "s.db")
	st, err := OpenBolt(path, n)
	if err != nil {
		b.Fatal(err)
	}
	finishAll(b, st, n, func(i int) *trajectory.Result {
		r := rand.New(rand.NewSource(int64(i)))
		res := &trajectory.Result{ID: fmt.Sprintf("r-%016x%08x", i, r.Uint32()), GroupID: "g", Status: trajectory.StatusCompleted, Reward: 1,
			Messages: []trajectory.Message{{Role: "user", Content: strings.Repeat("What is 17 + 25? ", 20)}, {Role: "assistant", Content: "It is \\boxed{42}."}}}
		for k := range 460 {
			res.Tokens.IDs = append(res.Tokens.IDs, r.Intn(150_000))
			res.Tokens.LossMask = append(res.Tokens.LossMask, int8(k/400))
			lp := 0.0
			if k >= 400 {
				lp = -r.ExpFloat64()
			}
			res.Tokens.Logprobs = append(res.Tokens.Logprobs, lp)
		}
		res.Tokens.PromptLen = 400
		res.Turns = []trajectory.Turn{{PromptDeltaIDs: res.Tokens.IDs[:400], ResponseIDs: res.Tokens.IDs[400:], Logprobs: res.Tokens.Logprobs[400:], FinishReason: "stop", Backend: "b-1"}}
		return res
	})
	st.Close()
	b.ResetTimer()
	for range b.N {
		st, err := OpenBolt(path, n)
		if err != nil {
			b.Fatal(err)
		}
		if got := st.Stats().Finished; got != n {
			b.Fatalf("%d results, want %d", got, n)
		}
		st.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/result")
}
