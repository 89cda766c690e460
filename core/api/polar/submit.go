package polar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/core/trajectory"
)

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
	api.FastAPIInvalid(w, "value_error", loc, msg)
}

func (s *server) submit(w http.ResponseWriter, r *http.Request) {
	var tr polarTaskRequest
	if e := api.Decode(w, r, s.svc.Settings().Server.MaxBodyBytes, &tr); e != nil {
		if e.Status == http.StatusRequestEntityTooLarge || e.Status == http.StatusRequestTimeout {
			api.WriteError(w, e)
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
			api.Detail(w, e.Status, e.Message) // Polar's 503: the domain is down
		}
		return
	}
	// A task of a host that crashed comes back from the store, so one
	// still running there is refused below as one in memory would be.
	s.lookup(tr.TaskID)
	pt := s.tasks
	pt.mu.Lock()
	now := time.Now()
	if until, dead := pt.tombstones[tr.TaskID]; dead && now.Before(until) || s.polarTombstoned(tr.TaskID, now) {
		pt.mu.Unlock()
		api.Detail(w, http.StatusConflict, fmt.Sprintf("task %s was cancelled before submission", tr.TaskID))
		return
	}
	if old := pt.tasks[tr.TaskID]; old != nil && (old.status == "running" || old.status == "cancelling") {
		pt.mu.Unlock()
		api.Detail(w, http.StatusConflict, fmt.Sprintf("task %s is already running", tr.TaskID))
		return
	}
	// Held across the submit so a concurrent duplicate id waits and then
	// sees this one running.
	defer pt.mu.Unlock()
	// Durable with the rollouts: the task's group and rollouts, so a
	// restarted host finds them. A resubmitted id's record is replaced.
	rs, e := s.svc.Enqueue(reqs, &store.Keyed{Key: polarKey(task.id), Sub: store.Submission{GroupID: task.group}, Replace: true}, "num_samples")
	if e != nil {
		api.Detail(w, e.Status, e.Message)
		return
	}
	task.rollouts = make([]string, len(rs))
	for i, r := range rs {
		task.rollouts[i] = r.ID
	}
	task.created, task.updated = now, now
	pt.tasks[task.id] = task
	pt.prune(s.svc)
	pt.events.publish("task.created", map[string]any{"task_id": task.id, "status": "running", "harness": task.harness, "model": task.model, "num_samples": len(rs)})
	go s.polarWatch(task, rs)
	api.WriteJSON(w, http.StatusOK, map[string]string{"task_id": task.id, "status": "running"})
}

// polarRecord reads a task id's record: the task's latest submission.
// A store written before records were one a task holds numbered slots
// (polarSlotKey) instead, the last used one the task's; they are read
// when there is no record, and expire with the rest.
func (s *server) polarRecord(id string) (store.Submission, bool) {
	if sub, ok := s.svc.Record(polarKey(id)); ok {
		return sub, true
	}
	var last store.Submission
	found := false
	for k := 1; k < 1<<16; k++ {
		v, ok := s.svc.Record(polarSlotKey(id, k))
		if !ok {
			break
		}
		last, found = v, true
	}
	return last, found
}

// polarKey is a task's record: "=" never follows the prefix in a slot key.
func polarKey(id string) string { return api.PolarKeyPrefix + "=" + id }

// polarTombKey is a task's cancel marker (DELETE with register_if_missing).
func polarTombKey(id string) string { return api.PolarKeyPrefix + "!" + id }

// polarTombstoned reports a stored cancel marker younger than tombstoneTTL.
func (s *server) polarTombstoned(id string, now time.Time) bool {
	m, ok := s.svc.Record(polarTombKey(id))
	return ok && now.Sub(m.At) < tombstoneTTL
}

func polarSlotKey(id string, k int) string { return fmt.Sprintf("%s%d:%s", api.PolarKeyPrefix, k, id) }

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
func (s *server) polarRequests(tr *polarTaskRequest) ([]pipeline.Request, *polarTask, *api.Error) {
	sr, strategy, row, e := s.polarSubmission(tr)
	if e == nil {
		e = s.svc.Validate(&sr)
	}
	var domain string
	if e == nil {
		domain, e = s.svc.ResolveDomain(strategy, "task")
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
			return nil, nil, api.Invalid("instruction", "empty, and evaluator.config has no prompt of its own")
		}
		key := "prompt"
		if domain == "swe" {
			key = "problem_statement"
		}
		row[key], _ = json.Marshal(*tr.Instruction)
	}
	delete(row, "data_source")
	row["domain"], _ = json.Marshal(domain)
	sr.Task, _ = json.Marshal(row)
	reqs, gid := s.svc.Group(&sr, domain)
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
func (s *server) polarSubmission(tr *polarTaskRequest) (api.SubmitRequest, string, map[string]json.RawMessage, *api.Error) {
	var sr api.SubmitRequest
	if tr.TaskID == "" || len(tr.TaskID) > 512 {
		return sr, "", nil, api.Invalid("task_id", "required: a non-empty string of at most 512 characters")
	}
	if tr.Instruction == nil {
		return sr, "", nil, api.Invalid("instruction", "Field required")
	}
	if tr.Agent == nil {
		return sr, "", nil, api.Invalid("agent", "Field required")
	}
	sr.N, sr.Priority, sr.EarlyStopMinUsable, sr.MaxTurns = tr.NumSamples, tr.DispatchPriority, tr.EarlyStop, tr.MaxSteps
	secs := 600.0
	if tr.TimeoutSeconds != nil {
		secs = *tr.TimeoutSeconds
	}
	// Past the limit stays past it (the v1 check refuses it) without overflowing a Duration.
	to := api.Timeout(math.Min(secs, api.MaxTimeout.Seconds()+1) * float64(time.Second))
	sr.Timeout = &to
	if rt := tr.Runtime; rt != nil {
		switch {
		case rt.Backend != "" && rt.Backend != "docker" && rt.Backend != "apptainer":
			return sr, "", nil, api.Invalid("runtime.backend", "must be docker or apptainer, got %q", rt.Backend)
		case strings.TrimSpace(rt.Image) == "":
			return sr, "", nil, api.Invalid("runtime.image", "runtime image must be non-empty")
		case len(rt.Prepare) > 0, len(rt.EvalPrepare) > 0:
			return sr, "", nil, api.Invalid("runtime.prepare", "not supported: the domain prepares its own sandbox; put setup steps in the domain's image or task row")
		case len(rt.Env) > 0:
			return sr, "", nil, api.Invalid("runtime.env", "not supported: the domain sets the sandbox environment")
		case rt.GPUs > 0:
			return sr, "", nil, api.Invalid("runtime.gpus", "not supported: sandboxes here have no GPUs")
		case rt.ImportPath != nil, rt.DirectExecInitCommand != nil:
			return sr, "", nil, api.Invalid("runtime.import_path", "not supported: custom runtimes are not loaded")
		case len(rt.InternetVolumes) > 0:
			return sr, "", nil, api.Invalid("runtime.internet_volumes", "not supported: sandboxes here have no network")
		}
	}
	ag := tr.Agent
	if ag.Harness != "" && ag.Harness != "prorl" {
		// Polar's harness names (claude_code, qwen_code) are the presets'
		// with hyphens; the gateway runs them.
		name := strings.ReplaceAll(ag.Harness, "_", "-")
		if _, ok := s.svc.Settings().Harnesses[name]; !ok {
			return sr, "", nil, api.Invalid("agent.harness", "harness %q is not configured here (configured: %s; \"prorl\" is the host's own agent loop)", ag.Harness, strings.Join(slices.Sorted(maps.Keys(s.svc.Settings().Harnesses)), ", "))
		}
		sr.Harness = &api.HarnessRequest{Name: name}
		if tr.Instruction != nil {
			sr.Harness.Instruction = *tr.Instruction
		}
		if e := s.svc.CheckHarness(sr.Harness, "agent.harness"); e != nil {
			return sr, "", nil, e
		}
	}
	switch {
	case ag.ImportPath != nil:
		return sr, "", nil, api.Invalid("agent.import_path", "not supported: this host runs its own agent loop (harness \"prorl\")")
	case len(ag.Env) > 0:
		return sr, "", nil, api.Invalid("agent.env", "not supported: the agent loop runs in the host, not in an environment of its own")
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
		return sr, "", nil, api.Invalid("builder.strategy", "must be per_request or prefix_merging (both give one exact trace per session here), got %q", b.Strategy)
	}
	ev := tr.Evaluator
	if ev == nil || ev.Strategy == "" {
		return sr, "", nil, api.Invalid("evaluator.strategy", "required: the domain that scores the task, or one of its data_source names")
	}
	if len(ev.Env) > 0 {
		return sr, "", nil, api.Invalid("evaluator.env", "not supported: the domain's evaluator has its own configuration")
	}
	row := map[string]json.RawMessage{}
	if c := bytes.TrimSpace(ev.Config); len(c) > 0 && string(c) != "null" {
		if c[0] != '{' || json.Unmarshal(c, &row) != nil {
			return sr, "", nil, api.Invalid("evaluator.config", "must be a JSON object: the domain's task row")
		}
	}
	var meta map[string]any
	if m := bytes.TrimSpace(tr.Metadata); len(m) > 0 && string(m) != "null" {
		if err := json.Unmarshal(m, &meta); err != nil || meta == nil {
			return sr, "", nil, api.Invalid("metadata", "must be a JSON object")
		}
	}
	if v, ok := meta["agent_timeout"]; ok && v != nil {
		if f, isNum := v.(float64); !isNum || !(f > 0) {
			return sr, "", nil, api.Invalid("metadata", "metadata.agent_timeout must be a positive finite number")
		}
	}
	// Polar's per-sample eval seeds: seed base + sample index (as v1 seeds a group).
	if v, ok := meta["eval_sampling_seed_base"]; ok && v != nil {
		f, isNum := v.(float64)
		if !isNum || f != math.Trunc(f) || f < 0 {
			return sr, "", nil, api.Invalid("metadata.eval_sampling_seed_base", "eval_sampling_seed_base must be an integer")
		}
		seed := int64(f)
		sr.Sampling.Seed = &seed
	}
	sr.Metadata, _ = json.Marshal(map[string]any{"polar_task_id": tr.TaskID, "task_metadata": meta})
	if tr.CallbackURL != nil && *tr.CallbackURL != "" {
		// The host POSTs results there: only where the operator allows.
		if err := s.callbacks.policy.CheckURL(*tr.CallbackURL); err != nil {
			return sr, "", nil, api.Invalid("callback_url", "%v", err)
		}
	}
	return sr, ev.Strategy, row, nil
}

// polarSampling maps agent.settings to sampling: it checks each value's
// type and refuses unknown keys; the ranges are the v1 checks'.
func polarSampling(set map[string]any) (sp trajectory.Sampling, turns int, e *api.Error) {
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
				return sp, 0, api.Invalid(field, "must be a number")
			}
			if k == "temperature" {
				sp.Temperature = &f
			} else {
				sp.TopP = &f
			}
		case "top_k", "seed", "sampling_seed", "max_tokens", "max_tokens_per_turn", "max_total_tokens", "max_turns", "max_steps":
			if !isNum || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
				return sp, 0, api.Invalid(field, "must be an integer")
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
					return sp, 0, api.Invalid(field, "must be at least 1")
				}
				turns = n
			}
		case "stop":
			arr, ok := v.([]any)
			if !ok {
				return sp, 0, api.Invalid(field, "must be a list of strings")
			}
			for _, a := range arr {
				str, ok := a.(string)
				if !ok {
					return sp, 0, api.Invalid(field, "must be a list of strings")
				}
				sp.Stop = append(sp.Stop, str)
			}
		default:
			return sp, 0, api.Invalid(field, "unknown setting; this host reads temperature, top_p, top_k, seed, sampling_seed, max_tokens, max_total_tokens, max_turns, stop")
		}
	}
	return sp, turns, nil
}
