package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"github.com/prorl/prorl/core/egress"
	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/core/trajectory"
)

// Polar's task API (ProRL Agent's successor, src/polar/rollout/server.py),
// with its paths, field names and status codes, mapped onto the pipeline:
// a task is a group of num_samples rollouts; evaluator.strategy names the
// domain and evaluator.config is the domain's task row; the instruction
// is the row's prompt. Errors are FastAPI's: {"detail": "..."} for 404,
// 409 and 503, {"detail": [{"type", "loc", "msg"}]} for 422.

// polarTaskRequest is POST /rollout/task/submit (Polar's TaskRequest).
type polarTaskRequest struct {
	TaskID           string          `json:"task_id"`
	Instruction      *string         `json:"instruction"`
	NumSamples       *int            `json:"num_samples"`
	DispatchPriority *int            `json:"dispatch_priority"`
	EarlyStop        *int            `json:"early_stop_min_usable_sessions"`
	TimeoutSeconds   *float64        `json:"timeout_seconds"`
	MaxSteps         *int            `json:"max_steps"`
	Runtime          *polarRuntime   `json:"runtime"`
	Agent            *polarAgent     `json:"agent"`
	Builder          *polarStrategy  `json:"builder"`
	Evaluator        *polarEvaluator `json:"evaluator"`
	CallbackURL      *string         `json:"callback_url"`
	Metadata         json.RawMessage `json:"metadata"`
}

// polarRuntime is Polar's RuntimeSpec. The domain, not the trainer,
// chooses the sandbox here: image, limits and network are the deployment's.
type polarRuntime struct {
	Backend               string            `json:"backend"`
	Image                 string            `json:"image"`
	Prepare               []json.RawMessage `json:"prepare"`
	EvalPrepare           []json.RawMessage `json:"eval_prepare"`
	Env                   map[string]string `json:"env"`
	Network               *string           `json:"network"`
	Workdir               *string           `json:"workdir"`
	DirectExecInitCommand *string           `json:"direct_exec_init_command"`
	CPUs                  *int              `json:"cpus"`
	MemoryMB              *int              `json:"memory_mb"`
	StorageMB             *int              `json:"storage_mb"`
	GPUs                  int               `json:"gpus"`
	AllowInternet         *bool             `json:"allow_internet"`
	InternetVolumes       []string          `json:"internet_volumes"`
	ImportPath            *string           `json:"import_path"`
	Kwargs                map[string]any    `json:"kwargs"`
}

// polarAgent is Polar's AgentSpec.
type polarAgent struct {
	Harness    string            `json:"harness"`
	ImportPath *string           `json:"import_path"`
	ModelName  string            `json:"model_name"`
	Settings   map[string]any    `json:"settings"`
	Env        map[string]string `json:"env"`
}

type polarStrategy struct {
	Strategy string         `json:"strategy"`
	Config   map[string]any `json:"config"`
}

type polarEvaluator struct {
	Strategy       string            `json:"strategy"`
	Config         json.RawMessage   `json:"config"`
	Env            map[string]string `json:"env"`
	RefreshRuntime bool              `json:"refresh_runtime"`
}

// PolarTrace is one trace of a session: here the rollout's one exact
// token sequence, split at the prompt.
type PolarTrace struct {
	PromptIDs        []int                `json:"prompt_ids"`
	ResponseIDs      []int                `json:"response_ids"`
	LossMask         []int8               `json:"loss_mask"`
	PromptMessages   []trajectory.Message `json:"prompt_messages"`
	ResponseMessages []trajectory.Message `json:"response_messages"`
	Tools            []trajectory.Tool    `json:"tools"`
	FinishReason     *string              `json:"finish_reason"`
	ResponseLogprobs []float64            `json:"response_logprobs"`
	Reward           *float64             `json:"reward"`
	Metadata         map[string]any       `json:"metadata"`
}

// PolarTrajectory is Polar's Trajectory.
type PolarTrajectory struct {
	Status   string         `json:"status"`
	Metadata map[string]any `json:"metadata"`
	Traces   []PolarTrace   `json:"traces"`
	Error    *string        `json:"error"`
}

// PolarTiming holds the fields of Polar's SessionTiming we measure (it
// forbids others), in milliseconds.
type PolarTiming struct {
	RegisterToInitQueueMS float64 `json:"register_to_init_queue_ms"`
	InitMS                float64 `json:"init_ms"`
	RunMS                 float64 `json:"run_ms"`
	PostrunMS             float64 `json:"postrun_ms"`
	EvalMS                float64 `json:"eval_ms"`
	E2EMS                 float64 `json:"e2e_ms"`
}

// PolarSession is Polar's SessionResult.
type PolarSession struct {
	SessionID  string          `json:"session_id"`
	TaskID     string          `json:"task_id"`
	Status     string          `json:"status"`
	Trajectory PolarTrajectory `json:"trajectory"`
	Timing     PolarTiming     `json:"timing"`
	NodeID     *string         `json:"node_id"`
	Error      *string         `json:"error"`
	Metadata   map[string]any  `json:"metadata"`
}

// PolarTaskStatus is GET /rollout/task/{id} (Polar's TaskStatus), with
// the group it runs as, for our v1 API.
type PolarTaskStatus struct {
	TaskID            string         `json:"task_id"`
	Status            string         `json:"status"`
	TotalSessions     int            `json:"total_sessions"`
	CompletedSessions int            `json:"completed_sessions"`
	Results           []PolarSession `json:"results"`
	ResultPaths       []string       `json:"result_paths"`
	GroupID           string         `json:"group_id,omitempty"`
}

// polarTask is a task's record.
type polarTask struct {
	id, group, harness, model, callback string
	rollouts                            []string
	status                              string
	results                             []PolarSession
	created, updated                    time.Time
	done                                chan struct{} // closed when every session has its result
}

// polarTasks holds the task records. Polar keeps them in memory; here a
// task's group and rollout ids are also in the store, so after a restart
// GET /rollout/task/{id} rebuilds the task from the durable results, for
// [server] idempotency_ttl after its last submission.
type polarTasks struct {
	mu         sync.Mutex
	tasks      map[string]*polarTask
	tombstones map[string]time.Time
	sweeper    *time.Timer // set while tombstones holds any
	events     *eventBus
	node       *string
}

// Finished tasks kept in memory; older ones are acknowledged in the store.
const polarKeep = 1000

var (
	// A DELETE with register_if_missing keeps a late submit of the id out
	// this long (Polar's TTL).
	tombstoneTTL = 5 * time.Minute
	// maxTombstones bounds the cancel markers held in memory at once.
	maxTombstones = 100_000
)

// tombstone records a cancel marker for id until tombstoneTTL from now;
// the markers are swept as they expire, by a timer. Full, it refuses and
// says when the oldest goes.
func (pt *polarTasks) tombstone(id string, now time.Time) (wait time.Duration, ok bool) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if _, have := pt.tombstones[id]; !have && len(pt.tombstones) >= maxTombstones {
		oldest := now.Add(tombstoneTTL)
		for _, until := range pt.tombstones {
			if until.Before(oldest) {
				oldest = until
			}
		}
		return oldest.Sub(now), false
	}
	pt.tombstones[id] = now.Add(tombstoneTTL)
	if pt.sweeper == nil {
		pt.sweeper = time.AfterFunc(tombstoneTTL, pt.sweepTombstones)
	}
	return 0, true
}

// sweepTombstones drops the expired markers and runs again when the next
// one expires; none left, it stops.
func (pt *polarTasks) sweepTombstones() {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	now := time.Now()
	var next time.Time
	for id, until := range pt.tombstones {
		switch {
		case !now.Before(until):
			delete(pt.tombstones, id)
		case next.IsZero() || until.Before(next):
			next = until
		}
	}
	if next.IsZero() {
		pt.sweeper = nil
		return
	}
	pt.sweeper.Reset(next.Sub(now))
}

func newPolarTasks() *polarTasks {
	pt := &polarTasks{tasks: map[string]*polarTask{}, tombstones: map[string]time.Time{}, events: newEventBus()}
	if h, err := os.Hostname(); err == nil {
		pt.node = &h
	}
	return pt
}

// fastAPIInvalid is FastAPI's 422 body: a list naming each bad field by
// its location, e.g. ["query", "limit"].
func fastAPIInvalid(w http.ResponseWriter, typ string, loc []any, msg string) {
	WriteJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": []map[string]any{{"type": typ, "loc": loc, "msg": msg}}})
}

// polarInvalid is FastAPI's 422 for a field of the request body.
func polarInvalid(w http.ResponseWriter, field, msg string) {
	loc := []any{"body"}
	for _, p := range strings.Split(field, ".") {
		if p == "" {
			continue
		}
		if n, err := strconv.Atoi(p); err == nil {
			loc = append(loc, n)
		} else {
			loc = append(loc, p)
		}
	}
	fastAPIInvalid(w, "value_error", loc, msg)
}

func (s *Server) polarSubmit(w http.ResponseWriter, r *http.Request) {
	var tr polarTaskRequest
	if e := Decode(w, r, s.Cfg.Server.MaxBodyBytes, &tr); e != nil {
		if e.Status == http.StatusRequestEntityTooLarge || e.Status == http.StatusRequestTimeout {
			WriteError(w, e)
			return
		}
		polarInvalid(w, e.Field, e.Message)
		return
	}
	reqs, task, e := s.polarRequests(&tr)
	if e != nil {
		if e.Status == http.StatusUnprocessableEntity {
			polarInvalid(w, e.Field, e.Message)
		} else {
			Detail(w, e.Status, e.Message) // Polar's 503: the domain is down
		}
		return
	}
	// A task of a host that crashed comes back from the store, so one
	// still running there is refused below as one in memory would be.
	s.polarLookup(tr.TaskID)
	pt := s.polar
	pt.mu.Lock()
	now := time.Now()
	if until, dead := pt.tombstones[tr.TaskID]; dead && now.Before(until) || s.polarTombstoned(tr.TaskID, now) {
		pt.mu.Unlock()
		Detail(w, http.StatusConflict, fmt.Sprintf("task %s was cancelled before submission", tr.TaskID))
		return
	}
	if old := pt.tasks[tr.TaskID]; old != nil && (old.status == "running" || old.status == "cancelling") {
		pt.mu.Unlock()
		Detail(w, http.StatusConflict, fmt.Sprintf("task %s is already running", tr.TaskID))
		return
	}
	// Held across the submit so a concurrent duplicate id waits and then
	// sees this one running.
	defer pt.mu.Unlock()
	// Durable with the rollouts: the task's group and rollouts, so a
	// restarted host finds them. A resubmitted id's record is replaced.
	rs, e := s.Enqueue(reqs, &store.Keyed{Key: polarKey(task.id), Sub: store.Submission{GroupID: task.group}, Replace: true}, "num_samples")
	if e != nil {
		Detail(w, e.Status, e.Message)
		return
	}
	task.rollouts = ids(rs)
	task.created, task.updated = now, now
	pt.tasks[task.id] = task
	pt.prune(s.Store)
	pt.events.publish("task.created", map[string]any{"task_id": task.id, "status": "running", "harness": task.harness, "model": task.model, "num_samples": len(rs)})
	go s.polarWatch(task, rs)
	WriteJSON(w, http.StatusOK, map[string]string{"task_id": task.id, "status": "running"})
}

// polarRecord reads a task id's record: the task's latest submission.
// A store written before records were one a task holds numbered slots
// (polarSlotKey) instead, the last used one the task's; they are read
// when there is no record, and expire with the rest.
func (s *Server) polarRecord(id string) (store.Submission, bool) {
	if sub, ok := s.Store.Idempotent(polarKey(id)); ok {
		return sub, true
	}
	var last store.Submission
	found := false
	for k := 1; k < 1<<16; k++ {
		v, ok := s.Store.Idempotent(polarSlotKey(id, k))
		if !ok {
			break
		}
		last, found = v, true
	}
	return last, found
}

// PolarKeyPrefix starts a Polar task's record in the store's key table,
// where it expires after [server] idempotency_ttl like any key; v1 keys
// may not start with it.
const PolarKeyPrefix = "polar-task:"

// polarKey is a task's record: "=" never follows the prefix in a slot key.
func polarKey(id string) string { return PolarKeyPrefix + "=" + id }

// polarTombKey is a task's cancel marker (DELETE with register_if_missing).
func polarTombKey(id string) string { return PolarKeyPrefix + "!" + id }

// polarTombstoned reports a stored cancel marker younger than tombstoneTTL.
func (s *Server) polarTombstoned(id string, now time.Time) bool {
	m, ok := s.Store.Idempotent(polarTombKey(id))
	return ok && now.Sub(m.At) < tombstoneTTL
}

func polarSlotKey(id string, k int) string { return fmt.Sprintf("%s%d:%s", PolarKeyPrefix, k, id) }

// polarFields names, in Polar's request, the v1 fields a task maps to, so
// the v1 checks report Polar's names.
var polarFields = map[string]string{
	"n": "num_samples", "max_turns": "max_steps", "timeout": "timeout_seconds", "priority": "dispatch_priority",
	"early_stop_min_usable": "early_stop_min_usable_sessions", "metadata": "metadata",
	"task.domain": "evaluator.strategy", "task.data_source": "evaluator.strategy",
	"sampling.temperature": "agent.settings.temperature", "sampling.top_p": "agent.settings.top_p", "sampling.top_k": "agent.settings.top_k",
	"sampling.max_tokens_per_turn": "agent.settings.max_tokens", "sampling.max_total_tokens": "agent.settings.max_total_tokens",
	"sampling.stop": "agent.settings.stop",
}

// polarRequests maps a task onto a v1 submission, checks it with the v1
// rules (reported under Polar's field names) and builds its rollouts.
func (s *Server) polarRequests(tr *polarTaskRequest) ([]pipeline.Request, *polarTask, *Error) {
	sr, strategy, row, e := s.polarSubmission(tr)
	if e == nil {
		e = sr.validate("", s.Cfg.Server.MaxSamples)
	}
	var plug *pluginhost.Plugin
	if e == nil {
		h := taskHeader{Domain: strategy} // unknown: refused with the list of domains
		if _, ok := s.Plugins.Get(strategy); !ok {
			if _, ok := s.Plugins.ByDataSource(strategy); ok {
				h = taskHeader{DataSource: strategy}
			}
		}
		plug, e = s.resolveDomain(h, "task")
	}
	if e != nil {
		if f, ok := polarFields[e.Field]; ok {
			e.Field = f
		}
		return nil, nil, e
	}
	// The instruction is the row's prompt unless the row has its own.
	has := false
	for _, k := range []string{"prompt", "question", "problem", "problem_statement"} {
		if _, ok := row[k]; ok {
			has = true
		}
	}
	if !has {
		if *tr.Instruction == "" {
			return nil, nil, Invalid("instruction", "empty, and evaluator.config has no prompt of its own")
		}
		key := "prompt"
		if plug.Name == "swe" {
			key = "problem_statement"
		}
		row[key], _ = json.Marshal(*tr.Instruction)
	}
	delete(row, "data_source")
	row["domain"], _ = json.Marshal(plug.Name)
	sr.Task, _ = json.Marshal(row)
	reqs, gid := groupRequests(&sr, plug)
	t := &polarTask{id: tr.TaskID, group: gid, harness: "prorl", model: tr.Agent.ModelName, status: "running", done: make(chan struct{})}
	if sr.Harness != nil {
		t.harness = sr.Harness.Name
	}
	if tr.CallbackURL != nil {
		t.callback = *tr.CallbackURL
	}
	return reqs, t, nil
}

// polarSubmission checks what only a Polar task has and maps the rest
// onto a v1 submission; it returns the evaluator's strategy and task row.
func (s *Server) polarSubmission(tr *polarTaskRequest) (SubmitRequest, string, map[string]json.RawMessage, *Error) {
	var sr SubmitRequest
	if tr.TaskID == "" || len(tr.TaskID) > 512 {
		return sr, "", nil, Invalid("task_id", "required: a non-empty string of at most 512 characters")
	}
	if tr.Instruction == nil {
		return sr, "", nil, Invalid("instruction", "Field required")
	}
	if tr.Agent == nil {
		return sr, "", nil, Invalid("agent", "Field required")
	}
	sr.N, sr.Priority, sr.EarlyStopMinUsable, sr.MaxTurns = tr.NumSamples, tr.DispatchPriority, tr.EarlyStop, tr.MaxSteps
	secs := 600.0
	if tr.TimeoutSeconds != nil {
		secs = *tr.TimeoutSeconds
	}
	// Past the limit stays past it (the v1 check refuses it) without overflowing a Duration.
	to := Timeout(math.Min(secs, maxTimeout.Seconds()+1) * float64(time.Second))
	sr.Timeout = &to
	if rt := tr.Runtime; rt != nil {
		switch {
		case rt.Backend != "" && rt.Backend != "docker" && rt.Backend != "apptainer":
			return sr, "", nil, Invalid("runtime.backend", "must be docker or apptainer, got %q", rt.Backend)
		case strings.TrimSpace(rt.Image) == "":
			return sr, "", nil, Invalid("runtime.image", "runtime image must be non-empty")
		case len(rt.Prepare) > 0, len(rt.EvalPrepare) > 0:
			return sr, "", nil, Invalid("runtime.prepare", "not supported: the domain prepares its own sandbox; put setup steps in the domain's image or task row")
		case len(rt.Env) > 0:
			return sr, "", nil, Invalid("runtime.env", "not supported: the domain sets the sandbox environment")
		case rt.GPUs > 0:
			return sr, "", nil, Invalid("runtime.gpus", "not supported: sandboxes here have no GPUs")
		case rt.ImportPath != nil, rt.DirectExecInitCommand != nil:
			return sr, "", nil, Invalid("runtime.import_path", "not supported: custom runtimes are not loaded")
		case len(rt.InternetVolumes) > 0:
			return sr, "", nil, Invalid("runtime.internet_volumes", "not supported: sandboxes here have no network")
		}
	}
	ag := tr.Agent
	if ag.Harness != "" && ag.Harness != "prorl" {
		// Polar's harness names (claude_code, qwen_code) are the presets'
		// with hyphens; the gateway runs them.
		name := strings.ReplaceAll(ag.Harness, "_", "-")
		if _, ok := s.Cfg.Harnesses[name]; !ok {
			return sr, "", nil, Invalid("agent.harness", "harness %q is not configured here (configured: %s; \"prorl\" is the host's own agent loop)", ag.Harness, strings.Join(harnessNames(s.Cfg.Harnesses), ", "))
		}
		sr.Harness = &HarnessRequest{Name: name}
		if tr.Instruction != nil {
			sr.Harness.Instruction = *tr.Instruction
		}
		if e := s.checkHarness(sr.Harness, "agent.harness"); e != nil {
			return sr, "", nil, e
		}
	}
	switch {
	case ag.ImportPath != nil:
		return sr, "", nil, Invalid("agent.import_path", "not supported: this host runs its own agent loop (harness \"prorl\")")
	case len(ag.Env) > 0:
		return sr, "", nil, Invalid("agent.env", "not supported: the agent loop runs in the host, not in an environment of its own")
	}
	sp, turns, e := polarSampling(ag.Settings)
	if e != nil {
		return sr, "", nil, e
	}
	sr.Sampling = sp
	if turns > 0 {
		sr.MaxTurns = &turns
	}
	if b := tr.Builder; b != nil && b.Strategy != "per_request" && b.Strategy != "prefix_merging" {
		return sr, "", nil, Invalid("builder.strategy", "must be per_request or prefix_merging (both give one exact trace per session here), got %q", b.Strategy)
	}
	ev := tr.Evaluator
	if ev == nil || ev.Strategy == "" {
		return sr, "", nil, Invalid("evaluator.strategy", "required: the domain that scores the task, or one of its data_source names")
	}
	if len(ev.Env) > 0 {
		return sr, "", nil, Invalid("evaluator.env", "not supported: the domain's evaluator has its own configuration")
	}
	row := map[string]json.RawMessage{}
	if c := bytes.TrimSpace(ev.Config); len(c) > 0 && string(c) != "null" {
		if c[0] != '{' || json.Unmarshal(c, &row) != nil {
			return sr, "", nil, Invalid("evaluator.config", "must be a JSON object: the domain's task row")
		}
	}
	var meta map[string]any
	if m := bytes.TrimSpace(tr.Metadata); len(m) > 0 && string(m) != "null" {
		if err := json.Unmarshal(m, &meta); err != nil || meta == nil {
			return sr, "", nil, Invalid("metadata", "must be a JSON object")
		}
	}
	if v, ok := meta["agent_timeout"]; ok && v != nil {
		if f, isNum := v.(float64); !isNum || !(f > 0) {
			return sr, "", nil, Invalid("metadata", "metadata.agent_timeout must be a positive finite number")
		}
	}
	// Polar's per-sample eval seeds: seed base + sample index (as v1 seeds a group).
	if v, ok := meta["eval_sampling_seed_base"]; ok && v != nil {
		f, isNum := v.(float64)
		if !isNum || f != math.Trunc(f) || f < 0 {
			return sr, "", nil, Invalid("metadata.eval_sampling_seed_base", "eval_sampling_seed_base must be an integer")
		}
		seed := int64(f)
		sr.Sampling.Seed = &seed
	}
	sr.Metadata, _ = json.Marshal(map[string]any{"polar_task_id": tr.TaskID, "task_metadata": meta})
	if tr.CallbackURL != nil && *tr.CallbackURL != "" {
		// The host POSTs results there: only where the operator allows.
		if err := s.callbacks.policy.CheckURL(*tr.CallbackURL); err != nil {
			return sr, "", nil, Invalid("callback_url", "%v", err)
		}
	}
	return sr, ev.Strategy, row, nil
}

// polarSampling maps agent.settings to sampling: it checks each value's
// type and refuses unknown keys; the ranges are the v1 checks'.
func polarSampling(set map[string]any) (sp trajectory.Sampling, turns int, e *Error) {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := set[k]
		f, isNum := v.(float64)
		field := "agent.settings." + k
		switch k {
		case "temperature", "top_p":
			if !isNum {
				return sp, 0, Invalid(field, "must be a number")
			}
			if k == "temperature" {
				sp.Temperature = &f
			} else {
				sp.TopP = &f
			}
		case "top_k", "seed", "sampling_seed", "max_tokens", "max_tokens_per_turn", "max_total_tokens", "max_turns", "max_steps":
			if !isNum || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
				return sp, 0, Invalid(field, "must be an integer")
			}
			n := int(f)
			switch k {
			case "top_k":
				sp.TopK = &n
			case "seed", "sampling_seed":
				seed := int64(n)
				sp.Seed = &seed
			case "max_tokens", "max_tokens_per_turn":
				sp.MaxTokensPerTurn = n
			case "max_total_tokens":
				sp.MaxTotalTokens = n
			default:
				if n < 1 {
					return sp, 0, Invalid(field, "must be at least 1")
				}
				turns = n
			}
		case "stop":
			arr, ok := v.([]any)
			if !ok {
				return sp, 0, Invalid(field, "must be a list of strings")
			}
			for _, a := range arr {
				str, ok := a.(string)
				if !ok {
					return sp, 0, Invalid(field, "must be a list of strings")
				}
				sp.Stop = append(sp.Stop, str)
			}
		default:
			return sp, 0, Invalid(field, "unknown setting; this host reads temperature, top_p, top_k, seed, sampling_seed, max_tokens, max_total_tokens, max_turns, stop")
		}
	}
	return sp, turns, nil
}

// polarWatch collects a task's results as its rollouts finish, then marks
// it completed and calls back.
func (s *Server) polarWatch(t *polarTask, rs []*pipeline.Rollout) {
	pt := s.polar
	finished := make(chan *pipeline.Rollout, len(rs))
	for _, r := range rs {
		go func() { <-r.Done(); finished <- r }()
	}
	for range rs {
		res, ok := s.Store.Get((<-finished).ID)
		if !ok {
			continue
		}
		sess := toPolarSession(res, t.id, pt.node)
		pt.mu.Lock()
		cancelled := t.status == "cancelling" || t.status == "cancelled"
		if !cancelled || res.Status != trajectory.StatusCancelled {
			t.results = append(t.results, sess)
		}
		t.updated = time.Now()
		completed, total := len(t.results), len(t.rollouts)
		pt.mu.Unlock()
		pt.events.publish("session.state_changed", map[string]any{"task_id": t.id, "session_id": sess.SessionID, "status": sess.Status})
		pt.events.publish("task.updated", map[string]any{"task_id": t.id, "completed_sessions": completed, "total_sessions": total})
	}
	pt.mu.Lock()
	callback := ""
	if t.status == "running" {
		t.status = "completed"
		callback = t.callback
	}
	t.updated = time.Now()
	close(t.done)
	st := pt.statusLocked(t)
	pt.mu.Unlock()
	pt.events.publish("task.completed", map[string]any{"task_id": t.id, "status": st.Status, "completed_sessions": st.CompletedSessions})
	if callback != "" {
		s.polarCallback(callback, st)
	}
}

// polarCallback POSTs the terminal TaskResult {task_id, status, results,
// result_paths}, retrying a failed delivery (Polar tries once).
// Through s.callbacks: only to allowed addresses, checked at connect
// time; a redirect is not followed (it counts as a failed attempt).
func (s *Server) polarCallback(u string, st PolarTaskStatus) {
	body, _ := json.Marshal(map[string]any{"task_id": st.TaskID, "status": st.Status, "results": st.Results, "result_paths": st.ResultPaths})
	var last error
	for attempt := 1; attempt <= polarCallbackAttempts; attempt++ {
		code, err := s.callbacks.client.Post(s.waits, u, "application/json", body)
		if err == nil {
			if code/100 == 2 {
				return
			}
			err = fmt.Errorf("status %d", code)
		}
		last = err
		if errors.Is(err, egress.ErrNotAllowed) || s.waits.Err() != nil {
			break
		}
		if attempt < polarCallbackAttempts {
			select {
			case <-time.After(polarCallbackBackoff * time.Duration(1<<(attempt-1))):
			case <-s.waits.Done():
			}
		}
	}
	s.Log.Warn("polar callback failed; the trainer must poll GET /rollout/task/{id}", "task", logID(st.TaskID), "url", logID(u), "error", last)
}

// callbacks is where Polar's callbacks may go, and the client that sends them.
type callbacks struct {
	policy *egress.Policy
	client *egress.Client
}

func newCallbacks(allow []string) (callbacks, error) {
	p, err := egress.NewPolicy(allow)
	if err != nil {
		return callbacks{}, fmt.Errorf("server.callback_allow: %w", err)
	}
	return callbacks{policy: p, client: egress.NewClient(p, 10*time.Second)}, nil
}

// maxLoggedID is how much of a caller's id or URL a log line carries.
const maxLoggedID = 200

// logID shortens a caller-supplied string for a log line.
func logID(s string) string {
	if len(s) <= maxLoggedID {
		return s
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:maxLoggedID], len(s))
}

// Callback delivery: 4 attempts, 0.5 s, 1 s, 2 s apart.
var (
	polarCallbackAttempts = 4
	polarCallbackBackoff  = 500 * time.Millisecond
)

// toPolarSession converts a result to Polar's SessionResult.
func toPolarSession(res *trajectory.Result, taskID string, node *string) PolarSession {
	st := "ERROR"
	switch res.Status {
	case trajectory.StatusCompleted, trajectory.StatusTruncated:
		st = "COMPLETED"
	case trajectory.StatusTimeout:
		st = "TIMEOUT"
	}
	var errMsg *string
	if f := res.Failure; f != nil && st != "COMPLETED" {
		m := f.Reason
		if f.Message != "" {
			m += ": " + f.Message
		}
		errMsg = &m
	}
	meta := map[string]any{}
	var rm struct {
		TaskMetadata map[string]any `json:"task_metadata"`
	}
	if json.Unmarshal(res.Metadata, &rm) == nil {
		for k, v := range rm.TaskMetadata {
			meta[k] = v
		}
	}
	if res.Failure != nil && res.Failure.Reason == trajectory.ReasonEarlyStopped {
		meta["early_stopped"] = true
	}
	tr := PolarTrajectory{Status: st, Error: errMsg, Traces: []PolarTrace{},
		Metadata: map[string]any{"rollout_id": res.ID, "group_id": res.GroupID, "sample_index": res.SampleIndex, "attempt": res.Attempt,
			"domain": res.Domain, "policy_version": res.PolicyVersion, "record_count": len(res.Turns), "metrics": res.Metrics}}
	finish := func(trace *PolarTrace, last bool) {
		if res.EndReason != "" {
			e := res.EndReason
			trace.FinishReason = &e
		}
		if st == "COMPLETED" && last {
			r := res.Reward
			trace.Reward = &r
		}
		if len(res.Info) > 0 && last {
			trace.Metadata["info"] = res.Info
		}
	}
	if len(res.Traces) > 0 {
		// A gateway session: its traces as they are; the reward on the last,
		// as Polar's trajectory builder puts it.
		for i, gt := range res.Traces {
			trace := PolarTrace{PromptIDs: gt.PromptIDs, ResponseIDs: gt.ResponseIDs, LossMask: gt.LossMask, ResponseLogprobs: gt.ResponseLogprobs,
				PromptMessages: gt.PromptMessages, ResponseMessages: gt.ResponseMessages, Tools: orEmpty(gt.Tools),
				Metadata: map[string]any{"resolved": res.Resolved, "calls": gt.Calls}}
			finish(&trace, i == len(res.Traces)-1)
			if f := gt.FinishReason; f != "" {
				trace.FinishReason = &f
			}
			tr.Traces = append(tr.Traces, trace)
		}
	} else if tk := res.Tokens; tk.PromptLen > 0 && tk.PromptLen < len(tk.IDs) && len(tk.LossMask) == len(tk.IDs) && len(tk.Logprobs) == len(tk.IDs) {
		pl := tk.PromptLen
		first := len(res.Messages)
		for i, m := range res.Messages {
			if m.Role == "assistant" {
				first = i
				break
			}
		}
		trace := PolarTrace{PromptIDs: tk.IDs[:pl], ResponseIDs: tk.IDs[pl:], LossMask: tk.LossMask[pl:], ResponseLogprobs: tk.Logprobs[pl:],
			PromptMessages: res.Messages[:first], ResponseMessages: res.Messages[first:], Tools: orEmpty(res.Tools),
			Metadata: map[string]any{"resolved": res.Resolved, "turns": len(res.Turns)}}
		finish(&trace, true)
		tr.Traces = append(tr.Traces, trace)
	}
	t := res.Timing
	return PolarSession{SessionID: res.ID, TaskID: taskID, Status: st, Trajectory: tr, NodeID: node, Error: errMsg, Metadata: meta,
		Timing: PolarTiming{RegisterToInitQueueMS: t.QueuedMS, InitMS: t.InitMS, RunMS: t.RunMS, PostrunMS: t.EvalMS, EvalMS: t.EvalMS, E2EMS: t.TotalMS}}
}

func (pt *polarTasks) statusLocked(t *polarTask) PolarTaskStatus {
	return PolarTaskStatus{TaskID: t.id, Status: t.status, TotalSessions: len(t.rollouts), CompletedSessions: len(t.results),
		Results: append([]PolarSession{}, t.results...), ResultPaths: []string{}, GroupID: t.group}
}

// prune drops the oldest finished tasks past polarKeep and acknowledges
// their results in the store; pt.mu is held.
func (pt *polarTasks) prune(st store.Store) {
	if len(pt.tasks) <= polarKeep {
		return
	}
	var old []*polarTask
	for _, t := range pt.tasks {
		if t.status != "running" && t.status != "cancelling" {
			old = append(old, t)
		}
	}
	sort.Slice(old, func(i, j int) bool { return old[i].updated.Before(old[j].updated) })
	for _, t := range old[:min(len(old), len(pt.tasks)-polarKeep)] {
		delete(pt.tasks, t.id)
		_, _ = st.Ack(t.rollouts)
	}
}

// lookup finds a task, in memory or, after a restart, from the store.
func (s *Server) polarLookup(id string) *polarTask {
	pt := s.polar
	pt.mu.Lock()
	t := pt.tasks[id]
	pt.mu.Unlock()
	if t != nil {
		return t
	}
	sub, found := s.polarRecord(id)
	if !found {
		return nil
	}
	t = &polarTask{id: id, group: sub.GroupID, rollouts: sub.RolloutIDs, harness: "prorl", status: "running", done: make(chan struct{})}
	var live []*pipeline.Rollout
	for _, rid := range sub.RolloutIDs {
		// The pipeline first: a rollout's result is stored before it
		// leaves the pipeline, so none slips between the two looks.
		if r, ok := s.Pipeline.Lookup(rid); ok {
			live = append(live, r)
		} else if res, ok := s.Store.Get(rid); ok && res.Status.Finished() {
			t.results = append(t.results, toPolarSession(res, id, pt.node))
		}
	}
	if len(live)+len(t.results) == 0 {
		// Nothing of it is left (its results acknowledged, as prune does
		// past polarKeep): evicted, as Polar answers, not "completed" with
		// none of its sessions.
		return nil
	}
	t.created, t.updated = time.Now(), time.Now()
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if cur := pt.tasks[id]; cur != nil {
		return cur
	}
	pt.tasks[id] = t
	if len(live) == 0 {
		t.status = "completed"
		close(t.done)
	} else {
		go s.polarWatch(t, live)
	}
	return t
}

func (s *Server) polarGet(w http.ResponseWriter, r *http.Request) {
	t := s.polarLookup(mux.Vars(r)["task_id"])
	if t == nil {
		Detail(w, http.StatusNotFound, "Task not found")
		return
	}
	s.polar.mu.Lock()
	st := s.polar.statusLocked(t)
	s.polar.mu.Unlock()
	WriteJSON(w, http.StatusOK, st)
}

func (s *Server) polarCancel(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["task_id"]
	reg := false
	if v := r.URL.Query().Get("register_if_missing"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			fastAPIInvalid(w, "bool_parsing", []any{"query", "register_if_missing"}, "Input should be a valid boolean")
			return
		}
		reg = b
	}
	pt := s.polar
	t := s.polarLookup(id)
	if t == nil {
		if !reg {
			Detail(w, http.StatusNotFound, "Task not found")
			return
		}
		if wait, ok := pt.tombstone(id, time.Now()); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
			Detail(w, http.StatusTooManyRequests, fmt.Sprintf("%d cancel markers are held; retry later", maxTombstones))
			return
		}
		// In the store too, so a host restarted within the TTL keeps the
		// late submit out; the memory one holds if the store cannot write.
		if err := s.Store.Submit(nil, &store.Keyed{Key: polarTombKey(id), Replace: true}); err != nil {
			s.Log.Warn("Polar cancel marker not stored; it holds until a restart", "task_id", logID(id), "error", err)
		}
		WriteJSON(w, http.StatusOK, PolarTaskStatus{TaskID: id, Status: "cancelled", Results: []PolarSession{}, ResultPaths: []string{}})
		return
	}
	pt.mu.Lock()
	if t.status != "running" {
		st := pt.statusLocked(t)
		pt.mu.Unlock()
		WriteJSON(w, http.StatusOK, st)
		return
	}
	t.status = "cancelling"
	pt.mu.Unlock()
	s.Pipeline.CancelWhere(func(ro *pipeline.Rollout) bool { return ro.Req.GroupID == t.group }, "polar task cancelled")
	select {
	case <-t.done:
	case <-r.Context().Done():
		return
	case <-time.After(30 * time.Second):
	}
	pt.mu.Lock()
	if t.status != "completed" {
		t.status = "cancelled"
	}
	t.updated = time.Now()
	st := pt.statusLocked(t)
	pt.mu.Unlock()
	pt.events.publish("task.completed", map[string]any{"task_id": id, "status": "cancelled"})
	WriteJSON(w, http.StatusOK, st)
}

func (s *Server) polarStatus(w http.ResponseWriter, _ *http.Request) {
	pt := s.polar
	pt.mu.Lock()
	tasks := map[string]string{}
	pending := 0
	for id, t := range pt.tasks {
		tasks[id] = t.status
		if t.status == "running" || t.status == "cancelling" {
			pending += len(t.rollouts) - len(t.results)
		}
	}
	pt.mu.Unlock()
	st := s.Pipeline.Stats()
	WriteJSON(w, http.StatusOK, map[string]any{
		"tasks":    tasks,
		"pipeline": map[string]any{"pending_sessions": pending, "init_queue_depth": st.InitQueue, "init_inflight": st.ActiveInit, "ready_depth": st.RunQueue, "run_inflight": st.ActiveRun, "postrun_queue_depth": st.EvalQueue, "postrun_inflight": st.ActiveEval},
		"nodes":    map[string]any{"total": 1, "healthy": 1, "node_ids": []any{pt.node}},
	})
}

func (s *Server) polarHealth(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]any{"status": "ok", "nodes": 1})
}

func (s *Server) polarTaskList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 200
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			fastAPIInvalid(w, "value_error", []any{"query", "limit"}, "must be an integer from 1 to 1000")
			return
		}
		limit = n
	}
	var since *float64
	if v := q.Get("since"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			fastAPIInvalid(w, "float_parsing", []any{"query", "since"}, "Input should be a valid number")
			return
		}
		since = &f
	}
	pt := s.polar
	pt.mu.Lock()
	out := []map[string]any{}
	for _, t := range pt.tasks {
		up := float64(t.updated.UnixNano()) / 1e9
		if (q.Get("status") != "" && t.status != q.Get("status")) || (q.Get("harness") != "" && t.harness != q.Get("harness")) || (since != nil && up < *since) {
			continue
		}
		out = append(out, map[string]any{"task_id": t.id, "status": t.status, "harness": t.harness, "model": t.model,
			"num_samples": len(t.rollouts), "completed_sessions": len(t.results), "errored_sessions": errored(t.results),
			"mean_reward": meanReward(t.results), "mean_traces": meanTraces(t.results), "mean_completions": meanCompletions(t.results),
			"created_at": float64(t.created.UnixNano()) / 1e9, "updated_at": up, "source": "live"})
	}
	pt.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i]["updated_at"].(float64) > out[j]["updated_at"].(float64) })
	WriteJSON(w, http.StatusOK, map[string]any{"tasks": out[:min(limit, len(out))]})
}

func errored(rs []PolarSession) int {
	n := 0
	for _, r := range rs {
		if r.Status != "COMPLETED" {
			n++
		}
	}
	return n
}

func meanReward(rs []PolarSession) *float64 {
	var sum float64
	n := 0
	for _, r := range rs {
		if tr := r.Trajectory.Traces; len(tr) > 0 && tr[len(tr)-1].Reward != nil {
			sum += *tr[len(tr)-1].Reward
			n++
		}
	}
	if n == 0 {
		return nil
	}
	m := sum / float64(n)
	return &m
}

func meanTraces(rs []PolarSession) *float64 {
	if len(rs) == 0 {
		return nil
	}
	n := 0
	for _, r := range rs {
		n += len(r.Trajectory.Traces)
	}
	m := float64(n) / float64(len(rs))
	return &m
}

func meanCompletions(rs []PolarSession) *float64 {
	if len(rs) == 0 {
		return nil
	}
	n := 0
	for _, r := range rs {
		if c, ok := r.Trajectory.Metadata["record_count"].(int); ok {
			n += c
		}
	}
	m := float64(n) / float64(len(rs))
	return &m
}

func (s *Server) polarSessions(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["task_id"]
	t := s.polarLookup(id)
	if t == nil {
		Detail(w, http.StatusNotFound, "Task not found")
		return
	}
	pt := s.polar
	pt.mu.Lock()
	done := map[string]PolarSession{}
	for _, sess := range t.results {
		done[sess.SessionID] = sess
	}
	rollouts := append([]string{}, t.rollouts...)
	pt.mu.Unlock()
	out := []map[string]any{}
	for _, rid := range rollouts {
		if sess, ok := done[rid]; ok {
			var reward *float64
			if tr := sess.Trajectory.Traces; len(tr) > 0 {
				reward = tr[len(tr)-1].Reward
			}
			out = append(out, map[string]any{"session_id": rid, "task_id": id, "status": sess.Status, "node_id": sess.NodeID, "reward": reward, "timing": sess.Timing, "error": sess.Error})
			continue
		}
		status := "REGISTERED"
		if ro, ok := s.Pipeline.Lookup(rid); ok {
			snap := s.Pipeline.Snapshot(ro)
			status = polarLiveStatus(string(snap.Status), snap.Stage)
		}
		out = append(out, map[string]any{"session_id": rid, "task_id": id, "status": status})
	}
	WriteJSON(w, http.StatusOK, map[string]any{"task_id": id, "sessions": out})
}

// polarLiveStatus names a live rollout's place in Polar's session states.
func polarLiveStatus(status, stage string) string {
	running := status == "running"
	switch stage {
	case trajectory.StageInit:
		if running {
			return "INITIALIZING"
		}
		return "REGISTERED"
	case trajectory.StageRun:
		if running {
			return "RUNNING"
		}
		return "READY"
	case trajectory.StageEval:
		if running {
			return "EVALUATING"
		}
		return "POST_RUN"
	}
	return "REGISTERED"
}

// polarEvents is GET /events: the task and session events as SSE.
func (s *Server) polarEvents(w http.ResponseWriter, r *http.Request) {
	sub := s.polar.events.subscribe()
	defer s.polar.events.unsubscribe(sub)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	flush := func() {
		if fl != nil {
			fl.Flush()
		}
	}
	fmt.Fprint(w, ": connected\n\n")
	flush()
	ctx, cancel := s.waitCtx(r)
	defer cancel()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-sub.ch:
			if !ok {
				return // too slow: dropped, the client reconnects
			}
			_, _ = w.Write(ev)
			flush()
		case <-keep.C:
			fmt.Fprint(w, ": heartbeat\n\n")
			flush()
		}
	}
}

// eventBus fans events out to SSE subscribers. A subscriber that falls
// 256 events behind is dropped rather than slowing the host.
type eventBus struct {
	mu   sync.Mutex
	seq  uint64
	subs map[*subscriber]struct{}
}

type subscriber struct{ ch chan []byte }

func newEventBus() *eventBus { return &eventBus{subs: map[*subscriber]struct{}{}} }

func (b *eventBus) subscribe() *subscriber {
	s := &subscriber{ch: make(chan []byte, 256)}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

func (b *eventBus) unsubscribe(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[s]; ok {
		delete(b.subs, s)
		close(s.ch)
	}
}

func (b *eventBus) publish(typ string, payload map[string]any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	data, _ := json.Marshal(map[string]any{"type": typ, "payload": payload, "ts": float64(time.Now().UnixNano()) / 1e9})
	ev := []byte(fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", b.seq, typ, data))
	for s := range b.subs {
		select {
		case s.ch <- ev:
		default:
			delete(b.subs, s)
			close(s.ch)
		}
	}
}
