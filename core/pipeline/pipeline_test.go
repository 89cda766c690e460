package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/engine"
	"github.com/prorl/prorl/core/groups"
	"github.com/prorl/prorl/core/lengthhist"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/simllm"
	"github.com/prorl/prorl/internal/simllm/taskscripts"

	"github.com/prorl/prorl/internal/testbin"
)

var mathPlugin string

func TestMain(m *testing.M) {
	dir, cleanup := testbin.ForMain("pipeline", map[string]string{"prorl-math": "github.com/prorl/prorl/plugins/math"})
	mathPlugin = filepath.Join(dir, "prorl-math")
	code := m.Run()
	cleanup()
	os.Exit(code)
}

type fixture struct {
	p     *Pipeline
	store *store.Memory
	pool  *backend.Pool
}

func newFixture(t *testing.T, cfgf func(*config.Config), sim *simllm.Server) *fixture {
	t.Helper()
	f := newStopped(t, cfgf, sim)
	f.p.Start()
	return f
}

// newStopped builds a pipeline whose workers have not started yet.
func newStopped(t *testing.T, cfgf func(*config.Config), sim *simllm.Server, depsf ...func(*Deps)) *fixture {
	t.Helper()
	// No python tool: these tests run without a sandbox manager.
	return newWithPlugin(t, map[string]any{"python": false}, cfgf, sim, depsf...)
}

// newWithPlugin builds a stopped pipeline whose math plugin has the
// configuration pc.
func newWithPlugin(t *testing.T, pc map[string]any, cfgf func(*config.Config), sim *simllm.Server, depsf ...func(*Deps)) *fixture {
	t.Helper()
	cfg := config.Default()
	cfg.Backends.WaitForBackend.Duration = 200 * time.Millisecond
	if cfgf != nil {
		cfgf(cfg)
	}
	log := hclog.NewNullLogger()
	// The plugin's sockets in a directory removed after the test (short:
	// t.TempDir's path is too long for sockets under it).
	sockDir, err := os.MkdirTemp("", "pl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	plugs, err := pluginhost.Start(context.Background(), log, map[string]*config.Plugin{"math": {
		Enabled: true, Path: mathPlugin, Config: pc, StartTimeout: config.Duration{Duration: 20 * time.Second}, MaxRestarts: 5, RestartWindow: config.Duration{Duration: time.Minute},
	}}, nil, pluginhost.Options{Instance: "test", SocketDir: sockDir})
	if err != nil {
		t.Fatal(err)
	}
	st := store.NewMemory(1000)
	pool := backend.NewPool(log)
	if sim != nil {
		ts := httptest.NewServer(sim)
		t.Cleanup(ts.Close)
		c, _ := engine.NewClient("vllm", ts.URL, "")
		if _, err := pool.Add(&backend.Backend{URL: ts.URL, Protocol: "vllm", Client: c}); err != nil {
			t.Fatal(err)
		}
	}
	d := Deps{Cfg: cfg, Log: log, Plugins: plugs, Pool: pool, Store: st}
	for _, f := range depsf {
		f(&d)
	}
	p, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Shutdown(ctx)
		plugs.Stop()
	})
	return &fixture{p: p, store: st, pool: pool}
}

func mathTask() json.RawMessage {
	return json.RawMessage(`{"domain":"math","question":"What is 17 + 25?","answer":"42"}`)
}

func (f *fixture) submit(t *testing.T, n int, mut func(*Request)) []*Rollout {
	t.Helper()
	reqs := make([]Request, n)
	for i := range reqs {
		reqs[i] = Request{GroupID: "g", Index: i, Domain: "math", Task: mathTask()}
		if mut != nil {
			mut(&reqs[i])
		}
	}
	rs, err := f.p.Submit(reqs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func (f *fixture) result(t *testing.T, r *Rollout) *trajectory.Result {
	t.Helper()
	select {
	case <-r.Done():
	case <-time.After(60 * time.Second):
		t.Fatalf("rollout %s never finished", r.ID)
	}
	res, ok := f.store.Get(r.ID)
	if !ok {
		t.Fatalf("rollout %s finished but not stored", r.ID)
	}
	return res
}

func sim(latency time.Duration) *simllm.Server {
	return simllm.New(simllm.Options{Scripts: []simllm.Script{taskscripts.Script("What is 17 + 25?", "42", taskscripts.Options{ThinkTurns: 1})}, CorrectRate: 1, TokenLatency: latency})
}

// Queueing is not counted against the timeout: ten rollouts through one run
// worker take far longer than the timeout in total, yet none times out.
func TestTimeoutCountsOnlyStageTime(t *testing.T) {
	const timeout = 2 * time.Second
	// About 100 generated tokens a rollout at 4 ms each: ~0.4 s in stage, ~4 s for all ten.
	f := newFixture(t, func(c *config.Config) { c.Pipeline.RunWorkers = 1 }, sim(4*time.Millisecond))
	rs := f.submit(t, 10, func(r *Request) { r.Timeout = timeout })
	var last *trajectory.Result
	for _, r := range rs {
		res := f.result(t, r)
		if res.Status != trajectory.StatusCompleted || res.Reward != 1 {
			t.Fatalf("%s: %s %+v", r.ID, res.Status, res.Failure)
		}
		if in := res.Timing.InitMS + res.Timing.RunMS + res.Timing.EvalMS; in > float64(timeout.Milliseconds()) {
			t.Fatalf("in-stage time %.0f ms exceeds the timeout", in)
		}
		if last == nil || res.Timing.TotalMS > last.Timing.TotalMS {
			last = res
		}
	}
	if last.Timing.TotalMS < float64(timeout.Milliseconds()) {
		t.Fatalf("the last rollout took %.0f ms in all: the test did not queue past the timeout", last.Timing.TotalMS)
	}
}

func TestTimeoutReportsPartialTrajectory(t *testing.T) {
	f := newFixture(t, nil, sim(20*time.Millisecond))
	rs := f.submit(t, 1, func(r *Request) { r.Timeout = 1500 * time.Millisecond })
	res := f.result(t, rs[0])
	if res.Status != trajectory.StatusTimeout || res.Failure.Reason != trajectory.ReasonTimeout || res.Failure.Stage != trajectory.StageRun {
		t.Fatalf("%s %+v", res.Status, res.Failure)
	}
	if res.Tokens.PromptLen == 0 || len(res.Messages) < 2 {
		t.Fatalf("partial trajectory lost: prompt_len %d, %d messages", res.Tokens.PromptLen, len(res.Messages))
	}
}

func TestCancelQueuedAndRunning(t *testing.T) {
	// One run worker and slow tokens: one rollout generates, the others wait for the worker.
	f := newFixture(t, func(c *config.Config) { c.Pipeline.RunWorkers = 1 }, sim(50*time.Millisecond))
	rs := f.submit(t, 3, nil)
	var running, queued *Rollout
	deadline := time.Now().Add(30 * time.Second)
	for (running == nil || queued == nil) && time.Now().Before(deadline) {
		running, queued = nil, nil
		for _, r := range rs {
			switch sm := r.summary(); {
			case sm.Status == "running" && sm.Stage == trajectory.StageRun:
				running = r
			case sm.Status == "queued" && sm.Stage == trajectory.StageRun:
				queued = r // finished init, waiting for the run worker
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if running == nil || queued == nil {
		t.Fatal("want one running and one queued rollout")
	}
	if !f.p.Cancel(queued.ID, "test") {
		t.Fatal("cancel queued")
	}
	select {
	case <-queued.Done(): // reported at once, not when a worker frees up
	case <-time.After(time.Second):
		t.Fatal("a queued rollout's cancellation was not reported at once")
	}
	f.p.Cancel(running.ID, "test")
	for _, r := range []*Rollout{queued, running} {
		res := f.result(t, r)
		if res.Status != trajectory.StatusCancelled || res.Failure.Reason != trajectory.ReasonCancelled || res.Failure.Message != "test" {
			t.Fatalf("%s: %s %+v", r.ID, res.Status, res.Failure)
		}
	}
	if f.p.Cancel(running.ID, "again") {
		t.Fatal("a finished rollout was cancelled twice")
	}
	if st := f.store.Stats(); st.LastSeq < 2 {
		t.Fatalf("results not stored: %+v", st)
	}
}

// A cancel that arrives as a stage finishes cannot interrupt it; the
// rollout must still end cancelled there, not go on to the next stage (a
// group cancelled under load once saw half its rollouts complete).
func TestCancelAsStageFinishes(t *testing.T) {
	f := newFixture(t, nil, nil) // started: work needs the pipeline's base context
	r := f.p.newRollout("r-late", Request{GroupID: "g", Domain: "math", Task: mathTask(), Timeout: time.Minute}, 1, time.Now())
	if err := f.store.Submit([]store.Pending{{ID: r.ID, Attempt: 1, Request: []byte(`{}`), SubmittedAt: time.Now()}}, nil); err != nil {
		t.Fatal(err)
	}
	f.p.mu.Lock()
	f.p.track(r)
	f.p.mu.Unlock()
	next := newHandoff(1)
	f.p.work(r, 0, func(context.Context, *Rollout) error {
		f.p.Cancel(r.ID, "late") // the stage's work is already done
		return nil
	}, next)
	if next.len() != 0 {
		t.Fatal("a cancelled rollout went on to the next stage")
	}
	res := f.result(t, r)
	if res.Status != trajectory.StatusCancelled || res.Failure.Stage != trajectory.StageInit || res.Failure.Message != "late" {
		t.Fatalf("%s %+v", res.Status, res.Failure)
	}
}

func TestNoBackend(t *testing.T) {
	f := newFixture(t, nil, nil)
	res := f.result(t, f.submit(t, 1, nil)[0])
	if res.Status != trajectory.StatusFailed || res.Failure.Reason != trajectory.ReasonBackendUnavailable || res.Failure.Stage != trajectory.StageRun {
		t.Fatalf("%s %+v", res.Status, res.Failure)
	}
}

func TestCancelBeforePolicy(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Pipeline.RunWorkers = 1 }, sim(10*time.Millisecond))
	old := f.submit(t, 2, nil)
	f.p.SetPolicy(3)
	fresh := f.submit(t, 1, nil)
	if n := f.p.CancelWhere(func(r *Rollout) bool { return r.PolicyAt() < 3 }, "stale"); n != 2 {
		t.Fatalf("cancelled %d", n)
	}
	for _, r := range old {
		if res := f.result(t, r); res.Status != trajectory.StatusCancelled {
			t.Fatalf("old rollout %s", res.Status)
		}
	}
	res := f.result(t, fresh[0])
	if res.Status != trajectory.StatusCompleted || res.PolicyVersion != 3 || res.Turns[0].PolicyVersion != 3 {
		t.Fatalf("fresh rollout: %s policy %d", res.Status, res.PolicyVersion)
	}
}

// A submission's key goes to the store with its rollouts, naming them; a
// key already recorded refuses the submission whole, and the queue's room
// it reserved is given back.
func TestSubmitKeyed(t *testing.T) {
	f := newStopped(t, func(c *config.Config) { c.Pipeline.InitQueue = 4 }, nil)
	reqs := []Request{{GroupID: "g", Domain: "math", Task: mathTask()}, {GroupID: "g", Index: 1, Domain: "math", Task: mathTask()}}
	rs, err := f.p.Submit(reqs, &store.Keyed{Key: "k", Sub: store.Submission{GroupID: "g"}})
	if err != nil {
		t.Fatal(err)
	}
	sub, ok := f.store.Idempotent("k")
	if !ok || len(sub.RolloutIDs) != 2 || sub.RolloutIDs[0] != rs[0].ID || sub.RolloutIDs[1] != rs[1].ID {
		t.Fatalf("key records %+v for %s, %s", sub, rs[0].ID, rs[1].ID)
	}
	if _, err := f.p.Submit(reqs, &store.Keyed{Key: "k"}); !errors.Is(err, store.ErrKeyExists) {
		t.Fatalf("a recorded key: %v", err)
	}
	// Two submitted, two refused: the queue (4) still has room for two.
	if _, err := f.p.Submit(reqs, nil); err != nil {
		t.Fatalf("the refused submission kept its queue room: %v", err)
	}
	f.p.Start() // so the cleanup's Shutdown finds its stages
}

func TestQueueFull(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Pipeline.InitQueue = 4; c.Pipeline.InitWorkers = 1 }, sim(0))
	if _, err := f.p.Submit(make([]Request, 5), nil); err == nil {
		t.Fatal("accepted more than the queue holds")
	}
}

// Higher dispatch priority starts first, submission order within one
// priority. One worker per stage keeps the finish order the start order.
func TestDispatchPriority(t *testing.T) {
	f := newStopped(t, func(c *config.Config) {
		c.Pipeline.InitWorkers, c.Pipeline.RunWorkers, c.Pipeline.EvalWorkers = 1, 1, 1
	}, sim(0))
	prio := func(p int) func(*Request) { return func(r *Request) { r.Priority = p } }
	low := f.submit(t, 3, prio(0))
	high := f.submit(t, 3, prio(90))
	mid := f.submit(t, 3, prio(50))
	f.finishInline()
	f.p.Start()
	want := slices.Concat(high, mid, low)
	if order := f.finishOrder(t, want); !slices.Equal(order, ids(want)) {
		t.Fatalf("start order %v, want high, mid, low in submission order %v", order, ids(want))
	}
}

// Within a priority the larger expected_tokens starts first (LPT), then
// submission order; a dynamic-sampling batch keeps submission order.
func TestStartOrderExpectedTokens(t *testing.T) {
	f := newStopped(t, func(c *config.Config) {
		c.Pipeline.InitWorkers, c.Pipeline.RunWorkers, c.Pipeline.EvalWorkers = 1, 1, 1
	}, sim(0))
	expect := func(n int, dynamic string) func(*Request) {
		return func(r *Request) {
			r.ExpectedTokens, r.Dynamic, r.DynamicK = n, dynamic, 99
			r.GroupID = fmt.Sprintf("g%d%s", n, dynamic)
		}
	}
	short := f.submit(t, 2, expect(100, ""))
	long := f.submit(t, 2, expect(3000, ""))
	dynShort := f.submit(t, 1, expect(100, "d"))
	unknown := f.submit(t, 1, expect(0, ""))
	mid := f.submit(t, 2, expect(1000, ""))
	dynLong := f.submit(t, 1, expect(3000, "d"))
	f.finishInline()
	f.p.Start()
	want := slices.Concat(long, mid, short, dynShort, unknown, dynLong)
	if order := f.finishOrder(t, want); !slices.Equal(order, ids(want)) {
		t.Fatalf("start order %v, want %v", order, ids(want))
	}
}

// finishInline has the workers record their results themselves, as
// finish does when maxFinishing results wait already: with one worker per
// stage the store's order is then the start order. Before Start.
func (f *fixture) finishInline() { f.p.finishing = make(chan struct{}) }

// finishOrder waits for rs and returns their ids in the order they were
// stored (with one worker per stage and finishInline, the start order).
func (f *fixture) finishOrder(t *testing.T, rs []*Rollout) []string {
	t.Helper()
	type stored struct {
		seq uint64
		id  string
	}
	var all []stored
	for _, r := range rs {
		all = append(all, stored{f.result(t, r).Seq, r.ID})
	}
	slices.SortFunc(all, func(a, b stored) int { return cmp.Compare(a.seq, b.seq) })
	order := make([]string, len(all))
	for i, s := range all {
		order[i] = s.id
	}
	return order
}

func ids(rs []*Rollout) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// A group with an early stop cancels its unfinished rollouts once enough
// usable results are in; another group is untouched; each rollout ends once.
func TestEarlyStop(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Pipeline.RunWorkers = 2 }, sim(5*time.Millisecond))
	base := f.store.Stats().LastSeq
	grp := f.submit(t, 8, func(r *Request) { r.GroupID, r.EarlyStopMin = "early", 2 })
	other := f.submit(t, 2, func(r *Request) { r.GroupID = "other" })
	usable, stopped := 0, 0
	for _, r := range grp {
		res := f.result(t, r)
		switch {
		case groups.Usable(res):
			usable++
		case res.Status == trajectory.StatusCancelled && res.Failure.Reason == trajectory.ReasonEarlyStopped:
			stopped++
		default:
			t.Fatalf("%s: %s %+v", r.ID, res.Status, res.Failure)
		}
	}
	// Two run workers: at most the two generating and two being scored can
	// still finish after the second usable result.
	if usable < 2 || stopped < 2 || usable+stopped != 8 {
		t.Fatalf("usable %d, early-stopped %d of 8", usable, stopped)
	}
	for _, r := range other {
		if res := f.result(t, r); res.Status != trajectory.StatusCompleted {
			t.Fatalf("the other group was touched: %s %+v", res.Status, res.Failure)
		}
	}
	if st := f.store.Stats(); st.LastSeq-base != 10 {
		t.Fatalf("%d results stored for 10 rollouts", st.LastSeq-base)
	}
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	if !f.p.rules.Idle() {
		t.Fatalf("early-stop bookkeeping left: %+v", f.p.rules)
	}
}

// TestLearnedExpectedTokens: a task's rollouts submitted without
// expected_tokens are expected to generate what its earlier rollouts did
// (the same task re-sent with other whitespace included), and start by it;
// a trainer's estimate, a dynamic-sampling batch and a memory of 0 are
// left alone.
func TestLearnedExpectedTokens(t *testing.T) {
	f := newFixture(t, nil, sim(0))
	var generated []int
	for _, r := range f.submit(t, 2, nil) {
		generated = append(generated, f.result(t, r).GeneratedTokens())
	}
	want := int(float64(generated[0]+generated[1])/2 + 0.5)
	if want == 0 {
		t.Fatal("the rollouts generated nothing")
	}
	respaced := json.RawMessage("{ \"domain\": \"math\",\n \"question\": \"What is 17 + 25?\", \"answer\": \"42\" }")
	tests := []struct {
		name string
		mut  func(*Request)
		want int
	}{
		{"same task", nil, want},
		{"same task, other whitespace", func(r *Request) { r.Task = respaced }, want},
		{"other task", func(r *Request) {
			r.Task = json.RawMessage(`{"domain":"math","question":"What is 1 + 1?","answer":"2"}`)
		}, 0},
		{"trainer's estimate", func(r *Request) { r.ExpectedTokens = 7 }, 0},
		{"dynamic sampling", func(r *Request) { r.Dynamic, r.DynamicK = "d", 1 }, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := f.submit(t, 1, tc.mut)
			if got := rs[0].Req.LearnedTokens; got != tc.want {
				t.Fatalf("learned_tokens %d, want %d (generated %v)", got, tc.want, generated)
			}
			f.result(t, rs[0])
		})
	}
	off := newFixture(t, func(c *config.Config) { c.Pipeline.ExpectedTokensMemory = 0 }, sim(0))
	off.result(t, off.submit(t, 1, nil)[0])
	if got := off.submit(t, 1, nil)[0].Req.LearnedTokens; got != 0 {
		t.Fatalf("memory off: learned_tokens %d", got)
	}
}

// TestLearnedTokensSurviveRestart: what a host learned of a task's lengths
// is there after it stops and starts again (LengthsFile), and a damaged
// file is ignored, not fatal.
func TestLearnedTokensSurviveRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "prorl.db.lengths")
	withFile := func(d *Deps) { d.LengthsFile = file }
	first := newStopped(t, nil, sim(0), withFile)
	first.p.Start()
	learned := first.result(t, first.submit(t, 1, nil)[0]).GeneratedTokens()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	first.p.Shutdown(ctx)
	second := newStopped(t, nil, sim(0), withFile)
	second.p.Start()
	if got := second.submit(t, 1, nil)[0].Req.LearnedTokens; got != learned || got == 0 {
		t.Fatalf("after a restart learned_tokens %d, want %d", got, learned)
	}
	if err := os.WriteFile(file, []byte("damaged"), 0o600); err != nil {
		t.Fatal(err)
	}
	third := newStopped(t, nil, sim(0), withFile)
	third.p.Start()
	if got := third.submit(t, 1, nil)[0].Req.LearnedTokens; got != 0 {
		t.Fatalf("from a damaged file learned_tokens %d", got)
	}
}

// TestStartOrderLearnedTokens: without expected_tokens, a task known to
// run long starts before one known to run short, and both before unknown.
func TestStartOrderLearnedTokens(t *testing.T) {
	f := newStopped(t, func(c *config.Config) {
		c.Pipeline.InitWorkers, c.Pipeline.RunWorkers, c.Pipeline.EvalWorkers = 1, 1, 1
	}, sim(0))
	task := func(q string) json.RawMessage {
		return json.RawMessage(`{"domain":"math","question":"What is 17 + 25?","answer":"42","id":"` + q + `"}`)
	}
	f.p.lengths.Observe(lengthhist.KeyOf("math", task("long")), 3000)
	f.p.lengths.Observe(lengthhist.KeyOf("math", task("short")), 100)
	of := func(q string) func(*Request) {
		return func(r *Request) { r.Task, r.GroupID = task(q), q }
	}
	unknown := f.submit(t, 1, of("new"))
	short := f.submit(t, 2, of("short"))
	long := f.submit(t, 2, of("long"))
	f.finishInline()
	f.p.Start()
	want := slices.Concat(long, short, unknown)
	if order := f.finishOrder(t, want); !slices.Equal(order, ids(want)) {
		t.Fatalf("start order %v, want long, short, unknown %v", order, ids(want))
	}
}

// TestShutdownCancelsStages: stage contexts are not children of the
// pipeline's base context, so stopping must reach the stages in flight
// itself. Rollouts mid-generation (an hour's timeout)
// end cancelled, each reported, and Shutdown returns in its grace time,
// not the rollouts' timeout. Tokens at 250 ms keep all four in the run
// stage for seconds, however loaded the machine.
func TestShutdownCancelsStages(t *testing.T) {
	f := newFixture(t, nil, sim(250*time.Millisecond))
	rs := f.submit(t, 4, func(r *Request) { r.Timeout = time.Hour })
	deadline := time.Now().Add(30 * time.Second)
	for f.p.activeStage[1].Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := f.p.activeStage[1].Load(); n < 4 {
		t.Fatalf("%d rollouts in the run stage, want 4", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace: cancel everything now
	start := time.Now()
	f.p.Shutdown(ctx)
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("Shutdown took %s", el)
	}
	for _, r := range rs {
		res := f.result(t, r)
		if res.Status != trajectory.StatusCancelled || res.Failure == nil || res.Failure.Message != "host shutting down" {
			t.Fatalf("rollout %s: %s %+v, want cancelled by the shutdown", r.ID, res.Status, res.Failure)
		}
	}
}

// TestStageBounds: each stage holds at most its workers, at most its queue
// wait having left the stage before, and beyond that a rollout waits
// holding its init slot, so later ones stay queued for init (no sandbox,
// no plugin call for a rollout that cannot run). Tokens at a second keep
// the run stage full for the whole check; the rollouts are cancelled
// after, each reported with the stage it was in or waiting for.
func TestStageBounds(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		init, run, runQueue  int
		n                    int
		wantInitQ, wantRunQ  int
		wantInStage, waitRun int // in the run stage; waiting for it holding an init slot
	}{
		{name: "queue then backpressure", init: 2, run: 1, runQueue: 1, n: 8, wantInitQ: 4, wantRunQ: 1, wantInStage: 1, waitRun: 2},
		{name: "wider", init: 4, run: 2, runQueue: 3, n: 12, wantInitQ: 3, wantRunQ: 3, wantInStage: 2, waitRun: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *config.Config) {
				c.Pipeline.InitWorkers, c.Pipeline.RunWorkers, c.Pipeline.RunQueue = tc.init, tc.run, tc.runQueue
			}, sim(time.Second))
			rs := f.submit(t, tc.n, func(r *Request) { r.Timeout = time.Hour })
			deadline := time.Now().Add(30 * time.Second)
			for {
				st := f.p.Stats()
				if st.ActiveRun > tc.run || st.RunQueue > tc.runQueue || st.ActiveInit > tc.init {
					t.Fatalf("over a bound: %+v", st)
				}
				// And every rollout past its init (ActiveInit 0) shows the stage
				// its cancellation will report: on a loaded machine an init
				// worker's plugin call can still be running when the queues
				// have settled.
				inRun := 0
				for _, s := range f.p.Active() {
					if s.Stage == trajectory.StageRun {
						inRun++
					}
				}
				if st.ActiveRun == tc.wantInStage && st.RunQueue == tc.wantRunQ && st.InitQueue == tc.wantInitQ &&
					st.ActiveInit == 0 && inRun == tc.wantInStage+tc.wantRunQ+tc.waitRun {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("stats %+v, want %d running, %d queued for run, %d queued for init", st, tc.wantInStage, tc.wantRunQ, tc.wantInitQ)
				}
				time.Sleep(5 * time.Millisecond)
			}
			f.p.CancelWhere(func(*Rollout) bool { return true }, "checked")
			stages := map[string]int{}
			for _, r := range rs {
				res := f.result(t, r)
				if res.Status != trajectory.StatusCancelled || res.Failure == nil || res.Failure.Message != "checked" {
					t.Fatalf("rollout %s: %s %+v", r.ID, res.Status, res.Failure)
				}
				stages[res.Failure.Stage]++
			}
			want := map[string]int{trajectory.StageInit: tc.wantInitQ, trajectory.StageRun: tc.wantInStage + tc.wantRunQ + tc.waitRun}
			if !maps.Equal(stages, want) {
				t.Fatalf("cancelled in stages %v, want %v", stages, want)
			}
		})
	}
}

// TestMarkedCancelledStartsNoStage: a rollout marked by a cancellation
// still under way (cancelWhere marks all before it stops any) does not
// start the stage a freed worker hands it, and is reported waiting for it.
func TestMarkedCancelledStartsNoStage(t *testing.T) {
	f := newFixture(t, nil, sim(time.Millisecond))
	r := f.p.newRollout("r-marked", Request{Domain: "math", Timeout: time.Minute}, 1, time.Now())
	r.stage = trajectory.StageRun // as work leaves one waiting for the run queue
	r.cancelled.Store(&trajectory.Failure{Reason: trajectory.ReasonCancelled, Message: "marked"})
	started := false
	f.p.work(r, 1, func(context.Context, *Rollout) error { started = true; return nil }, f.p.evalQ)
	if started {
		t.Fatal("the stage started for a rollout marked cancelled")
	}
	res := f.result(t, r)
	if res.Status != trajectory.StatusCancelled || res.Failure == nil || res.Failure.Stage != trajectory.StageRun || res.Failure.Message != "marked" {
		t.Fatalf("got %s %+v, want cancelled in stage run with the mark's message", res.Status, res.Failure)
	}
}

// slowStore holds every Finish until released, counting those waiting.
type slowStore struct {
	*store.Memory
	release chan struct{}
	waiting atomic.Int64
}

func (s *slowStore) Finish(r *trajectory.Result) error {
	s.waiting.Add(1)
	<-s.release
	s.waiting.Add(-1)
	return s.Memory.Finish(r)
}

// A result waiting for the store's commit does not hold the eval worker
// that evaluated it, up to maxFinishing (here 2) results; past that the
// worker waits, so a slow store still holds the stages back.
func TestFinishFreesWorker(t *testing.T) {
	var slow *slowStore
	f := newStopped(t, func(c *config.Config) { c.Pipeline.EvalWorkers = 1 }, sim(time.Millisecond), func(d *Deps) {
		slow = &slowStore{Memory: d.Store.(*store.Memory), release: make(chan struct{})}
		d.Store = slow
	})
	var once sync.Once
	release := func() { once.Do(func() { close(slow.release) }) }
	t.Cleanup(release) // before the pipeline's shutdown, which waits for them
	f.p.finishing = make(chan struct{}, 2)
	f.p.Start()
	rs := f.submit(t, 4, nil)
	deadline := time.Now().Add(60 * time.Second)
	// Two results wait off the worker; the third waits in it.
	for slow.waiting.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d results reached the store; want 3 with one eval worker (two of them off it)", slow.waiting.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if n := slow.waiting.Load(); n != 3 {
		t.Fatalf("%d results waiting for the store, want 3: two off the worker and the one holding it", n)
	}
	release()
	for _, r := range rs {
		if res := f.result(t, r); res.Status != trajectory.StatusCompleted {
			t.Fatalf("rollout %s: %s %+v", r.ID, res.Status, res.Failure)
		}
	}
}

// crashingStore is a durable store whose results are never committed:
// the host "crashes" before any Finish reaches the file.
type crashingStore struct {
	*store.Bolt
	crashed chan struct{}
}

func (s *crashingStore) Finish(*trajectory.Result) error {
	<-s.crashed
	return errors.New("the host crashed before this commit")
}

// TestCancelSurvivesCrash: a cancellation is stored before it is answered,
// so a host that crashes before the cancelled rollout's result is stored
// reports it cancelled when it restarts, and does not run it again; the
// rollout beside it, never cancelled, runs again.
func TestCancelSurvivesCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prorl.db")
	b, err := store.OpenBolt(path, 100)
	if err != nil {
		t.Fatal(err)
	}
	cs := &crashingStore{Bolt: b, crashed: make(chan struct{})}
	first := newStopped(t, nil, sim(0), func(d *Deps) { d.Store = cs })
	var crash sync.Once
	t.Cleanup(func() { crash.Do(func() { close(cs.crashed) }) }) // before first's shutdown, which waits for its results
	first.p.Start()
	rs := first.submit(t, 2, nil)
	go first.p.Cancel(rs[0].ID, "cancelled by request") // its report never commits
	deadline := time.Now().Add(10 * time.Second)
	for {
		un, err := b.Unfinished()
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(un, func(p store.Pending) bool { return p.ID == rs[0].ID }); i >= 0 && un[i].Cancelled != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancellation was never stored")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := b.Close(); err != nil { // the crash
		t.Fatal(err)
	}
	crash.Do(func() { close(cs.crashed) })

	b2, err := store.OpenBolt(path, 100)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b2.Close() })
	second := newStopped(t, nil, sim(0), func(d *Deps) { d.Store = b2 })
	rerun, interrupted, cancelled, err := second.p.Recover("rerun")
	if err != nil || rerun != 1 || interrupted != 0 || cancelled != 1 {
		t.Fatalf("recover: rerun %d, interrupted %d, cancelled %d, %v; want 1, 0, 1", rerun, interrupted, cancelled, err)
	}
	res, ok := b2.Get(rs[0].ID)
	if !ok || res.Status != trajectory.StatusCancelled || res.Failure.Reason != trajectory.ReasonCancelled || res.Failure.Message != "cancelled by request" {
		t.Fatalf("the cancelled rollout after the restart: %+v %v", res, ok)
	}
	second.p.Start()
	r, _ := second.p.Lookup(rs[1].ID)
	if r == nil {
		t.Fatal("the other rollout is not running again")
	}
	<-r.Done()
	if res, _ := b2.Get(rs[1].ID); res == nil || res.Status != trajectory.StatusCompleted || res.Attempt != 2 {
		t.Fatalf("the other rollout: %+v, want completed, attempt 2", res)
	}
}

// TestLogprobsAligned: a result whose generations all came with logprobs is
// trained on; one with a generation without them is masked (mask_sample).
func TestLogprobsAligned(t *testing.T) {
	for _, tc := range []struct {
		turns []trajectory.Turn
		want  bool
	}{
		{nil, true},
		{[]trajectory.Turn{{ResponseIDs: []int{1, 2}, Logprobs: []float64{-1, -2}}}, true},
		{[]trajectory.Turn{{ResponseIDs: []int{1, 2}, Logprobs: []float64{-1, -2}}, {ResponseIDs: []int{3}}}, false},
	} {
		if got := logprobsAligned(&trajectory.Result{Turns: tc.turns}); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.turns, got, tc.want)
		}
	}
}
