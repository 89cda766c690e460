package bench

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prorl/prorl/core/trajectory"
)

// Dynamic sampling on the server. A pool of 64 math groups ×
// 8 whose difficulty is drawn (seeded) as a policy early in training sees
// it: 35% never solved, 25% always solved, 40% solved with probability
// 0.2–0.8 (uniform over five levels); two turns each (a think call, then the
// answer). The trainer wants 16 informative groups (reward variance > 0).
// Baseline: the whole pool sampled, then filtered (what a trainer without
// it does); against: informative_groups = 16, the host cancelling the rest.
// The host runs 128 rollouts at a time (one training batch); the
// simulator's engine model counts every generated token, including those
// of generations cut short.
func BenchmarkDynamicSampling(b *testing.B) {
	dir := binDir(b)
	const pool, n, k = 64, 8, 16
	rng := rand.New(rand.NewSource(19))
	scripts := filepath.Join(b.TempDir(), "scripts.jsonl")
	var lines []string
	for i := 0; i < pool; i++ {
		var rate float64
		switch u := rng.Float64(); {
		case u < 0.35:
			rate = 0
		case u < 0.60:
			rate = 1
		default:
			rate = []float64{0.2, 0.35, 0.5, 0.65, 0.8}[rng.Intn(5)]
		}
		j, _ := json.Marshal(map[string]any{"key": questionOf(i), "calls": []any{map[string]any{"tool": "think", "arguments": map[string]any{"thought": "work it out"}}},
			"final": fmt.Sprintf("The answer is \\boxed{%d}.", i+25), "wrong": map[string]any{"final": "The answer is \\boxed{0}."}, "correct_rate": rate})
		lines = append(lines, string(j))
	}
	if err := os.WriteFile(scripts, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	type outcome struct {
		tokens                 int64
		informative, cancelled int
		wall                   time.Duration
	}
	run := func(dynamic bool) outcome {
		sim := spawn(b, dir, "prorl-simllm", "--listen", "127.0.0.1:0", "--scripts", scripts, "--engine", "--engine-time-scale", "0.2")
		cfg := hostConfig(b, dir)
		raw, _ := os.ReadFile(cfg)
		_ = os.WriteFile(cfg, []byte(strings.Replace(string(raw), "run_workers = 1200", "run_workers = 128", 1)), 0o644)
		host := spawn(b, dir, "prorl-host", "serve", "--config", cfg)
		call(b, "POST", host.addr+"/v1/backends", map[string]any{"url": sim.addr}, nil)
		reqs := make([]any, pool)
		for i := range reqs {
			reqs[i] = map[string]any{"task": map[string]any{"domain": "math", "question": questionOf(i), "answer": strconv.Itoa(i + 25)},
				"n": n, "sampling": map[string]any{"seed": 1000 * i}}
		}
		body := map[string]any{"requests": reqs}
		if dynamic {
			body["informative_groups"] = k
		}
		t0 := time.Now()
		call(b, "POST", host.addr+"/v1/rollouts:batch", body, nil)
		rs, _ := collect(b, host.addr, 0, pool*n)
		var o outcome
		o.wall = time.Since(t0)
		groups := map[string][]*trajectory.Result{}
		for _, r := range rs {
			groups[r.GroupID] = append(groups[r.GroupID], r)
			if r.Status == trajectory.StatusCancelled {
				o.cancelled++
			} else if r.Status != trajectory.StatusCompleted {
				b.Fatalf("%s: %s %+v", r.ID, r.Status, r.Failure)
			}
		}
		for _, g := range groups {
			lo, hi, done := 2.0, -1.0, 0
			for _, r := range g {
				if r.Status == trajectory.StatusCompleted {
					lo, hi, done = min(lo, r.Reward), max(hi, r.Reward), done+1
				}
			}
			if done == n && hi > lo {
				o.informative++
			}
		}
		var st struct {
			GeneratedTokens int64 `json:"generated_tokens"`
		}
		call(b, "GET", sim.addr+"/sim/stats", nil, &st)
		o.tokens = st.GeneratedTokens
		return o
	}
	whole, dyn := run(false), run(true)
	saved := 1 - float64(dyn.tokens)/float64(whole.tokens)
	printTable("Dynamic sampling, 16 informative groups from a pool of 64 × 8", []row{
		{"generated tokens, whole pool then filtered (baseline)", fmt.Sprintf("%d (%d informative groups, %.1f s)", whole.tokens, whole.informative, whole.wall.Seconds()), "", true},
		{"generated tokens, informative_groups = 16", fmt.Sprintf("%d (%d informative groups, %d rollouts cancelled, %.1f s)", dyn.tokens, dyn.informative, dyn.cancelled, dyn.wall.Seconds()), ">= 16 groups", dyn.informative >= k},
		{"generation saved by stopping at 16", fmt.Sprintf("%.0f%% (%.2f× fewer tokens)", 100*saved, float64(whole.tokens)/float64(dyn.tokens)), "> 0", saved > 0},
	})
	b.ReportMetric(100*saved, "dynamic-saved-%")
}
