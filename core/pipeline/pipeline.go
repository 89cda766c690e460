// Package pipeline is the three-stage assembly line of rollouts: init
// (plugin Prepare, sandbox), run (the agent loop on one sticky backend) and
// eval (plugin Evaluate), each with its own worker pool and bounded queue so
// slow scoring never blocks generation. A rollout's timeout counts only the
// time it spends inside stages.
package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/agent"
	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/flightcache"
	"github.com/prorl/prorl/core/gateway"
	"github.com/prorl/prorl/core/groups"
	"github.com/prorl/prorl/core/lengthhist"
	"github.com/prorl/prorl/core/metrics"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/policy"
	"github.com/prorl/prorl/core/sandbox"
	"github.com/prorl/prorl/core/sessions"
	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/core/tally"
	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/tokenizer/harmony"
	"github.com/prorl/prorl/core/toolcall"
	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/sdk/wire"
)

// Errors of Submit.
var (
	ErrQueueFull    = errors.New("the init queue is full")
	ErrShuttingDown = errors.New("the host is shutting down")
	ErrStore        = errors.New("the result store failed")
	// ErrEvalBusy: every evaluation slot ([pipeline] eval_workers) is taken.
	ErrEvalBusy = errors.New("every evaluation slot is in use")
)

// Deps are the pipeline's collaborators.
type Deps struct {
	Cfg     *config.Config
	Log     hclog.Logger
	Plugins *pluginhost.Manager
	Pool    *backend.Pool
	Store   store.Store
	Metrics *metrics.Metrics
	// Sandboxes is nil when the host has sandboxes disabled.
	Sandboxes *sandbox.Manager
	// GatewaySocket is the host path of the gateway's Unix socket, bound
	// into the sandboxes of harness rollouts ("": no harness can run).
	GatewaySocket string
	// Remote, when set, runs every rollout elsewhere (a coordinator's
	// nodes) instead of through the stages here; Workers of them at once.
	Remote        Executor
	RemoteWorkers int
	// LengthsFile keeps the learned expected tokens (lengthhist) across
	// restarts: loaded by New, saved every lengthsSaveEvery and at
	// Shutdown. "": in memory only.
	LengthsFile string
}

// expectedSources label prorl_expected_tokens_total (bySource's order).
var expectedSources = [3]string{"trainer", "learned", "none"}

// lengthsSaveEvery is how often learned lengths are saved while they
// change: a crash loses at most this much of them.
const lengthsSaveEvery = time.Minute

// Pipeline runs rollouts.
type Pipeline struct {
	d      Deps
	runner *agent.Runner
	// prepares are the plugins' answers for tasks that depend on nothing
	// else (see prepare).
	prepares *flightcache.Cache[*pluginhost.Prepared]
	tools    toolLists
	// gate is the policy: its version and the pause for weight sync.
	gate *policy.Gate

	initQ        *startQueue
	runQ, evalQ  *handoff
	tally        tally.Tally
	initReserved atomic.Int64 // queued in init, including reservations
	activeStage  [3]atomic.Int64

	mu     sync.Mutex
	active map[string]*Rollout
	// rules counts the groups submitted with early stop and the
	// dynamic-sampling batches (p.mu).
	rules *groups.Rules

	// lengths remembers what each task's rollouts generated (nil: off).
	lengths *lengthhist.Memo
	// bySource counts submitted rollouts by where their expected tokens
	// came from: the trainer, the task's history, or nowhere.
	bySource [3]atomic.Int64

	splicers sync.Map // backend id -> *tokenizer.Splicer
	gw       *gateway.Gateway
	harness  *sessions.Harnesses

	// finishing bounds the results being recorded off their workers
	// (finish): past it, the workers wait for the store again.
	finishing chan struct{}
	// evalSlots bounds evaluations at once: the eval stage's and /v1/evaluate's.
	evalSlots chan struct{}

	closing atomic.Bool
	base    context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// defaultDeadlineTimeouts is a sample's retry deadline, in rollout
// timeouts, when neither the request nor [pipeline.retry] sets one.
const defaultDeadlineTimeouts = 3

// maxFinishing is how many results may wait for the store's commit
// without holding a worker: about two of its largest batches
// (store.resultBatchMax), so a slow disk holds memory for as many at most
// before its backpressure reaches the stages again.
const maxFinishing = 2048

// New builds a pipeline; Start runs its workers.
func New(d Deps) (*Pipeline, error) {
	parser, err := toolcall.New(d.Cfg.Agent.ToolCallFormat)
	if err != nil {
		return nil, err
	}
	p := &Pipeline{
		d:         d,
		initQ:     newStartQueue(d.Cfg.Pipeline.InitQueue),
		runQ:      newHandoff(d.Cfg.Pipeline.RunQueue),
		evalQ:     newHandoff(d.Cfg.Pipeline.EvalQueue),
		finishing: make(chan struct{}, maxFinishing),
		evalSlots: make(chan struct{}, max(1, d.Cfg.Pipeline.EvalWorkers)),
		active:    map[string]*Rollout{},
		rules:     groups.New(d.Log),
		gw:        gateway.New(d.Log.Named("gateway"), d.Cfg.Server.MaxBodyBytes),
		// A group's rollouts start together: a few hundred tasks cover the
		// groups starting at once, and bound what large tasks (SWE) hold.
		prepares: flightcache.New[*pluginhost.Prepared](256),
		lengths:  lengthhist.New(d.Cfg.Pipeline.ExpectedTokensMemory),
	}
	p.gate = policy.New(policy.Deps{Pool: d.Pool, Store: d.Store, Log: d.Log})
	if p.lengths == nil {
		p.d.LengthsFile = "" // memory off: nothing to keep
	}
	if p.d.LengthsFile != "" {
		// Not fatal: without them rollouts start as unknown, as on a first run.
		if n, err := p.lengths.ReadFile(p.d.LengthsFile); err != nil {
			d.Log.Warn("learned expected tokens not loaded; starting without them", "error", err)
		} else if n > 0 {
			d.Log.Info("learned expected tokens loaded", "tasks", n, "file", p.d.LengthsFile)
		}
	}
	if d.Cfg.Backends.Evacuate {
		d.Pool.SetEvacuator(p.gate.Evacuate)
	}
	p.harness = &sessions.Harnesses{Presets: d.Cfg.Harnesses, GatewaySocket: d.GatewaySocket, Sandboxes: d.Sandboxes != nil, Log: d.Log}
	p.runner = &agent.Runner{Parser: parser, Policy: p.gate.Version, Prompts: tokenizer.NewPromptCache(1024)}
	if tc := d.Cfg.Tokenizer; tc.ModelDir != "" {
		opts := tokenizer.LocalOptions{ArgumentsAsString: tc.ArgumentsAsString, NullContentWithToolCalls: tc.NullContentWithToolCalls, TemplateName: tc.ChatTemplateName,
			ChatFormat: tc.ChatFormat, HarmonyOptions: harmony.Options{ReasoningEffort: tc.ReasoningEffort, Date: tc.ConversationDate}}
		if tc.ChatTemplate != "" {
			b, err := os.ReadFile(tc.ChatTemplate)
			if err != nil {
				return nil, fmt.Errorf("tokenizer.chat_template: %w", err)
			}
			opts.ChatTemplate = string(b)
		}
		local, err := tokenizer.LoadDir(tc.ModelDir, opts)
		if err != nil {
			return nil, fmt.Errorf("tokenizer.model_dir: %w", err)
		}
		p.runner.Local = local
		p.runner.CheckTemplate = tc.Check != "off"
	}
	if m := d.Metrics; m != nil {
		depth := []func() int{p.initQ.len, p.runQ.len, p.evalQ.len}
		for i, name := range []string{trajectory.StageInit, trajectory.StageRun, trajectory.StageEval} {
			n := depth[i]
			m.Gauge("prorl_queue_depth", "Rollouts waiting for a stage.", map[string]string{"stage": name}, func() float64 { return float64(n()) })
			m.Gauge("prorl_stage_active", "Rollouts inside a stage.", map[string]string{"stage": name}, func() float64 { return float64(p.activeStage[i].Load()) })
		}
		m.Counter("prorl_prepares_total", "Tasks prepared by their plugin, by whether a group's earlier rollout had (domains whose Prepare depends on the task alone).", map[string]string{"cached": "false"},
			func() float64 { calls, hits := p.prepares.Stats(); return float64(calls - hits) })
		m.Counter("prorl_prepares_total", "Tasks prepared by their plugin, by whether a group's earlier rollout had (domains whose Prepare depends on the task alone).", map[string]string{"cached": "true"},
			func() float64 { _, hits := p.prepares.Stats(); return float64(hits) })
		m.Gauge("prorl_policy_version", "Current policy version.", nil, func() float64 { return float64(p.gate.Version()) })
		for i, src := range expectedSources {
			m.Counter("prorl_expected_tokens_total", "Rollouts submitted, by where their expected tokens came from: the trainer's expected_tokens, the task's earlier rollouts (learned_tokens), or none.",
				map[string]string{"source": src}, func() float64 { return float64(p.bySource[i].Load()) })
		}
		m.Gauge("prorl_expected_tokens_memory_tasks", "Tasks whose generated lengths the host remembers ([pipeline] expected_tokens_memory).", nil,
			func() float64 { return float64(p.lengths.Len()) })
		m.Counter("prorl_prompt_renders_total", "First prompts rendered, by whether the prompt cache had them (a group's rollouts share one).", map[string]string{"cached": "false"},
			func() float64 { calls, hits := p.runner.Prompts.Stats(); return float64(calls - hits) })
		m.Counter("prorl_prompt_renders_total", "First prompts rendered, by whether the prompt cache had them (a group's rollouts share one).", map[string]string{"cached": "true"},
			func() float64 { _, hits := p.runner.Prompts.Stats(); return float64(hits) })
		m.Gauge("prorl_generation_paused", "1 while generation is paused for a weight update.", nil, func() float64 {
			if p.PolicyState().Paused {
				return 1
			}
			return 0
		})
		m.Gauge("prorl_generations_in_flight", "Generation requests in flight to backends.", nil, func() float64 { return float64(p.PolicyState().Generating) })
		for _, why := range []string{"slots", "cache", "faster", "evacuation", "other"} {
			m.Gauge("prorl_generations_waiting", "Generation requests waiting in the host, by what holds them: a backend's slot, cache room a new rollout needs, a faster backend it is left to, an evacuation (backend.Pool.WaitingFor).",
				map[string]string{"held_for": why}, func() float64 { return float64(d.Pool.WaitingFor()[why]) })
		}
	}
	return p, nil
}

// Start launches the worker pools.
func (p *Pipeline) Start() {
	p.base, p.stop = context.WithCancel(context.Background())
	c := p.d.Cfg.Pipeline
	if p.d.LengthsFile != "" {
		p.wg.Add(1)
		go p.saveLengthsEvery(lengthsSaveEvery)
	}
	if p.d.Remote != nil {
		p.remotePool(max(1, p.d.RemoteWorkers))
		return
	}
	p.pool(c.InitWorkers, func(ctx context.Context, _ chan *Rollout) (*Rollout, bool) { return p.initQ.pop(ctx) }, 0, p.initStage, p.runQ)
	p.pool(c.RunWorkers, p.runQ.get, 1, p.runStage, p.evalQ)
	p.pool(c.EvalWorkers, p.evalQ.get, 2, p.evalStage, nil)
}

var stageNames = [3]string{trajectory.StageInit, trajectory.StageRun, trajectory.StageEval}

// pool starts n workers moving rollouts from in through fn to next.
func (p *Pipeline) pool(n int, in func(context.Context, chan *Rollout) (*Rollout, bool), idx int, fn func(context.Context, *Rollout) error, next *handoff) {
	for i := 0; i < n; i++ {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			mailbox := make(chan *Rollout, 1)
			for {
				r, ok := in(p.base, mailbox)
				if !ok {
					return
				}
				if idx == 0 {
					p.initReserved.Add(-1)
				}
				p.work(r, idx, fn, next)
			}
		}()
	}
}

func (p *Pipeline) work(r *Rollout, idx int, fn func(context.Context, *Rollout) error, next *handoff) {
	stage := stageNames[idx]
	r.mu.Lock()
	if r.finalized.Load() {
		r.mu.Unlock()
		return
	}
	if r.cancelled.Load() != nil {
		// Marked by a cancellation still under way (cancelWhere): the
		// stage does not start, and the rollout is reported waiting for it.
		r.mu.Unlock()
		st, f := p.classify(context.Background(), r, stage, context.Canceled)
		p.finalize(r, st, f)
		return
	}
	if why := r.restart.Swap(nil); why != nil {
		// Its tokens went stale while it waited for this stage.
		r.mu.Unlock()
		if p.restartStale(r, stage, why) {
			return
		}
		r.mu.Lock()
	}
	// Not a child of p.base: thousands of stages in flight made its one
	// lock and children map a per-stage cost (stopStages cancels them).
	ctx, cancel := context.WithTimeout(context.Background(), r.remaining)
	r.cancel, r.stage, r.inStage, r.stageFrom = cancel, stage, true, time.Now()
	if r.started.IsZero() {
		r.started = r.stageFrom
	}
	stopped := p.base.Err() != nil
	r.mu.Unlock()
	if stopped {
		cancel()
	}
	p.activeStage[idx].Add(1)
	start := time.Now()
	err := fn(ctx, r)
	if err == nil && r.cancelled.Load() != nil {
		// Cancelled as the stage was finishing: its cancel came too late
		// to interrupt it, but the rollout must not go on to the next one.
		err = context.Canceled
	}
	el := time.Since(start)
	p.activeStage[idx].Add(-1)
	cancel()
	r.mu.Lock()
	r.inStage, r.cancel = false, nil
	r.remaining -= el
	switch stage {
	case trajectory.StageInit:
		r.timing.InitMS += ms(el)
	case trajectory.StageRun:
		r.timing.RunMS += ms(el)
	case trajectory.StageEval:
		r.timing.EvalMS += ms(el)
	}
	r.mu.Unlock()
	if p.d.Metrics != nil {
		p.d.Metrics.StageTime.WithLabelValues(stage).Observe(el.Seconds())
	}
	if why := r.restart.Swap(nil); why != nil && r.cancelled.Load() == nil {
		// Stopped for staleness (checkStaleness), or it went stale as the
		// stage ended: either way its tokens are not sent.
		if p.restartStale(r, stage, why) {
			return
		}
		if err != nil {
			p.finish(r, trajectory.StatusFailed, &trajectory.Failure{Stage: stage, Reason: trajectory.ReasonInternal,
				Message: "stopped to run again for staleness, and could not be: " + why.Message})
			return
		}
	}
	if err != nil {
		st, f := p.classify(ctx, r, stage, err)
		if !p.retry(r, st, f) {
			p.finish(r, st, f)
		}
		return
	}
	if next == nil {
		st := trajectory.StatusCompleted
		var f *trajectory.Failure
		if o := r.outcome; o != nil && o.Status == trajectory.StatusTruncated {
			st, f = trajectory.StatusTruncated, o.Failure
		}
		if rr := r.remote; rr != nil {
			st, f = rr.Status, rr.Failure
		}
		p.finish(r, st, f)
		return
	}
	// Waiting for the next stage shows as queued for it.
	r.mu.Lock()
	r.stage = stageNames[idx+1]
	r.mu.Unlock()
	if next == p.runQ && r.Req.Agent == AgentGateway && r.Req.Harness == "" {
		// A session waits on an agent outside the host, not on a run
		// worker: it runs beside the pool, so open sessions never starve
		// the host's own rollouts. (A harness runs here: it takes a worker.)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.work(r, 1, p.runStage, p.evalQ)
		}()
		return
	}
	// Backpressure: a full next queue holds this worker, not the rollout's clock.
	if !next.put(p.base, r) {
		p.finalize(r, trajectory.StatusCancelled, &trajectory.Failure{Stage: stage, Reason: trajectory.ReasonCancelled, Message: "host shutting down"})
	}
}

// classify maps a stage error to a final status and failure.
func (p *Pipeline) classify(ctx context.Context, r *Rollout, stage string, err error) (trajectory.Status, *trajectory.Failure) {
	f := &trajectory.Failure{Stage: stage, Message: err.Error()}
	if c := r.cancelled.Load(); c != nil {
		f.Reason = c.Reason
		if c.Message != "" {
			f.Message = c.Message
		}
		return trajectory.StatusCancelled, f
	}
	var ae *agent.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		f.Reason, f.Message = trajectory.ReasonTimeout, fmt.Sprintf("rollout timeout %s reached in stage %s", r.Req.Timeout, stage)
		return trajectory.StatusTimeout, f
	case errors.Is(err, context.DeadlineExceeded):
		// A call's own limit (a tool call's [agent] tool_timeout), not the
		// rollout's: say which.
		f.Reason, f.Message = trajectory.ReasonTimeout, fmt.Sprintf("a call timed out in stage %s: %v", stage, err)
		return trajectory.StatusTimeout, f
	case errors.Is(err, context.Canceled) && p.base.Err() != nil:
		f.Reason, f.Message = trajectory.ReasonCancelled, "host shutting down"
		return trajectory.StatusCancelled, f
	case errors.Is(err, pluginhost.ErrCrashed), errors.Is(err, pluginhost.ErrUnhealthy):
		f.Reason = trajectory.ReasonPluginCrashed
	case errors.Is(err, backend.ErrNoBackend):
		f.Reason = trajectory.ReasonBackendUnavailable
	case errors.As(err, &ae):
		f.Reason = ae.Reason
	default:
		f.Reason = trajectory.ReasonInternal
	}
	return trajectory.StatusFailed, f
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// track registers a live rollout; p.mu is held.
func (p *Pipeline) track(r *Rollout) {
	p.active[r.ID] = r
	p.rules.Track(r.member())
}

// untrack forgets a finished rollout and counts it in its group's rules;
// it returns what they cut. p.mu is held.
func (p *Pipeline) untrack(r *Rollout, res *trajectory.Result) []groups.Cut {
	delete(p.active, r.ID)
	return p.rules.Finish(r.member(), res)
}

// cut cancels the unfinished rollouts of the batches and groups whose rule
// was met.
func (p *Pipeline) cut(cuts []groups.Cut) {
	for _, c := range cuts {
		match := func(o *Rollout) bool { return o.Req.GroupID == c.Group }
		if c.Batch != "" {
			match = func(o *Rollout) bool { return o.Req.Dynamic == c.Batch }
		}
		p.cancelWhere(match, trajectory.ReasonEarlyStopped, c.Why)
	}
}

// Submit creates rollouts and queues them for init; all or none are
// accepted. key, if any, is recorded with them, its RolloutIDs set to
// theirs; store.ErrKeyExists if it already was.
func (p *Pipeline) Submit(reqs []Request, key *store.Keyed) ([]*Rollout, error) {
	ids := make([]string, len(reqs))
	attempts := make([]int, len(reqs))
	for i := range reqs {
		ids[i], attempts[i] = NewID("r-"), 1
	}
	if key != nil {
		key.Sub.RolloutIDs = ids
	}
	return p.admit(ids, attempts, reqs, key)
}

// admit persists rollouts under the given ids and attempts, then queues
// them for init; all or none are accepted.
func (p *Pipeline) admit(ids []string, attempts []int, reqs []Request, idem *store.Keyed) ([]*Rollout, error) {
	if p.closing.Load() {
		return nil, ErrShuttingDown
	}
	n := int64(len(reqs))
	if p.initReserved.Add(n) > int64(p.initQ.capacity()) {
		p.initReserved.Add(-n)
		return nil, fmt.Errorf("%w (%d slots)", ErrQueueFull, p.initQ.capacity())
	}
	now := time.Now()
	rs := make([]*Rollout, len(reqs))
	pend := make([]store.Pending, len(reqs))
	var key lengthhist.Key
	var keyed json.RawMessage
	keyedDomain := ""
	var earlyKeys map[string]string // group -> its first rollout's id
	for i, rq := range reqs {
		if rq.Timeout <= 0 {
			rq.Timeout = p.d.Cfg.Pipeline.RolloutTimeout.Duration
		}
		if rq.Retry != nil && rq.Retry.Deadline <= 0 {
			rp := *rq.Retry
			rp.Deadline = defaultDeadlineTimeouts * rq.Timeout
			rq.Retry = &rp
		}
		if rq.EarlyStopMin > 0 && rq.EarlyKey == "" {
			if earlyKeys == nil {
				earlyKeys = map[string]string{}
			}
			if _, ok := earlyKeys[rq.GroupID]; !ok {
				earlyKeys[rq.GroupID] = ids[i]
			}
			rq.EarlyKey = earlyKeys[rq.GroupID]
		}
		if p.lengths != nil {
			if i == 0 || rq.Domain != keyedDomain || !bytes.Equal(rq.Task, keyed) { // a group shares its task: hashed once
				key, keyed, keyedDomain = lengthhist.KeyOf(rq.Domain, rq.Task), rq.Task, rq.Domain
			}
			// Not for a dynamic-sampling batch: which groups it keeps must
			// not depend on their length (queue.go).
			if rq.ExpectedTokens <= 0 && rq.LearnedTokens <= 0 && rq.Dynamic == "" {
				rq.LearnedTokens = p.lengths.Expect(key)
			}
		}
		rs[i] = p.newRollout(ids[i], rq, attempts[i], now)
		rs[i].lenKey = key
		// A task that samples of this submission share is stored apart, once
		// (store.Pending.Task); a task of one sample stays in its request,
		// which costs the store nothing more.
		var task json.RawMessage
		if i > 0 && store.SameTask(reqs[i-1].Task, rq.Task) || i+1 < len(reqs) && store.SameTask(reqs[i+1].Task, rq.Task) {
			task, rq.Task = rq.Task, nil
		}
		b, err := json.Marshal(rq)
		if err != nil {
			p.initReserved.Add(-n)
			return nil, fmt.Errorf("encode request: %w", err)
		}
		pend[i] = store.Pending{ID: ids[i], Attempt: attempts[i], Request: b, Task: task, SubmittedAt: now}
	}
	// On disk before anyone is told the rollouts exist.
	if err := p.d.Store.Submit(pend, idem); err != nil {
		p.initReserved.Add(-n)
		if errors.Is(err, store.ErrKeyExists) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	p.mu.Lock()
	for _, r := range rs {
		p.track(r)
	}
	p.mu.Unlock()
	for _, r := range rs {
		p.bySource[r.Req.expectedSource()].Add(1) // counted once the submission is on disk
		if r.Req.Agent == AgentGateway {
			p.gw.Expect(r.ID, r.Req.SessionKey)
		}
		p.initQ.push(p.base, r) // capacity reserved above: never blocks
	}
	if p.d.Metrics != nil {
		p.d.Metrics.Submitted.Add(float64(n))
	}
	return rs, nil
}

func (p *Pipeline) newRollout(id string, rq Request, attempt int, submitted time.Time) *Rollout {
	r := &Rollout{ID: id, Req: rq, Attempt: attempt, submitted: submitted, done: make(chan struct{}), remaining: rq.Timeout,
		stage: trajectory.StageInit, policy: p.gate.Version()}
	r.oldest.Store(noToken)
	if rq.Agent == AgentGateway {
		r.session = sessions.NewSlot()
	}
	return r
}

// Recover takes up what a previous run of the host left unfinished: with
// onRestart "rerun" each rollout runs again from its start (same id,
// attempt+1, the current policy version); otherwise it is reported
// interrupted. One whose cancellation was stored is reported cancelled.
// Nothing submitted is silently gone.
func (p *Pipeline) Recover(onRestart string) (rerun, interrupted, cancelled int, err error) {
	un, err := p.d.Store.Unfinished()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("recover: %w", err)
	}
	reqs := make([]Request, len(un))
	unreadable := make([]bool, len(un))
	for i, pd := range un {
		err := json.Unmarshal(pd.Request, &reqs[i])
		switch {
		case err != nil:
		case pd.TaskRef != "" && pd.Task == nil:
			err = fmt.Errorf("its task %s is missing from the store", pd.TaskRef)
		case pd.TaskRef != "":
			reqs[i].Task = pd.Task
		}
		if err != nil {
			p.d.Log.Error("recover: unreadable request; reporting it failed", "rollout", pd.ID, "error", err)
			unreadable[i] = true
		}
	}
	// Before any rollout is tracked or reported: each counts in its tally.
	members := make([]groups.Member, len(reqs))
	for i := range reqs {
		members[i] = reqs[i].member(un[i].ID)
	}
	p.mu.Lock()
	cuts := p.rules.Restore(p.d.Store, members)
	p.mu.Unlock()
	for i, pd := range un {
		rq := reqs[i]
		r := p.newRollout(pd.ID, rq, pd.Attempt, pd.SubmittedAt)
		r.attempts = pd.Attempts
		var st trajectory.Status
		var f *trajectory.Failure
		switch {
		case pd.Cancelled != nil:
			// Cancelled before the host stopped: reported so, not run again.
			st, f = trajectory.StatusCancelled, &trajectory.Failure{Reason: pd.Cancelled.Reason, Message: pd.Cancelled.Message}
			cancelled++
		// A gateway session's own agent ran outside the host and is gone
		// with its connection: it cannot be re-run from here (a harness can).
		case onRestart != "rerun" || unreadable[i] || (rq.Agent == AgentGateway && rq.Harness == ""):
			st, f = trajectory.StatusFailed, &trajectory.Failure{Reason: trajectory.ReasonInterrupted,
				Message: "the host stopped before this rollout finished"}
			interrupted++
		}
		if f != nil {
			p.mu.Lock()
			p.track(r)
			p.mu.Unlock()
			p.finalize(r, st, f)
			continue
		}
		// The attempt the stop cut short is on record with the others; when
		// it started is not (its first stage's start was never stored).
		ended := trajectory.Attempt{Attempt: pd.Attempt, Reason: trajectory.ReasonInterrupted, Message: "the host stopped before this attempt finished",
			PolicyVersion: r.policy, StartedAt: pd.SubmittedAt, EndedAt: time.Now()}
		r.attempts = append(r.attempts, ended)
		r.Attempt = pd.Attempt + 1
		if err := p.d.Store.Retry(r.ID, r.Attempt, &ended); err != nil {
			return rerun, interrupted, cancelled, fmt.Errorf("recover %s: %w", r.ID, err)
		}
		p.mu.Lock()
		p.track(r)
		p.mu.Unlock()
		p.initReserved.Add(1)
		if rq.Agent == AgentGateway {
			p.gw.Expect(r.ID, rq.SessionKey)
		}
		// The queue may be smaller than the backlog: feed it as it drains.
		go p.initQ.push(p.base, r)
		rerun++
	}
	p.cut(cuts)
	return rerun, interrupted, cancelled, nil
}

// Lookup returns a live rollout.
func (p *Pipeline) Lookup(id string) (*Rollout, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.active[id]
	return r, ok
}

// Snapshot shows a live rollout as a result in progress.
func (p *Pipeline) Snapshot(r *Rollout) *trajectory.Result {
	s := r.summary()
	return &trajectory.Result{ID: r.ID, GroupID: r.Req.GroupID, SampleIndex: r.Req.Index, Attempt: r.Attempt, Domain: r.Req.Domain,
		Status: trajectory.Status(map[string]string{"queued": "queued", "running": "running"}[s.Status]), Stage: s.Stage,
		SubmittedAt: r.submitted, Metadata: r.Req.Metadata, Turns: []trajectory.Turn{}, Messages: []trajectory.Message{}, Tools: []trajectory.Tool{}}
}

// live is a snapshot of the live rollouts.
func (p *Pipeline) live() []*Rollout {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := make([]*Rollout, 0, len(p.active))
	for _, r := range p.active {
		rs = append(rs, r)
	}
	return rs
}

// Active lists live rollouts.
func (p *Pipeline) Active() []Summary {
	rs := p.live()
	out := make([]Summary, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.summary())
	}
	return out
}

// Cancel cancels one rollout at whatever stage it is; a queued one is
// reported at once.
func (p *Pipeline) Cancel(id, why string) bool {
	r, ok := p.Lookup(id)
	if !ok {
		return false
	}
	p.cancelRollout(r, trajectory.ReasonCancelled, why)
	return true
}

func (p *Pipeline) cancelRollout(r *Rollout, reason, why string) {
	r.cancelled.Store(&trajectory.Failure{Reason: reason, Message: why})
	p.storeCancel([]*Rollout{r}, reason, why)
	p.stopCancelled(r, reason, why)
}

// storeCancel records the cancellation before any rollout is stopped, so
// a crash before their results are stored cannot run them again after the
// restart: a cancel once answered stays done.
func (p *Pipeline) storeCancel(rs []*Rollout, reason, why string) {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	if err := p.d.Store.Cancel(ids, trajectory.Failure{Reason: reason, Message: why}); err != nil {
		// Held by the store until its file takes writes (store.ErrHeld):
		// only a crash before then would run them again.
		p.d.Log.Warn("store a cancellation", "rollouts", len(ids), "error", err)
	}
}

// stopCancelled stops a rollout already marked cancelled: its stage's
// worker reports it, or, between stages, it is reported here.
func (p *Pipeline) stopCancelled(r *Rollout, reason, why string) {
	r.mu.Lock()
	running, cancel, stage := r.inStage, r.cancel, r.stage
	r.mu.Unlock()
	if running && cancel != nil {
		cancel() // the worker reports it with its partial trajectory
		return
	}
	p.finalize(r, trajectory.StatusCancelled, &trajectory.Failure{Stage: stage, Reason: reason, Message: why})
}

// stopStages cancels p.base and every stage in flight. A stage that
// starts after it sees p.base cancelled (work); one that started before
// has set its cancel under its lock, which this reads after the stop.
func (p *Pipeline) stopStages() {
	p.stop()
	for _, r := range p.live() {
		r.mu.Lock()
		cancel := r.cancel
		r.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	}
}

// CancelWhere cancels every live rollout matching f.
func (p *Pipeline) CancelWhere(f func(*Rollout) bool, why string) int {
	return p.cancelWhere(f, trajectory.ReasonCancelled, why)
}

func (p *Pipeline) cancelWhere(f func(*Rollout) bool, reason, why string) int {
	p.mu.Lock()
	var rs []*Rollout
	for _, r := range p.active {
		if f(r) {
			rs = append(rs, r)
		}
	}
	p.mu.Unlock()
	// All are marked before any is stopped: a worker that one's
	// cancellation frees must not start another's next stage meanwhile
	// (work checks the mark), so each is reported in the stage it was in
	// or waiting for when this was called.
	for _, r := range rs {
		r.cancelled.Store(&trajectory.Failure{Reason: reason, Message: why})
	}
	if len(rs) > 0 {
		p.storeCancel(rs, reason, why)
	}
	for _, r := range rs {
		p.stopCancelled(r, reason, why)
	}
	return len(rs)
}

// PolicyAt is the policy version a rollout started under.
func (r *Rollout) PolicyAt() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.policy
}

// SetPolicy records new weights; later turns are stamped with it.
func (p *Pipeline) SetPolicy(v int64) {
	p.gate.SetVersion(v)
	p.checkStaleness(v)
}

// The policy's reports, as core/policy makes them.
type (
	PauseReport  = policy.PauseReport
	ResumeReport = policy.ResumeReport
	PolicyState  = policy.State
)

// Pause stops new generation requests (policy.Gate.Pause).
func (p *Pipeline) Pause(ctx context.Context, abort bool) (PauseReport, error) {
	return p.gate.Pause(ctx, abort)
}

// Resume sets the policy version and lets generation continue.
func (p *Pipeline) Resume(ctx context.Context, version int64) ResumeReport {
	rep := p.gate.Resume(ctx, version)
	p.checkStaleness(p.gate.Version())
	return rep
}

// PolicyState returns the policy version and whether generation is paused.
func (p *Pipeline) PolicyState() PolicyState { return p.gate.State() }

// Policy is the current policy version.
func (p *Pipeline) Policy() int64 { return p.gate.Version() }

// Stats are the stage counters.
type Stats struct {
	InitQueue  int `json:"init_queue"`
	RunQueue   int `json:"run_queue"`
	EvalQueue  int `json:"eval_queue"`
	ActiveInit int `json:"active_init"`
	ActiveRun  int `json:"active_run"`
	ActiveEval int `json:"active_eval"`
	Total      int `json:"total"`
}

// Stats reports queue depths and stage occupancy.
func (p *Pipeline) Stats() Stats {
	p.mu.Lock()
	total := len(p.active)
	p.mu.Unlock()
	return Stats{InitQueue: p.initQ.len(), RunQueue: p.runQ.len(), EvalQueue: p.evalQ.len(),
		ActiveInit: int(p.activeStage[0].Load()), ActiveRun: int(p.activeStage[1].Load()), ActiveEval: int(p.activeStage[2].Load()), Total: total}
}

// finish finalizes r off the stage worker that ran its last stage: a
// durable store's group commit holds its caller for up to the batch's
// delay, and a worker held there is a slot its stage cannot use (bench
// Rollouts: 64 eval workers had capped the host at about 64 results
// per commit time, 1,550–1,770 a second with CPU to spare, against
// 1,950–2,800 since, interleaved).
func (p *Pipeline) finish(r *Rollout, st trajectory.Status, f *trajectory.Failure) {
	select {
	case p.finishing <- struct{}{}:
	default:
		p.finalize(r, st, f) // as many wait already: this worker waits too
		return
	}
	p.wg.Add(1) // this worker holds one, so the count is not zero
	go func() {
		defer p.wg.Done()
		p.finalize(r, st, f)
		<-p.finishing
	}()
}

// finalize reports a rollout exactly once: persist, then publish.
func (p *Pipeline) finalize(r *Rollout, st trajectory.Status, f *trajectory.Failure) {
	if !r.finalized.CompareAndSwap(false, true) {
		return
	}
	if r.Req.Agent == AgentGateway {
		p.gw.Remove(r.ID)
	}
	res := p.result(r, st, f)
	p.tally.Add(res)
	if st == trajectory.StatusCompleted || st == trajectory.StatusTruncated {
		p.lengths.Observe(r.lenKey, res.GeneratedTokens())
	}
	p.persist(r, res)
	p.mu.Lock()
	cuts := p.untrack(r, res)
	p.mu.Unlock()
	close(r.done)
	p.cut(cuts)
	if r.Req.DropIncomplete && (res.Sample == trajectory.SampleInfrastructure || res.Sample == trajectory.SampleInvalidTask) && p.base.Err() == nil {
		p.cancelWhere(func(o *Rollout) bool { return o.Req.GroupID == r.Req.GroupID }, trajectory.ReasonGroupDropped,
			fmt.Sprintf("sample %d of the group ended with no trainable result (%s, attempt %d)", r.Req.Index, st, res.Attempt))
	}
	if m := p.d.Metrics; m != nil {
		reason := ""
		if f != nil {
			reason = f.Reason
		}
		m.Finished.WithLabelValues(string(st), reason).Inc()
		for _, t := range res.Turns {
			m.TurnOverhd.Observe(t.OverheadMS / 1000)
		}
		m.Turns.Add(float64(len(res.Turns)))
	}
	// Build the log line only when it will be written: this runs once per rollout.
	if f != nil && st != trajectory.StatusTruncated {
		if p.d.Log.IsInfo() {
			p.d.Log.Info("rollout ended", "rollout", r.ID, "group", r.Req.GroupID, "domain", r.Req.Domain,
				"status", st, "stage", f.Stage, "reason", f.Reason, "message", f.Message)
		}
	} else if p.d.Log.IsDebug() {
		p.d.Log.Debug("rollout ended", "rollout", r.ID, "group", r.Req.GroupID, "domain", r.Req.Domain,
			"status", st, "reward", res.Reward, "turns", len(res.Turns))
	}
	p.letGo(r, p.holder(r), r.reserved)
}

// letGo frees, in the background, what an attempt of r held: its
// plugin's per-rollout state (plug, when it keeps some) and its sandbox.
func (p *Pipeline) letGo(r *Rollout, plug *pluginhost.Plugin, reserved *sandbox.Reserved) {
	if plug != nil {
		go p.release(plug, r)
	}
	if reserved != nil {
		go func() {
			if err := reserved.Release(); err != nil {
				p.d.Log.Warn("sandbox stop", "rollout", r.ID, "error", err)
			}
		}()
	}
}

// persist stores res with the marks of what it counts for in its group's
// tallies: a tally written after it could be lost to a crash between the
// two writes, and the batch generate past its k.
func (p *Pipeline) persist(r *Rollout, res *trajectory.Result) {
	res.Marks = append(res.Marks, groups.Marks(r.member(), res)...)
	if err := p.d.Store.Finish(res); err != nil {
		p.d.Log.Error("store result", "rollout", r.ID, "error", err)
	}
}

// holder is the plugin process that keeps r's per-rollout state, or nil:
// checked before a goroutine is started for release, as most domains keep
// none.
func (p *Pipeline) holder(r *Rollout) *pluginhost.Plugin {
	if r.epoch == 0 {
		return nil
	}
	plug, ok := p.d.Plugins.Get(r.Req.Domain)
	if !ok || !plug.Has(wire.CapRelease) || plug.Epoch() != r.epoch {
		return nil
	}
	return plug
}

// release frees plug's per-rollout state for r, best effort; not on a
// process started since (a crash took that state).
func (p *Pipeline) release(plug *pluginhost.Plugin, r *Rollout) {
	if plug.Epoch() != r.epoch {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := plug.Acquire(ctx); err == nil {
		_ = c.Release(ctx, r.ID)
	}
}

func (p *Pipeline) result(r *Rollout, st trajectory.Status, f *trajectory.Failure) *trajectory.Result {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if rr := r.remote; rr != nil && rr.Status == st {
		return remoteResult(r, rr, now)
	}
	res := &trajectory.Result{
		ID: r.ID, GroupID: r.Req.GroupID, SampleIndex: r.Req.Index, Attempt: r.Attempt, Domain: r.Req.Domain, TaskID: r.taskID,
		Status: st, Stage: r.stage, Failure: f, PolicyVersion: r.policy, Metadata: r.Req.Metadata,
		SubmittedAt: r.submitted, FinishedAt: &now, Timing: r.timing,
		Turns: []trajectory.Turn{}, Messages: []trajectory.Message{}, Tools: []trajectory.Tool{},
	}
	res.Timing.TotalMS = ms(now.Sub(r.submitted))
	res.Timing.QueuedMS = res.Timing.TotalMS - res.Timing.InitMS - res.Timing.RunMS - res.Timing.EvalMS
	if r.episode != nil {
		res.Tools = r.episode.Tools
		res.Messages = r.episode.Messages
	}
	if o := r.outcome; o != nil {
		res.Turns, res.Tokens, res.Messages = o.Turns, o.Tokens, o.Messages
		res.FinalResponse, res.EndReason = o.FinalResponse, o.EndReason
		res.Metrics, res.Traces = o.Metrics, o.Traces
	}
	if s := r.score; s != nil {
		res.Reward, res.Resolved, res.Info = s.reward, s.resolved, s.info
		if res.Metrics == nil {
			res.Metrics = map[string]float64{}
		}
		for k, v := range s.metrics {
			res.Metrics[k] = v
		}
	}
	if res.Turns == nil {
		res.Turns = []trajectory.Turn{}
	}
	res.Attempts = r.attempts
	res.Staleness, res.Stale = r.stalenessOf(p.gate.Version())
	res.Sample = trajectory.SampleOf(st, f)
	res.MaskSample = res.Sample == trajectory.SampleTrainable && !logprobsAligned(res)
	return res
}

// logprobsAligned reports whether every generation came with a logprob
// for each of its tokens (a backend that gives none leaves zeros in the
// sequence: they are not the policy's).
func logprobsAligned(res *trajectory.Result) bool {
	for _, t := range res.Turns {
		if len(t.Logprobs) != len(t.ResponseIDs) {
			return false
		}
	}
	return true
}

// Shutdown stops accepting work, lets live rollouts finish until ctx ends,
// then cancels the rest and stops the workers.
func (p *Pipeline) Shutdown(ctx context.Context) {
	p.closing.Store(true)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		p.mu.Lock()
		n := len(p.active)
		p.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			p.CancelWhere(func(*Rollout) bool { return true }, "host shutting down")
			goto stop
		case <-t.C:
		}
	}
stop:
	// Let cancelled workers report their partial trajectories, briefly.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		n := len(p.active)
		p.mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.stopStages()
	p.wg.Wait()
	p.saveLengths()
}

// saveLengthsEvery saves the learned lengths when they changed, until the
// pipeline stops.
func (p *Pipeline) saveLengthsEvery(d time.Duration) {
	defer p.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-p.base.Done():
			return
		case <-t.C:
			p.saveLengths()
		}
	}
}

func (p *Pipeline) saveLengths() {
	if p.d.LengthsFile == "" || p.lengths.Saved() {
		return
	}
	if err := p.lengths.WriteFile(p.d.LengthsFile); err != nil {
		p.d.Log.Warn("learned expected tokens not saved", "error", err)
	}
}

func (p *Pipeline) splicer(b *backend.Backend) *tokenizer.Splicer {
	if s, ok := p.splicers.Load(b.ID); ok {
		return s.(*tokenizer.Splicer)
	}
	s, _ := p.splicers.LoadOrStore(b.ID, tokenizer.NewSplicer())
	return s.(*tokenizer.Splicer)
}

// Tally is what has finished, counted for dashboards.
func (p *Pipeline) Tally() *tally.Tally { return &p.tally }
