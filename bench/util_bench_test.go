package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/engine"
	"github.com/prorl/prorl/core/lengthhist"
	"github.com/prorl/prorl/internal/simllm"
)

// How close one GRPO step's rollouts come to the fleet's
// capacity, per routing. The fleet is four simulator engines (the batching
// model of simllm.EngineModel: two at the calibrated H100 speed, two at
// half, as a mixed H100/A100 pool) behind the real backend.Pool with each
// routing and the real vLLM client; each rollout plays its turns as the
// pipeline's failover does (a lease, then each request's backend from the
// lease). What it leaves out: the agent loop, plugins and sandboxes (their
// host cost is measured by BenchmarkRollouts); tool calls are sleeps.
//
// Workloads (seeded, so every routing sees the same step):
//   - SWE-like, 64 groups × 8: a group prompt of lognormal(median 3000,
//     σ 0.5) tokens in [800, 10000]; a group difficulty of lognormal(median
//     10, σ 0.6) turns, each rollout Poisson around it in [1, 40]; each turn
//     answers lognormal(median 200, σ 0.9) tokens in [16, 4096], then a tool
//     takes lognormal(median 1 s, σ 1.3) in [0.05 s, 120 s] (heavy-tailed:
//     p99 ≈ 20 s, like test runs) and returns lognormal(median 250, σ 1)
//     tokens in [8, 4096]; a rollout stops at 32k tokens of context.
//   - Math, 64 groups × 8, single turn: a prompt of lognormal(median 150,
//     σ 0.4) tokens, answers of lognormal(median 1200, σ 0.8) in [50, 8192].

type wlTurn struct {
	out, obs int
	tool     time.Duration // simulated
}

type wlRollout struct {
	group int
	key   string
	turns []wlTurn
	// cost is what a trainer can know before the rollout runs: its
	// group's expected generated tokens (the distribution's mean, not the
	// drawn length); 0 when nothing is known (math).
	cost float64
}

type workload struct {
	name     string
	prompts  [][]int
	rollouts []wlRollout
	size     int
	vocab    int // token ids drawn below it
}

func lognorm(r *rand.Rand, median, sigma, lo, hi float64) float64 {
	return math.Min(hi, math.Max(lo, median*math.Exp(sigma*r.NormFloat64())))
}

func poisson(r *rand.Rand, mean float64) int {
	l, k, p := math.Exp(-mean), 0, 1.0
	for {
		p *= r.Float64()
		if p < l {
			return k
		}
		k++
	}
}

func randIDs(r *rand.Rand, n, vocab int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = 16 + r.Intn(vocab-16)
	}
	return out
}

func sweWorkload(groups, size, vocab int) *workload {
	r := rand.New(rand.NewSource(19))
	w := &workload{name: "SWE-like", size: size, vocab: vocab}
	for g := 0; g < groups; g++ {
		prompt := randIDs(r, int(lognorm(r, 3000, 0.5, 800, 10000)), vocab)
		w.prompts = append(w.prompts, prompt)
		diff := lognorm(r, 10, 0.6, 2, 30)
		for i := 0; i < size; i++ {
			n := min(max(poisson(r, diff), 1), 40)
			ctx := len(prompt)
			// E[answer tokens] = 200·exp(0.9²/2) ≈ 300 per turn.
			ro := wlRollout{group: g, key: fmt.Sprintf("g%d-r%d", g, i), cost: diff * 300}
			for k := 0; k < n && ctx < 32768; k++ {
				t := wlTurn{out: int(lognorm(r, 200, 0.9, 16, 4096)), obs: int(lognorm(r, 250, 1, 8, 4096)),
					tool: time.Duration(lognorm(r, 1, 1.3, 0.05, 120) * float64(time.Second))}
				ctx += t.out + t.obs
				ro.turns = append(ro.turns, t)
			}
			w.rollouts = append(w.rollouts, ro)
		}
	}
	return w
}

func mathWorkload(groups, size, vocab int) *workload {
	r := rand.New(rand.NewSource(1919))
	w := &workload{name: "math", size: size, vocab: vocab}
	for g := 0; g < groups; g++ {
		w.prompts = append(w.prompts, randIDs(r, int(lognorm(r, 150, 0.4, 40, 1000)), vocab))
		for i := 0; i < size; i++ {
			w.rollouts = append(w.rollouts, wlRollout{group: g, key: fmt.Sprintf("m%d-r%d", g, i),
				turns: []wlTurn{{out: int(lognorm(r, 1200, 0.8, 50, 8192))}}})
		}
	}
	return w
}

// withCosts is w with each rollout's cost (its expected_tokens) given by cost.
func withCosts(w *workload, cost func(wlRollout) float64) *workload {
	k := *w
	k.rollouts = slices.Clone(w.rollouts)
	for i := range k.rollouts {
		k.rollouts[i].cost = cost(k.rollouts[i])
	}
	return &k
}

// drawnLength is a rollout's drawn generated tokens: expected_tokens as if
// the trainer's were exact, what the scheduling reaches when lengths are
// known in advance.
func drawnLength(ro wlRollout) float64 {
	n := 0
	for _, t := range ro.turns {
		n += t.out
	}
	return float64(n)
}

// drawnDuration is a rollout's drawn time at speed 1 in tokens: its
// generated tokens plus its tools' time at a full batch's token rate.
func drawnDuration(m simllm.EngineModel) func(wlRollout) float64 {
	perTok := (m.StepBase + time.Duration(m.Slots)*m.StepPerSeq).Seconds()
	return func(ro wlRollout) float64 {
		d := drawnLength(ro)
		for _, t := range ro.turns[:len(ro.turns)-1] {
			d += t.tool.Seconds() / perTok
		}
		return d
	}
}

type fleetBackend struct {
	speed float64
}

// lowerBound is the step's makespan no routing can beat: the fleet's work
// at full batches (the cheapest tokens) with every shared token prefilled
// once, over the fleet's speed; or the longest rollout alone on the
// fastest backend (batch one, its tools included), if longer. fullBatch is
// that rollout's path when its engine decodes full batches, as it must
// while the rest of the step's work is to be done at the work bound's
// rate: a figure, not a bound, of how far below it a batching engine that
// never preempts can go.
func lowerBound(w *workload, m simllm.EngineModel, fleet []fleetBackend) (work, critical, fullBatch float64) {
	perTokFull := (m.StepBase + time.Duration(m.Slots)*m.StepPerSeq).Seconds() / float64(m.Slots)
	perTokOne := (m.StepBase + m.StepPerSeq).Seconds()
	c := m.PrefillPerToken.Seconds()
	var decode, prefill float64
	for _, p := range w.prompts {
		prefill += float64(len(p))
	}
	fast, speeds := 0.0, 0.0
	for _, b := range fleet {
		speeds += b.speed
		fast = math.Max(fast, b.speed)
	}
	for _, ro := range w.rollouts {
		cp, full := 0.0, 0.0
		for k, t := range ro.turns {
			decode += float64(t.out)
			if k+1 < len(ro.turns) {
				prefill += float64(t.obs)
				gap := t.tool.Seconds() + c*float64(t.obs)/fast
				cp += gap
				full += gap
			}
			cp += float64(t.out) * perTokOne / fast
			full += float64(t.out) * perTokFull * float64(m.Slots) / fast
		}
		if cp > critical {
			critical, fullBatch = cp, full
		}
	}
	if benchDebug {
		fmt.Printf("DEBUG bound: decode %.2fM prefill %.2fM\n", decode/1e6, prefill/1e6)
	}
	return (decode*perTokFull + prefill*c) / speeds, critical, fullBatch
}

// benchDebug (PRORL_BENCH_DEBUG=1) prints where the step's time went: per
// engine, the last rollouts' waits, what held requests while work waited.
var benchDebug = os.Getenv("PRORL_BENCH_DEBUG") != ""

// sharedPrompts: leases tell the pool their first prompt, so a group's is
// counted once on a cache budget (PRORL_BENCH_SHARED_PROMPTS=0: per
// rollout, as before; for comparisons).
var sharedPrompts = os.Getenv("PRORL_BENCH_SHARED_PROMPTS") != "0"

type utilResult struct {
	makespan, tail, util, hit float64
	// utilWaiting is slot use while some request waited (0 if none did).
	utilWaiting float64
	generated   int64
	moves       int64 // rollouts moved to another backend (each prefills its context again)
	evacuations int64 // slower backends' generations moved at the tail
}

func runStep(b *testing.B, w *workload, m simllm.EngineModel, fleet []fleetBackend, routing backend.Routing, longestFirst bool) utilResult {
	var sims []*simllm.Server
	pool := backend.NewPool(hclog.NewNullLogger())
	if err := pool.SetRouting(routing); err != nil {
		b.Fatal(err)
	}
	if v, err := strconv.Atoi(os.Getenv("PRORL_BENCH_MIGRATE_MAX")); err == nil { // experiments
		pool.SetMigrateMaxTokens(v)
	}
	if v, err := strconv.ParseFloat(os.Getenv("PRORL_BENCH_OVERCOMMIT"), 64); err == nil { // experiments
		pool.SetCacheOvercommit(v)
	}
	if longestFirst && os.Getenv("PRORL_BENCH_EVACUATE") != "0" {
		// As the pipeline does (without its policy gate: nothing pauses here).
		pool.SetEvacuator(func(ctx context.Context, b *backend.Backend) error { return b.AbortInFlight(ctx) })
	}
	for _, fb := range fleet {
		em := m
		em.Speed = fb.speed
		s := simllm.New(simllm.Options{Engine: &em, MaxModelLen: 1 << 20})
		ts := httptest.NewServer(s)
		// Closed when the step ends, not the benchmark: the steps of the
		// routings before kept 20 engines' caches on the heap, and the last
		// routing measured (ours) ran with the largest heap to collect.
		defer ts.Close()
		defer s.Close()
		c, err := engine.NewClient("vllm", ts.URL, "prorl-sim")
		if err != nil {
			b.Fatal(err)
		}
		slots, cache := 0, 0
		if longestFirst {
			// Ours: the host admits up to the engine's batch size, and
			// rollouts while their contexts fit its KV cache (admit.go).
			slots = m.Slots
			cache = m.CacheTokens
		}
		be, err := pool.Add(&backend.Backend{URL: ts.URL, Protocol: "vllm", Client: c, Weight: fb.speed, Slots: slots, CacheTokens: cache})
		if err != nil {
			b.Fatal(err)
		}
		pool.SetHealth(be.ID, nil)
		sims = append(sims, s)
	}
	runtime.GC()
	ctx := context.Background()
	start := time.Now()
	// Slot use while work waits: sampled, over the moments when some
	// generation request is ready but not running (queued in the host or
	// in an engine), the share of the fleet's slots running a sequence.
	var busy, ready float64
	var slotFull, cacheFull, samples float64
	idleWhy, idleSamples := map[string]float64{}, 0.0
	// Free slots then, per backend speed: in the engines, and in the host
	// (the difference is requests in transit, host to engine and back).
	freeEngine, freeHost := map[float64]float64{}, map[float64]float64{}
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			hostWaiting := pool.Waiting()
			running, waiting, slots := 0, hostWaiting, 0
			for _, s := range sims {
				st, _ := s.EngineStats()
				running, waiting, slots = running+st.Running, waiting+st.Waiting, slots+st.Slots
			}
			if waiting > 0 {
				busy += float64(running) / float64(slots)
				ready++
				if benchDebug {
					if running < slots {
						for k, v := range pool.WaitingFor() {
							idleWhy[k] += float64(v)
						}
						idleWhy["engine queue"] += float64(waiting - hostWaiting)
						idleSamples++
					}
					for k, st := range pool.List() { // in the order added, as sims
						if running < slots {
							es, _ := sims[k].EngineStats()
							freeEngine[st.Weight] += float64(es.Slots - es.Running)
							freeHost[st.Weight] += float64(st.Slots - st.Requests)
						}
						if st.Requests >= st.Slots {
							slotFull++
						}
						if st.CacheTokens > 0 && st.ContextTokens > st.CacheTokens*9/10 {
							cacheFull++
						}
						samples++
					}
				}
			}
		}
	}()
	done := make([]float64, len(w.rollouts))
	waitT := make([]float64, len(w.rollouts))
	firstT := make([]float64, len(w.rollouts))
	genT := make([]float64, len(w.rollouts))
	startT := make([]float64, len(w.rollouts))
	slowT := make([]float64, len(w.rollouts))
	// Context carried to another backend by a rollout's later requests
	// (PRORL_BENCH_DEBUG): what moves cost in prefill, at most.
	var movedCtx atomic.Int64
	var wg sync.WaitGroup
	order := make([]int, len(w.rollouts))
	for i := range order {
		order[i] = i
	}
	if longestFirst {
		// Longest expected first, as the pipeline's start queue orders by
		// expected_tokens: the big groups are placed, and start, first.
		sort.SliceStable(order, func(a, b int) bool { return w.rollouts[order[a]].cost > w.rollouts[order[b]].cost })
	}
	prompts := make([]backend.Prompt, len(w.prompts))
	for g, p := range w.prompts {
		prompts[g] = backend.PromptOf(p)
	}
	for _, i := range order {
		ro := w.rollouts[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := pool.AcquireFor(ctx, time.Minute, backend.Hint{Key: ro.key, Group: strconv.Itoa(ro.group), GroupSize: w.size, Cost: ro.cost})
			if err != nil {
				b.Error(err)
				return
			}
			defer lease.Release()
			if sharedPrompts { // as the pipeline's failover does at the first turn
				lease.SetPrompt(prompts[ro.group])
			}
			startT[i] = time.Since(start).Seconds() / m.TimeScale
			r := rand.New(rand.NewSource(int64(i)))
			ids := append([]int(nil), w.prompts[ro.group]...)
			var prev *backend.Backend
			for k, t := range ro.turns {
				seed := int64(i)<<16 | int64(k)
				// The trainer's priority, as the pipeline passes it (none
				// here); the pool orders the rest (waiter.before).
				prio := 0
				// An aborted generation (evacuation) continues from its
				// tokens, as the pipeline's failover does.
				for want := t.out; want > 0; {
					t0 := time.Now()
					be, end, err := lease.RouteWait(ctx, prio, len(ids))
					if err != nil {
						b.Error(err)
						return
					}
					if prev != nil && be != prev {
						movedCtx.Add(int64(len(ids)))
					}
					prev = be
					t1 := time.Now()
					res, err := be.Client.Generate(ctx, engine.GenerateRequest{PromptIDs: ids, MaxTokens: want, IgnoreEOS: true, Temperature: 1, Seed: &seed, Priority: prio})
					end()
					waitT[i] += t1.Sub(t0).Seconds() / m.TimeScale
					if k == 0 && firstT[i] == 0 {
						firstT[i] = t1.Sub(t0).Seconds() / m.TimeScale
					}
					gen := time.Since(t1).Seconds() / m.TimeScale
					genT[i] += gen
					if be.Weight < 1 {
						slowT[i] += gen
					}
					if err != nil {
						b.Error(err)
						return
					}
					ids = append(ids, res.IDs...)
					if want -= len(res.IDs); res.FinishReason != engine.FinishAbort {
						break
					}
				}
				if k+1 == len(ro.turns) {
					break
				}
				time.Sleep(time.Duration(float64(t.tool) * m.TimeScale))
				ids = append(ids, randIDs(r, t.obs, w.vocab)...)
			}
			done[i] = time.Since(start).Seconds() / m.TimeScale
		}()
	}
	wg.Wait()
	makespan := time.Since(start).Seconds() / m.TimeScale
	close(stopSampling)
	<-sampled
	var moves, evacuations int64
	for _, st := range pool.List() {
		moves += st.MigratedIn
		evacuations += st.Evacuations
	}
	if benchDebug {
		fmt.Printf("DEBUG while waiting: backends slot-full %.0f%%, cache >90%% %.0f%%\n", 100*slotFull/samples, 100*cacheFull/samples)
		for k, v := range idleWhy {
			fmt.Printf("DEBUG with a slot free and work waiting (%.0f samples): %.1f requests held for %s\n", idleSamples, v/max(idleSamples, 1), k)
		}
		for wt, v := range freeEngine {
			fmt.Printf("DEBUG then, speed-%.1f backends' free slots: %.1f in the engines, %.1f in the host\n", wt, v/max(idleSamples, 1), freeHost[wt]/max(idleSamples, 1))
		}
		idx := make([]int, len(done))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return done[idx[a]] > done[idx[b]] })
		for _, i := range idx[:8] {
			var tool float64
			for k, t := range w.rollouts[i].turns {
				if k+1 < len(w.rollouts[i].turns) {
					tool += t.tool.Seconds()
				}
			}
			fmt.Printf("DEBUG last ro %d done %.0f start %.0f wait %.0f (first %.0f) gen %.0f (slow %.0f) tool %.0f turns %d\n", i, done[i], startT[i], waitT[i], firstT[i], genT[i], slowT[i], tool, len(w.rollouts[i].turns))
		}
	}
	sort.Float64s(done)
	var slotSec, slots, cached, prompt, prefill float64
	var gen int64
	for _, s := range sims {
		st, _ := s.EngineStats()
		slotSec += st.SlotSeconds
		slots += float64(st.Slots)
		cached += float64(st.CachedTokens)
		prompt += float64(st.PromptTokens)
		gen += st.GeneratedTokens
		prefill += float64(st.PrefillTokens)
		if benchDebug { // where each engine's time went
			fmt.Printf("DEBUG engine speed %.1f busy %.0f s of %.0f s, slot-s %.0f, requests %d, prompt %d prefill %d generated %d\n", st.Speed, st.BusySeconds, makespan, st.SlotSeconds, st.Requests, st.PromptTokens, st.PrefillTokens, st.GeneratedTokens)
		}
	}
	if benchDebug {
		fmt.Printf("DEBUG SUMMARY %s makespan %.0f prefill %.2fM moves %d (carrying %.2fM tokens of context)\n", w.name, makespan, prefill/1e6, moves, float64(movedCtx.Load())/1e6)
	}
	return utilResult{makespan: makespan, tail: done[len(done)-1] - done[int(0.9*float64(len(done)))-1],
		util: slotSec / (slots * makespan), hit: cached / math.Max(prompt, 1), generated: gen, moves: moves, evacuations: evacuations,
		utilWaiting: busy / math.Max(ready, 1)}
}

// utilFleet is the engine model and fleet of the GRPO-step benches: four
// engines of 32 slots, two at the calibrated speed and two at half, at
// PRORL_BENCH_TIME_SCALE real seconds per simulated one (default 0.1).
func utilFleet() (simllm.EngineModel, []fleetBackend) {
	// Real time per simulated second. The host's own latency is real time:
	// at 0.015 a millisecond of it (a 2-core machine running 512 rollouts'
	// goroutines) counted as 67 simulated ms, several engine steps, and
	// left slots idle between requests that no real host would; at 0.04 the
	// same step measured 333-371 s instead of 356-438 s and slot use while
	// work waited 94-95% instead of 83-85%. Admission gains most (a freed
	// slot waits on the host's dispatch); routings that queue in the
	// engines moved less (ProRL's 634-698 s either way). At 0.04 requests
	// in transit between host and engines still held 5 of the 128 slots
	// while work waited (PRORL_BENCH_DEBUG); at 0.1 2, at 0.2 1.5, and 0.1
	// and 0.2 measured the same (SWE-like, group-aware, overcommit 1: 313
	// and 312 s, slot use while work waited 94% at both; 336-347 s and
	// 90-92% at 0.04). It makes GRPOStep take about 10 minutes.
	scale := 0.1
	if v, err := strconv.ParseFloat(os.Getenv("PRORL_BENCH_TIME_SCALE"), 64); err == nil && v > 0 {
		scale = v
	}
	m := simllm.DefaultEngine()
	m.Slots, m.TimeScale = 32, scale
	if v, err := strconv.Atoi(os.Getenv("PRORL_BENCH_CACHE_TOKENS")); err == nil { // experiments
		m.CacheTokens = v
	}
	return m, []fleetBackend{{1}, {1}, {0.5}, {0.5}}
}

// stepRows are a step's makespan and slot-use rows, named after label;
// note follows the makespan.
func stepRows(label string, r utilResult, lb float64, note ...string) []row {
	return []row{{name: fmt.Sprintf("%-15s makespan / lower bound", label), measured: strings.Join(append([]string{fmt.Sprintf("%.0f s / %.0f s = %.2f×", r.makespan, lb, r.makespan/lb)}, note...), " ")},
		{name: fmt.Sprintf("%-15s slot use: step, while work waits", label), measured: fmt.Sprintf("%.0f%%, %.0f%%", 100*r.util, 100*r.utilWaiting)}}
}

func BenchmarkGRPOStep(b *testing.B) {
	m, fleet := utilFleet()
	vocab := simllm.NewTokenizer().VocabSize()
	for _, w := range []*workload{sweWorkload(64, 8, vocab), mathWorkload(64, 8, vocab)} {
		if v := os.Getenv("PRORL_BENCH_WORKLOADS"); v != "" && !slices.Contains(strings.Split(v, ","), w.name) {
			continue
		}
		work, crit, critFull := lowerBound(w, m, fleet)
		lb := math.Max(work, crit)
		var rows []row
		res := map[backend.Routing]utilResult{}
		routings := []backend.Routing{backend.RouteProRL, backend.RouteSticky, backend.RouteRoundRobin, backend.RouteLeastRequests, backend.RouteConsistentHash, backend.RouteGroup}
		if v := os.Getenv("PRORL_BENCH_ROUTINGS"); v != "" {
			routings = nil
			for _, r := range strings.Split(v, ",") {
				routings = append(routings, backend.Routing(r))
			}
		}
		for _, rt := range routings {
			n := 1
			if rt == backend.RouteGroup {
				n = oursRuns()
			}
			r, lo, hi := medianRun(n, func() utilResult { return runStep(b, w, m, fleet, rt, rt == backend.RouteGroup) })
			var note []string
			if n > 1 {
				note = []string{fmt.Sprintf("(median of %d: %.0f–%.0f s)", n, lo, hi)}
			}
			res[rt] = r
			rows = append(append(rows, stepRows(string(rt), r, lb, note...)...),
				row{name: fmt.Sprintf("%-15s cache hits, 90→100%% tail, moves", rt), measured: fmt.Sprintf("%.0f%%, %.0f s, %d (%d evacuations)", 100*r.hit, r.tail, r.moves, r.evacuations)})
		}
		ours, prorl := res[backend.RouteGroup], res[backend.RouteProRL]
		if _, ok := res[backend.RouteGroup]; ok && w.name == "math" {
			// Math answers' lengths are drawn independently of their
			// prompts, so nothing known before a rollout runs predicts
			// them: this row is the gap's cause, not a result of ours.
			k := runStep(b, withCosts(w, drawnLength), m, fleet, backend.RouteGroup, true)
			rows = append(rows, stepRows("lengths known", k, lb)...)
		} else if ok {
			// An oracle: each rollout's drawn tokens and tool time, which no
			// trainer knows. What ordering alone can reach: the rest of the
			// gap is the longest rollout decoding in full batches, beside other
			// rollouts' prefills.
			k := runStep(b, withCosts(w, drawnDuration(m)), m, fleet, backend.RouteGroup, true)
			rows = append(rows, stepRows("durations known", k, lb)...)
		}
		rows = append(rows,
			row{name: "group-aware: makespan / lower bound", measured: fmt.Sprintf("%.2f×", ours.makespan/lb), target: "≤ 1.10×", ok: ours.makespan/lb <= 1.10},
			row{name: "group-aware speed-up over ProRL's routing", measured: fmt.Sprintf("%.2f×", prorl.makespan/ours.makespan), target: "≥ 1.25×", ok: prorl.makespan/ours.makespan >= 1.25},
			row{name: "group-aware slot use over the step", measured: fmt.Sprintf("%.0f%%", 100*ours.util), target: "≥ 95%", ok: ours.util >= 0.95},
			row{name: "group-aware slot use while work waits", measured: fmt.Sprintf("%.0f%%", 100*ours.utilWaiting), target: "≥ 95%", ok: ours.utilWaiting >= 0.95})
		printTable(fmt.Sprintf("One GRPO step, %s, %d rollouts; fleet 2×H100 + 2×half-speed, %d slots each (simulated s; lower bound = max(work %.0f s, longest rollout %.0f s; at full batches it takes %.0f s = %.2f×); time scale %g)",
			w.name, len(w.rollouts), m.Slots, work, crit, critFull, critFull/lb, m.TimeScale), rows)
	}
}

// oursRuns is how many times the step runs under ours, the run of median
// makespan reported (PRORL_BENCH_OURS_RUNS, default 3). One run's makespan
// on SWE-like moves by a tenth with which rollouts of cheap groups draw a
// long tool call after a late start (ten runs of the same build: 299–334
// s), so one run said more of luck than of the scheduling.
func oursRuns() int {
	if v, err := strconv.Atoi(os.Getenv("PRORL_BENCH_OURS_RUNS")); err == nil && v > 0 {
		return v
	}
	return 3
}

// medianRun runs step n times and returns the run of median makespan (the
// upper of the two middle ones when n is even) and the makespans' range.
func medianRun(n int, step func() utilResult) (med utilResult, lo, hi float64) {
	runs := make([]utilResult, n)
	for i := range runs {
		runs[i] = step()
	}
	sort.Slice(runs, func(a, b int) bool { return runs[a].makespan < runs[b].makespan })
	return runs[n/2], runs[0].makespan, runs[n-1].makespan
}

// mathEpochs is the math workload with prompt-dependent answer lengths, as
// two epochs over the same 64 prompts: each prompt's median answer is
// lognormal(1200, σ 0.65) and its answers lognormal around it (σ 0.47),
// in [50, 8192]; the overall spread, σ 0.8, is the math workload's.
// Splitting it two thirds between prompts is our assumption: RhymeRL
// (arXiv:2508.18588) reports responses to a prompt alike across epochs,
// with no figure to take.
func mathEpochs(groups, size, vocab int) (first, second *workload) {
	r := rand.New(rand.NewSource(2019))
	first = &workload{name: "math, epoch 1", size: size, vocab: vocab}
	second = &workload{name: "math, epoch 2", size: size, vocab: vocab}
	for g := 0; g < groups; g++ {
		p := randIDs(r, int(lognorm(r, 150, 0.4, 40, 1000)), vocab)
		median := lognorm(r, 1200, 0.65, 50, 8192)
		for _, w := range []*workload{first, second} {
			w.prompts = append(w.prompts, p)
			for i := 0; i < size; i++ {
				w.rollouts = append(w.rollouts, wlRollout{group: g, key: fmt.Sprintf("%s-m%d-r%d", w.name[len(w.name)-1:], g, i),
					turns: []wlTurn{{out: int(lognorm(r, median, 0.47, 50, 8192))}}})
			}
		}
	}
	return first, second
}

// BenchmarkLearnedLengths: the second epoch of a math workload whose
// answer lengths depend on the prompt, with group-aware routing, started
// and placed as the pipeline does without expected_tokens: with nothing
// known, and by the first epoch's lengths remembered per task
// (lengthhist, what [pipeline] expected_tokens_memory turns on). The
// memory is fed the first epoch's drawn lengths, which are what its
// rollouts generate on the simulator (the pipeline's own feeding is
// TestLearnedExpectedTokens).
func BenchmarkLearnedLengths(b *testing.B) {
	m, fleet := utilFleet()
	first, second := mathEpochs(64, 8, simllm.NewTokenizer().VocabSize())
	memo := lengthhist.New(1 << 10)
	taskOf := func(g int) []byte { return fmt.Appendf(nil, `{"question":"prompt %d"}`, g) }
	for _, ro := range first.rollouts {
		memo.Observe(lengthhist.KeyOf("math", taskOf(ro.group)), ro.turns[0].out)
	}
	learned := withCosts(second, func(ro wlRollout) float64 { return float64(memo.Expect(lengthhist.KeyOf("math", taskOf(ro.group)))) })
	work, crit, _ := lowerBound(second, m, fleet)
	lb := math.Max(work, crit)
	var rows []row
	// Three runs each, interleaved: one run's makespan moves by up to 10%
	// with the machine's load (the simulator runs in scaled real time).
	spans := map[string][]float64{}
	for range 3 {
		for _, v := range []struct {
			name string
			w    *workload
		}{{"nothing known", second}, {"last epoch's", learned}} {
			r := runStep(b, v.w, m, fleet, backend.RouteGroup, true)
			spans[v.name] = append(spans[v.name], r.makespan)
			rows = append(rows, stepRows(v.name, r, lb)...)
		}
	}
	none, hist := spans["nothing known"], spans["last epoch's"]
	slices.Sort(none)
	slices.Sort(hist)
	rows = append(rows, row{name: "speed-up from the lengths remembered, medians", measured: fmt.Sprintf("%.2f× (%.0f s against %.0f s)", none[1]/hist[1], hist[1], none[1])},
		row{name: "  runs: nothing known / last epoch's", measured: fmt.Sprintf("%.0f–%.0f s / %.0f–%.0f s", none[0], none[2], hist[0], hist[2])})
	printTable(fmt.Sprintf("Expected tokens from history: epoch 2 of math with prompt-dependent lengths, %d rollouts, group-aware; fleet as GRPOStep (lower bound = max(work %.0f s, longest rollout %.0f s); time scale %g)",
		len(second.rollouts), work, crit, m.TimeScale), rows)
}
