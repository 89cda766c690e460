// Package polar serves Polar's task API (ProRL Agent's successor,
// src/polar/rollout/server.py), with its paths, field names and status
// codes, as an adapter over the host's api.Service: a task is a group of
// num_samples rollouts; evaluator.strategy names the domain and
// evaluator.config is the domain's task row; the instruction is the row's
// prompt. Errors are FastAPI's: {"detail": "..."} for 404, 409 and 503,
// {"detail": [{"type", "loc", "msg"}]} for 422.
package polar

import (
	"encoding/json"
	"net/http"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/openapi"
	"github.com/prorl/prorl/core/trajectory"
)

// server is the task API's state: the task records and where callbacks
// may go.
type server struct {
	svc       api.Service
	tasks     *polarTasks
	callbacks callbacks
}

func newServer(svc api.Service) *server {
	s := &server{svc: svc, tasks: newPolarTasks()}
	var err error
	if s.callbacks, err = newCallbacks(svc.Settings().Server.CallbackAllow); err != nil {
		// config.Validate refused it already; a config built in code gets none.
		svc.Logger().Error("Polar callbacks refused: bad allow-list", "error", err)
		s.callbacks, _ = newCallbacks(nil)
	}
	return s
}

// Routes are Polar's endpoints over svc.
func Routes(svc api.Service) []api.Route {
	s := newServer(svc)
	o, arr, str, flt, itg := openapi.Object, openapi.ArrayOf, openapi.String, openapi.Number, openapi.Integer
	pipelineStats := o(map[string]openapi.Schema{"pending_sessions": itg, "init_queue_depth": itg, "init_inflight": itg,
		"ready_depth": itg, "run_inflight": itg, "postrun_queue_depth": itg, "postrun_inflight": itg},
		"pending_sessions", "init_queue_depth", "init_inflight", "ready_depth", "run_inflight", "postrun_queue_depth", "postrun_inflight")
	return []api.Route{
		{Path: "/rollout/task/submit", Method: http.MethodPost, Name: "polar_submit", Level: api.UserLevel, Handler: s.submit,
			Doc: api.Doc{Summary: "Polar: submit a task of num_samples sessions", Body: polarTaskRequest{},
				Example: map[string]any{"task_id": "t-1", "instruction": "What is 17 + 25?", "num_samples": 2,
					"agent":     map[string]any{"harness": "prorl", "model_name": "policy"},
					"evaluator": map[string]any{"strategy": "math", "config": map[string]any{"answer": "42"}}},
				Resp: o(map[string]openapi.Schema{"task_id": str, "status": str}, "task_id", "status")}},
		{Path: "/rollout/task/{task_id:.+}", Method: http.MethodGet, Name: "polar_get_task", Level: api.UserLevel, Handler: s.get,
			Doc: api.Doc{Summary: "Polar: a task's status and finished sessions", Resp: PolarTaskStatus{}}},
		{Path: "/rollout/task/{task_id:.+}", Method: http.MethodDelete, Name: "polar_cancel_task", Level: api.UserLevel, Handler: s.cancel,
			Doc: api.Doc{Summary: "Polar: cancel a task", Resp: PolarTaskStatus{}}},
		{Path: "/rollout/status", Method: http.MethodGet, Name: "polar_status", Level: api.UserLevel, Handler: s.status,
			Doc: api.Doc{Summary: "Polar: tasks and queues",
				Resp: o(map[string]openapi.Schema{"tasks": openapi.MapOf(str), "pipeline": pipelineStats,
					"nodes": o(map[string]openapi.Schema{"total": itg, "healthy": itg, "node_ids": arr(str)}, "total", "healthy", "node_ids")}, "tasks", "pipeline", "nodes")}},
		{Path: "/tasks", Method: http.MethodGet, Name: "polar_tasks", Level: api.UserLevel, Handler: s.taskList,
			Doc: api.Doc{Summary: "Polar: recent tasks, newest first",
				Query: map[string]openapi.Schema{"limit": {"type": "integer", "minimum": 1}, "status": str, "harness": str, "since": openapi.Describe(flt, "Unix seconds: tasks updated since")},
				Resp: o(map[string]openapi.Schema{"tasks": arr(o(map[string]openapi.Schema{"task_id": str, "status": str, "harness": str, "model": str,
					"num_samples": itg, "completed_sessions": itg, "errored_sessions": itg, "mean_reward": openapi.Nullable(flt), "mean_traces": openapi.Nullable(flt),
					"mean_completions": openapi.Nullable(flt), "created_at": flt, "updated_at": flt, "source": str},
					"task_id", "status", "harness", "model", "num_samples", "completed_sessions", "errored_sessions", "mean_reward", "mean_traces", "mean_completions", "created_at", "updated_at", "source"))}, "tasks")}},
		{Path: "/tasks/{task_id:.+}/sessions", Method: http.MethodGet, Name: "polar_sessions", Level: api.UserLevel, Handler: s.sessions,
			Doc: api.Doc{Summary: "Polar: a task's sessions",
				Resp: o(map[string]openapi.Schema{"task_id": str, "sessions": arr(o(map[string]openapi.Schema{"session_id": str, "task_id": str, "status": str,
					"node_id": openapi.Nullable(str), "reward": openapi.Nullable(flt), "timing": openapi.Ref(PolarTiming{}), "error": openapi.Nullable(str)}, "session_id", "task_id", "status"))}, "task_id", "sessions")}},
		{Path: "/events", Method: http.MethodGet, Name: "polar_events", Level: api.UserLevel, Handler: s.events,
			Doc: api.Doc{Summary: "Polar: task events as server-sent events", ContentType: "text/event-stream", Resp: str}},
		{Path: "/health", Method: http.MethodGet, Name: "polar_health", Level: api.PublicLevel, Handler: s.health,
			Doc: api.Doc{Summary: "Polar: liveness", Resp: o(map[string]openapi.Schema{"status": str, "nodes": itg}, "status", "nodes")}},
	}
}

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
