package api

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/trajectory"
)

// The ProRL Agent server's endpoints, with its paths and field names, so a
// trainer written for it (NeMo RL's ProRL environment) works unchanged.
// FastAPI reports errors as {"detail": "..."}; so do these.

func detail(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"detail": msg})
}

func (s *Server) prorlStart(w http.ResponseWriter, _ *http.Request) {
	if !s.compatRunning.CompareAndSwap(false, true) {
		detail(w, http.StatusBadRequest, "Server is already running")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "Server started successfully"})
}

func (s *Server) prorlStop(w http.ResponseWriter, _ *http.Request) {
	if !s.compatRunning.CompareAndSwap(true, false) {
		detail(w, http.StatusServiceUnavailable, "Server is not running")
		return
	}
	// Pending /process jobs fail, as in the ProRL server.
	s.jobsMu.Lock()
	ids := make(map[string]bool, len(s.jobs))
	for _, id := range s.jobs {
		ids[id] = true
	}
	s.jobsMu.Unlock()
	s.Pipeline.CancelWhere(func(r *pipeline.Rollout) bool { return ids[r.ID] }, stopMessage)
	writeJSON(w, http.StatusOK, map[string]string{"status": "Server stopped successfully"})
}

// requireRunning answers ProRL's 503 while the compatible server is
// stopped: everything but /start and the LLM-server calls.
func (s *Server) requireRunning(w http.ResponseWriter) bool {
	if !s.compatRunning.Load() {
		detail(w, http.StatusServiceUnavailable, "Server is not running")
		return false
	}
	return true
}

// stopMessage cancels the jobs /stop interrupts; their /process answers
// ProRL's 500.
const stopMessage = "server stopped"

func (s *Server) prorlStatus(w http.ResponseWriter, _ *http.Request) {
	if !s.requireRunning(w) {
		return
	}
	st := s.Pipeline.Stats()
	s.jobsMu.Lock()
	pending := len(s.jobs)
	s.jobsMu.Unlock()
	// ProRL's process server reports running, jobs and the jobs inside each
	// stage; its thread server the queue fields: both are here.
	writeJSON(w, http.StatusOK, map[string]any{
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

// ProRLMessage is a message as the ProRL server returns it: token_ids on
// every message, input_ids and logprobs on assistant messages.
type ProRLMessage struct {
	Role      string          `json:"role"`
	Content   string          `json:"content"`
	ToolCalls []ProRLToolCall `json:"tool_calls,omitempty"`
	TokenIDs  []int           `json:"token_ids"`
	InputIDs  []int           `json:"input_ids,omitempty"`
	Logprobs  []float64       `json:"logprobs,omitempty"`
}

// ProRLToolCall is {name, arguments}.
type ProRLToolCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ProRLResult is the /process response.
type ProRLResult struct {
	InstanceID    any                `json:"instance_id"`
	TrajectoryID  any                `json:"trajectory_id"`
	Score         float64            `json:"score"`
	GitPatch      *string            `json:"git_patch"` // null unless the domain made a patch, as ProRL
	Success       bool               `json:"success"`
	Finish        bool               `json:"finish"`
	Messages      []ProRLMessage     `json:"messages"`
	Tools         []trajectory.Tool  `json:"tools"`
	EndProperly   bool               `json:"end_properly"`
	Resolved      bool               `json:"resolved"`
	CriticalError *string            `json:"critical_error"`
	Filter        bool               `json:"filter"`
	Error         *string            `json:"error"`
	Timing        ProRLTiming        `json:"timing"`
	Metrics       map[string]float64 `json:"metrics,omitempty"`
	RolloutID     string             `json:"rollout_id"`
}

// ProRLTiming is in seconds.
type ProRLTiming struct {
	InitTime         float64 `json:"init_time"`
	RunTime          float64 `json:"run_time"`
	EvalTime         float64 `json:"eval_time"`
	OthersTime       float64 `json:"others_time"`
	CountedElapsed   float64 `json:"counted_elapsed"`
	TimeoutTriggered bool    `json:"timeout_triggered"`
}

func num(m map[string]any, key string) (float64, bool, *Error) {
	v, ok := m[key]
	if !ok || v == nil {
		return 0, false, nil
	}
	f, isNum := v.(float64)
	if !isNum {
		return 0, false, invalid("sampling_params."+key, "must be a number")
	}
	return f, true, nil
}

// samplingFromProRL maps ProRL's sampling_params; keys it does not use are
// ignored, as the ProRL server ignores them.
func samplingFromProRL(sp map[string]any) (trajectory.Sampling, int, *Error) {
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
			return s, 0, invalid("sampling_params.max_iterations", "must be a whole number of turns from 1, got %v", v)
		}
		turns = int(v)
	}
	if v, ok := sp["strict_loop_detector"]; ok {
		b, isBool := v.(bool)
		if !isBool {
			return s, 0, invalid("sampling_params.strict_loop_detector", "must be true or false, got %v", v)
		}
		s.StrictLoopDetector = b
	}
	for _, k := range []string{"top_k", "seed", "max_output_tokens", "max_tokens", "max_model_len", "max_input_tokens"} {
		if v, ok, _ := num(sp, k); ok && v != math.Trunc(v) {
			return s, 0, invalid("sampling_params."+k, "must be an integer, got %v", v)
		}
	}
	return s, turns, nil
}

func (s *Server) prorlProcess(w http.ResponseWriter, r *http.Request) {
	if !s.requireRunning(w) {
		return
	}
	var req processRequest
	if e := decode(w, r, s.Cfg.Server.MaxBodyBytes, &req); e != nil {
		writeError(w, e)
		return
	}
	// A coordinator's backends are its nodes'.
	if s.Pool.Len() == 0 && s.Cluster == nil {
		detail(w, http.StatusServiceUnavailable, "No LLM server addresses configured")
		return
	}
	var inst struct {
		DataSource   string `json:"data_source"`
		InstanceID   any    `json:"instance_id"`
		TrajectoryID any    `json:"trajectory_id"`
	}
	if len(req.Instance) == 0 || req.Instance[0] != '{' || json.Unmarshal(req.Instance, &inst) != nil {
		writeError(w, invalid("instance", "required: a JSON object with data_source"))
		return
	}
	if inst.DataSource == "" {
		inst.DataSource = "swebench" // ProRL's default for a row without one
	}
	plug, ok := s.Plugins.ByDataSource(inst.DataSource)
	if !ok {
		detail(w, http.StatusBadRequest, fmt.Sprintf("Unknown data_source: %q", inst.DataSource))
		return
	}
	sampling, turns, e := samplingFromProRL(req.SamplingParams)
	if e != nil {
		// FastAPI's shape, as ProRL's server answers a bad request.
		detail(w, http.StatusUnprocessableEntity, e.Field+": "+e.Message)
		return
	}
	sr := SubmitRequest{Task: req.Instance, Sampling: sampling}
	if turns > 0 {
		sr.MaxTurns = &turns
	}
	if e := sr.validate("", s.Cfg.Server.MaxSamples); e != nil {
		writeError(w, e)
		return
	}
	rs, e := s.enqueue([]pipeline.Request{{GroupID: pipeline.NewID("g-"), Domain: plug.Name, Task: req.Instance, Sampling: sampling,
		MaxTurns: turns, MessageSpans: true}}, nil, "instance")
	if e != nil {
		writeError(w, e)
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
		s.Pipeline.Cancel(ro.ID, "no result within 2x rollout timeout + 10s")
		detail(w, http.StatusGatewayTimeout, fmt.Sprintf("Job %s timed out", job))
		return
	case <-r.Context().Done():
		// The client gave up: nothing will read this result.
		s.Pipeline.Cancel(ro.ID, "client disconnected")
		return
	}
	res, ok := s.Store.Get(ro.ID)
	if !ok {
		detail(w, http.StatusInternalServerError, "result lost")
		return
	}
	// /process hands the result over: nothing else will fetch it.
	s.Store.Ack([]string{ro.ID})
	if res.Status == trajectory.StatusCancelled {
		// Never a success with an empty response a trainer would train on:
		// ProRL answers a stopped job 500 and a cancelled one 200 with only
		// {"error"} (no messages, so NeMo RL retries it).
		if res.Failure != nil && res.Failure.Message == stopMessage {
			detail(w, http.StatusInternalServerError, "Server is stopping; job cancelled")
			return
		}
		why := "cancelled"
		if res.Failure != nil && res.Failure.Message != "" {
			why = res.Failure.Message
		}
		writeJSON(w, http.StatusOK, map[string]string{"error": fmt.Sprintf("Job %s cancelled: %s", job, why)})
		return
	}
	out := ToProRL(res)
	out.InstanceID, out.TrajectoryID = inst.InstanceID, inst.TrajectoryID
	writeJSON(w, http.StatusOK, out)
}

// ToProRL converts a result to the ProRL server's shape.
func ToProRL(res *trajectory.Result) ProRLResult {
	out := ProRLResult{
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
	out.Timing = ProRLTiming{InitTime: t.InitMS / 1000, RunTime: t.RunMS / 1000, EvalTime: t.EvalMS / 1000, OthersTime: t.QueuedMS / 1000,
		CountedElapsed: (t.InitMS + t.RunMS + t.EvalMS) / 1000, TimeoutTriggered: res.Status == trajectory.StatusTimeout}
	ids := res.Tokens.IDs
	out.Messages = make([]ProRLMessage, 0, len(res.Messages))
	for _, m := range res.Messages {
		pm := ProRLMessage{Role: m.Role, Content: m.Content, TokenIDs: []int{}}
		for _, tc := range m.ToolCalls {
			pm.ToolCalls = append(pm.ToolCalls, ProRLToolCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments})
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

func (s *Server) prorlCancel(w http.ResponseWriter, r *http.Request) {
	var req prorlCancelRequest
	if !s.requireRunning(w) {
		return
	}
	if e := decode(w, r, 1<<16, &req); e != nil {
		writeError(w, e)
		return
	}
	// An unknown or finished job is acknowledged too, as ProRL does: the
	// request is recorded, there is just nothing left to stop.
	s.jobsMu.Lock()
	id, ok := s.jobs[req.JobID]
	s.jobsMu.Unlock()
	if ok {
		s.Pipeline.Cancel(id, "cancelled by /cancel")
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "Cancel requested for job " + req.JobID})
}

func (s *Server) prorlAddServer(w http.ResponseWriter, r *http.Request) {
	var req prorlServerRequest
	if e := decode(w, r, 1<<16, &req); e != nil {
		writeError(w, e)
		return
	}
	st, code, e := s.addBackendReq(r.Context(), BackendRequest{URL: req.Address, Protocol: s.Cfg.Compat.Protocol, Model: s.Cfg.Compat.Model}, "")
	if e != nil {
		if e.Field == "url" {
			e.Field = "address"
		}
		writeError(w, e)
		return
	}
	msg := "LLM server added: " + st.URL
	if code == http.StatusOK {
		msg = "LLM server already registered: " + st.URL
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": msg})
}

func (s *Server) prorlClearServers(w http.ResponseWriter, _ *http.Request) {
	s.Pool.Clear()
	writeJSON(w, http.StatusOK, map[string]string{"status": "LLM servers cleared"})
}

// prorlCancelRequest is POST /cancel.
type prorlCancelRequest struct {
	JobID string `json:"job_id"`
}

// prorlServerRequest is POST /add_llm_server.
type prorlServerRequest struct {
	Address string `json:"address"`
}
