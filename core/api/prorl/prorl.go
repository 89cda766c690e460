// Package prorl serves the ProRL Agent server's endpoints, with its paths
// and field names, so a trainer written for it (NeMo RL's ProRL
// environment) works unchanged: an adapter over the host's api.Service.
// FastAPI reports errors as {"detail": "..."}; so do these.
package prorl

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/openapi"
	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/trajectory"
)

// server is the compatible server's state: whether /start let it take
// jobs, and the /process jobs waiting (job id -> rollout id).
type server struct {
	svc     api.Service
	running atomic.Bool
	jobsMu  sync.Mutex
	jobs    map[string]string
}

// Routes are ProRL's endpoints over svc; they start stopped unless
// [compat] start_on_boot (NeMo RL calls /start).
func Routes(svc api.Service) []api.Route {
	s := &server{svc: svc, jobs: map[string]string{}}
	s.running.Store(svc.Settings().Compat.StartOnBoot)
	status := openapi.Object(map[string]openapi.Schema{"status": openapi.String}, "status")
	return []api.Route{
		{Path: "/start", Method: http.MethodPost, Name: "prorl_start", Level: api.AdminLevel, Handler: s.start,
			Doc: api.Doc{Summary: "ProRL: accept jobs", Resp: status}},
		{Path: "/stop", Method: http.MethodPost, Name: "prorl_stop", Level: api.AdminLevel, Handler: s.stop,
			Doc: api.Doc{Summary: "ProRL: stop accepting jobs; running ones are cancelled", Resp: status}},
		{Path: "/status", Method: http.MethodGet, Name: "prorl_status", Level: api.UserLevel, Handler: s.status,
			Doc: api.Doc{Summary: "ProRL: the server's queues", Resp: statusSchema()}},
		{Path: "/process", Method: http.MethodPost, Name: "prorl_process", Level: api.UserLevel, Handler: s.process,
			Doc: api.Doc{Summary: "ProRL: run one instance and answer its trajectory", Body: processRequest{},
				Resp: openapi.OneOf(openapi.Ref(Result{}), openapi.Object(map[string]openapi.Schema{"error": openapi.String}, "error"))}},
		{Path: "/cancel", Method: http.MethodPost, Name: "prorl_cancel", Level: api.UserLevel, Handler: s.cancel,
			Doc: api.Doc{Summary: "ProRL: cancel a job", Body: cancelRequest{}, Resp: status}},
		{Path: "/add_llm_server", Method: http.MethodPost, Name: "prorl_add_llm_server", Level: api.AdminLevel, Handler: s.addServer,
			Doc: api.Doc{Summary: "ProRL: add an inference server", Body: serverRequest{}, Resp: status}},
		{Path: "/clear_llm_server", Method: http.MethodPost, Name: "prorl_clear_llm_server", Level: api.AdminLevel, Handler: s.clearServers,
			Doc: api.Doc{Summary: "ProRL: remove every inference server", Resp: status}},
	}
}

func statusSchema() openapi.Schema {
	props := map[string]openapi.Schema{"status": openapi.String, "running": openapi.Boolean}
	req := []string{"status", "running"}
	for _, k := range []string{"pending_jobs", "jobs", "init", "run", "eval", "init_queue", "run_queue", "eval_queue", "active_init", "active_run", "active_eval", "total"} {
		props[k] = openapi.Integer
		req = append(req, k)
	}
	return openapi.Object(props, req...)
}

func (s *server) start(w http.ResponseWriter, _ *http.Request) {
	if !s.running.CompareAndSwap(false, true) {
		api.Detail(w, http.StatusBadRequest, "Server is already running")
		return
	}
	api.WriteJSON(w, http.StatusOK, map[string]string{"status": "Server started successfully"})
}

func (s *server) stop(w http.ResponseWriter, _ *http.Request) {
	if !s.running.CompareAndSwap(true, false) {
		api.Detail(w, http.StatusServiceUnavailable, "Server is not running")
		return
	}
	// Pending /process jobs fail, as in the ProRL server.
	s.jobsMu.Lock()
	ids := make(map[string]bool, len(s.jobs))
	for _, id := range s.jobs {
		ids[id] = true
	}
	s.jobsMu.Unlock()
	s.svc.CancelWhere(func(r *pipeline.Rollout) bool { return ids[r.ID] }, stopMessage)
	api.WriteJSON(w, http.StatusOK, map[string]string{"status": "Server stopped successfully"})
}

// requireRunning answers ProRL's 503 while the compatible server is
// stopped: everything but /start and the LLM-server calls.
func (s *server) requireRunning(w http.ResponseWriter) bool {
	if !s.running.Load() {
		api.Detail(w, http.StatusServiceUnavailable, "Server is not running")
		return false
	}
	return true
}

// stopMessage cancels the jobs /stop interrupts; their /process answers
// ProRL's 500.
const stopMessage = "server stopped"

func (s *server) status(w http.ResponseWriter, _ *http.Request) {
	if !s.requireRunning(w) {
		return
	}
	st := s.svc.Stats()
	s.jobsMu.Lock()
	pending := len(s.jobs)
	s.jobsMu.Unlock()
	// ProRL's process server reports running, jobs and the jobs inside each
	// stage; its thread server the queue fields: both are here.
	api.WriteJSON(w, http.StatusOK, map[string]any{
		"status": "running", "pending_jobs": pending,
		"running": true, "jobs": pending, "init": st.ActiveInit, "run": st.ActiveRun, "eval": st.ActiveEval,
		"init_queue": st.InitQueue, "run_queue": st.RunQueue, "eval_queue": st.EvalQueue,
		"active_init": st.ActiveInit, "active_run": st.ActiveRun, "active_eval": st.ActiveEval, "total": st.Total,
	})
}

// processRequest is the body of POST /process.
type processRequest struct {
	Instance       json.RawMessage `json:"instance"`
	SamplingParams map[string]any  `json:"sampling_params"`
	JobID          *string         `json:"job_id"`
}

// Message is a message as the ProRL server returns it: token_ids on
// every message, input_ids and logprobs on assistant messages.
type Message struct {
	Role      string     `json:"role"`
	Content   string     `json:"content"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	TokenIDs  []int      `json:"token_ids"`
	InputIDs  []int      `json:"input_ids,omitempty"`
	Logprobs  []float64  `json:"logprobs,omitempty"`
}

// ToolCall is {name, arguments}.
type ToolCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Result is the /process response.
type Result struct {
	InstanceID    any                `json:"instance_id"`
	TrajectoryID  any                `json:"trajectory_id"`
	Score         float64            `json:"score"`
	GitPatch      *string            `json:"git_patch"` // null unless the domain made a patch, as ProRL
	Success       bool               `json:"success"`
	Finish        bool               `json:"finish"`
	Messages      []Message          `json:"messages"`
	Tools         []trajectory.Tool  `json:"tools"`
	EndProperly   bool               `json:"end_properly"`
	Resolved      bool               `json:"resolved"`
	CriticalError *string            `json:"critical_error"`
	Filter        bool               `json:"filter"`
	Error         *string            `json:"error"`
	Timing        Timing             `json:"timing"`
	Metrics       map[string]float64 `json:"metrics,omitempty"`
	RolloutID     string             `json:"rollout_id"`
}

// Timing is in seconds.
type Timing struct {
	InitTime         float64 `json:"init_time"`
	RunTime          float64 `json:"run_time"`
	EvalTime         float64 `json:"eval_time"`
	OthersTime       float64 `json:"others_time"`
	CountedElapsed   float64 `json:"counted_elapsed"`
	TimeoutTriggered bool    `json:"timeout_triggered"`
}

func num(m map[string]any, key string) (float64, bool, *api.Error) {
	v, ok := m[key]
	if !ok || v == nil {
		return 0, false, nil
	}
	f, isNum := v.(float64)
	if !isNum {
		return 0, false, api.Invalid("sampling_params."+key, "must be a number")
	}
	return f, true, nil
}

// samplingFrom maps ProRL's sampling_params; keys it does not use are
// ignored, as the ProRL server ignores them.
func samplingFrom(sp map[string]any) (trajectory.Sampling, int, *api.Error) {
	var s trajectory.Sampling
	turns := 0
	if v, ok, e := num(sp, "temperature"); e != nil {
		return s, 0, e
	} else if ok {
		s.Temperature = &v
	}
	if v, ok, e := num(sp, "top_p"); e != nil {
		return s, 0, e
	} else if ok {
		s.TopP = &v
	}
	if v, ok, e := num(sp, "top_k"); e != nil {
		return s, 0, e
	} else if ok {
		k := int(v)
		s.TopK = &k
	}
	if v, ok, e := num(sp, "seed"); e != nil {
		return s, 0, e
	} else if ok {
		seed := int64(v)
		s.Seed = &seed
	}
	if v, ok, e := num(sp, "max_output_tokens"); e != nil {
		return s, 0, e
	} else if ok {
		s.MaxTokensPerTurn = int(v)
	} else if v, ok, _ := num(sp, "max_tokens"); ok {
		s.MaxTokensPerTurn = int(v)
	}
	if v, ok, e := num(sp, "max_model_len"); e != nil {
		return s, 0, e
	} else if ok {
		s.MaxTotalTokens = int(v)
	} else if in, ok, _ := num(sp, "max_input_tokens"); ok {
		s.MaxTotalTokens = int(in) + s.MaxTokensPerTurn
	}
	if v, ok, e := num(sp, "max_iterations"); e != nil {
		return s, 0, e
	} else if ok {
		if v != math.Trunc(v) || v < 1 || v > 1e6 {
			return s, 0, api.Invalid("sampling_params.max_iterations", "must be a whole number of turns from 1, got %v", v)
		}
		turns = int(v)
	}
	if v, ok := sp["strict_loop_detector"]; ok {
		b, isBool := v.(bool)
		if !isBool {
			return s, 0, api.Invalid("sampling_params.strict_loop_detector", "must be true or false, got %v", v)
		}
		s.StrictLoopDetector = b
	}
	for _, k := range []string{"top_k", "seed", "max_output_tokens", "max_tokens", "max_model_len", "max_input_tokens"} {
		if v, ok, _ := num(sp, k); ok && v != math.Trunc(v) {
			return s, 0, api.Invalid("sampling_params."+k, "must be an integer, got %v", v)
		}
	}
	return s, turns, nil
}

func (s *server) process(w http.ResponseWriter, r *http.Request) {
	if !s.requireRunning(w) {
		return
	}
	var req processRequest
	if e := api.Decode(w, r, s.svc.Settings().Server.MaxBodyBytes, &req); e != nil {
		api.WriteError(w, e)
		return
	}
	if !s.svc.HasBackends() {
		api.Detail(w, http.StatusServiceUnavailable, "No LLM server addresses configured")
		return
	}
	var inst struct {
		DataSource   string `json:"data_source"`
		InstanceID   any    `json:"instance_id"`
		TrajectoryID any    `json:"trajectory_id"`
	}
	if len(req.Instance) == 0 || req.Instance[0] != '{' || json.Unmarshal(req.Instance, &inst) != nil {
		api.WriteError(w, api.Invalid("instance", "required: a JSON object with data_source"))
		return
	}
	if inst.DataSource == "" {
		inst.DataSource = "swebench" // ProRL's default for a row without one
	}
	domain, ok := s.svc.DomainOf(inst.DataSource)
	if !ok {
		api.Detail(w, http.StatusBadRequest, fmt.Sprintf("Unknown data_source: %q", inst.DataSource))
		return
	}
	sampling, turns, e := samplingFrom(req.SamplingParams)
	if e != nil {
		// FastAPI's shape, as ProRL's server answers a bad request.
		api.Detail(w, http.StatusUnprocessableEntity, e.Field+": "+e.Message)
		return
	}
	sr := api.SubmitRequest{Task: req.Instance, Sampling: sampling}
	if turns > 0 {
		sr.MaxTurns = &turns
	}
	if e := s.svc.Validate(&sr); e != nil {
		api.WriteError(w, e)
		return
	}
	rs, e := s.svc.Enqueue([]pipeline.Request{{GroupID: pipeline.NewID("g-"), Domain: domain, Task: req.Instance, Sampling: sampling,
		MaxTurns: turns, MessageSpans: true}}, nil, "instance")
	if e != nil {
		api.WriteError(w, e)
		return
	}
	ro := rs[0]
	job := ro.ID
	if req.JobID != nil && *req.JobID != "" {
		job = *req.JobID
	}
	s.jobsMu.Lock()
	s.jobs[job] = ro.ID
	s.jobsMu.Unlock()
	defer func() {
		s.jobsMu.Lock()
		delete(s.jobs, job)
		s.jobsMu.Unlock()
	}()
	// The rollout ends by its own timeout with a partial trajectory; like
	// ProRL, 504 only when even that has not come after 2×timeout + 10 s.
	limit := time.NewTimer(2*ro.Req.Timeout + 10*time.Second)
	defer limit.Stop()
	select {
	case <-ro.Done():
	case <-limit.C:
		s.svc.Cancel(ro.ID, "no result within 2x rollout timeout + 10s")
		api.Detail(w, http.StatusGatewayTimeout, fmt.Sprintf("Job %s timed out", job))
		return
	case <-r.Context().Done():
		// The client gave up: nothing will read this result.
		s.svc.Cancel(ro.ID, "client disconnected")
		return
	}
	res, ok := s.svc.Result(ro.ID)
	if !ok {
		api.Detail(w, http.StatusInternalServerError, "result lost")
		return
	}
	// /process hands the result over: nothing else will fetch it.
	_, _ = s.svc.Ack([]string{ro.ID})
	if res.Status == trajectory.StatusCancelled {
		// Never a success with an empty response a trainer would train on:
		// ProRL answers a stopped job 500 and a cancelled one 200 with only
		// {"error"} (no messages, so NeMo RL retries it).
		if res.Failure != nil && res.Failure.Message == stopMessage {
			api.Detail(w, http.StatusInternalServerError, "Server is stopping; job cancelled")
			return
		}
		why := "cancelled"
		if res.Failure != nil && res.Failure.Message != "" {
			why = res.Failure.Message
		}
		api.WriteJSON(w, http.StatusOK, map[string]string{"error": fmt.Sprintf("Job %s cancelled: %s", job, why)})
		return
	}
	out := FromResult(res)
	out.InstanceID, out.TrajectoryID = inst.InstanceID, inst.TrajectoryID
	api.WriteJSON(w, http.StatusOK, out)
}

// FromResult converts a result to the ProRL server's shape.
func FromResult(res *trajectory.Result) Result {
	out := Result{
		Score: res.Reward, Resolved: res.Resolved, Tools: res.Tools, Metrics: res.Metrics, RolloutID: res.ID,
		Finish:      res.EndReason == "finish",
		EndProperly: res.Status == trajectory.StatusCompleted,
		Success:     res.Status == trajectory.StatusCompleted || res.Status == trajectory.StatusTruncated,
	}
	if out.Tools == nil {
		out.Tools = []trajectory.Tool{}
	}
	var info struct {
		GitPatch *string `json:"git_patch"`
	}
	_ = json.Unmarshal(res.Info, &info)
	out.GitPatch = info.GitPatch
	// A truncated rollout is a success, unless it never got an assistant
	// turn (the first prompt already overflowed the context): ProRL reports
	// that as a run error, and there is nothing to train on.
	truncatedEmpty := res.Status == trajectory.StatusTruncated && !hasAssistant(res.Messages)
	if truncatedEmpty {
		out.Success = false
	}
	if f := res.Failure; f != nil && (res.Status != trajectory.StatusTruncated || truncatedEmpty) {
		ce := f.Stage
		if res.Status == trajectory.StatusTimeout {
			ce = "timeout"
		}
		msg := f.Message
		if !strings.HasPrefix(msg, f.Reason+":") {
			msg = f.Reason + ": " + msg
		}
		out.CriticalError, out.Error, out.Filter = &ce, &msg, true
	}
	t := res.Timing
	out.Timing = Timing{InitTime: t.InitMS / 1000, RunTime: t.RunMS / 1000, EvalTime: t.EvalMS / 1000, OthersTime: t.QueuedMS / 1000,
		CountedElapsed: (t.InitMS + t.RunMS + t.EvalMS) / 1000, TimeoutTriggered: res.Status == trajectory.StatusTimeout}
	ids := res.Tokens.IDs
	out.Messages = make([]Message, 0, len(res.Messages))
	for _, m := range res.Messages {
		pm := Message{Role: m.Role, Content: m.Content, TokenIDs: []int{}}
		for _, tc := range m.ToolCalls {
			pm.ToolCalls = append(pm.ToolCalls, ToolCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		if sp := m.Span; sp != nil && sp[1] <= len(ids) && sp[0] <= sp[1] {
			pm.TokenIDs = ids[sp[0]:sp[1]]
			if m.Role == "assistant" {
				pm.InputIDs = ids[:sp[0]]
				pm.Logprobs = res.Tokens.Logprobs[sp[0]:sp[1]]
			}
		}
		out.Messages = append(out.Messages, pm)
	}
	// ProRL ends a trajectory on the assistant: observations after the last
	// assistant turn (a tool reply when max_iterations ran out) are dropped,
	// as its tests assert. Their tokens are prompt, never trained on.
	// With no assistant turn at all nothing is left, as in ProRL.
	last := len(out.Messages) - 1
	for last >= 0 && out.Messages[last].Role != "assistant" {
		last--
	}
	out.Messages = out.Messages[:last+1]
	return out
}

func hasAssistant(ms []trajectory.Message) bool {
	for _, m := range ms {
		if m.Role == "assistant" {
			return true
		}
	}
	return false
}

func (s *server) cancel(w http.ResponseWriter, r *http.Request) {
	var req cancelRequest
	if !s.requireRunning(w) {
		return
	}
	if e := api.Decode(w, r, 1<<16, &req); e != nil {
		api.WriteError(w, e)
		return
	}
	// An unknown or finished job is acknowledged too, as ProRL does: the
	// request is recorded, there is just nothing left to stop.
	s.jobsMu.Lock()
	id, ok := s.jobs[req.JobID]
	s.jobsMu.Unlock()
	if ok {
		s.svc.Cancel(id, "cancelled by /cancel")
	}
	api.WriteJSON(w, http.StatusOK, map[string]string{"status": "Cancel requested for job " + req.JobID})
}

func (s *server) addServer(w http.ResponseWriter, r *http.Request) {
	var req serverRequest
	if e := api.Decode(w, r, 1<<16, &req); e != nil {
		api.WriteError(w, e)
		return
	}
	st, code, e := s.svc.AddBackend(r.Context(), api.BackendRequest{URL: req.Address, Protocol: s.svc.Settings().Compat.Protocol, Model: s.svc.Settings().Compat.Model}, "")
	if e != nil {
		if e.Field == "url" {
			e.Field = "address"
		}
		api.WriteError(w, e)
		return
	}
	msg := "LLM server added: " + st.URL
	if code == http.StatusOK {
		msg = "LLM server already registered: " + st.URL
	}
	api.WriteJSON(w, http.StatusOK, map[string]string{"status": msg})
}

func (s *server) clearServers(w http.ResponseWriter, _ *http.Request) {
	s.svc.ClearBackends()
	api.WriteJSON(w, http.StatusOK, map[string]string{"status": "LLM servers cleared"})
}

// cancelRequest is POST /cancel.
type cancelRequest struct {
	JobID string `json:"job_id"`
}

// serverRequest is POST /add_llm_server.
type serverRequest struct {
	Address string `json:"address"`
}
