package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/coord"
	"github.com/prorl/prorl/core/gateway"
	"github.com/prorl/prorl/core/openapi"
	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/trajectory"
)

// The OpenAPI document of every route (GET /openapi.json). Bodies are
// reflected from the structs the handlers decode and encode; a body a
// handler builds as a map is written here as a schema, and the e2e test
// validates live answers of every dialect against the document.

var (
	o   = openapi.Object
	arr = openapi.ArrayOf
	str = openapi.String
	flt = openapi.Number
	itg = openapi.Integer
	bln = openapi.Boolean
)

// routeDoc documents one route of routes(), by its name.
type routeDoc struct {
	summary, description string
	body                 any // request body: a Go value or a Schema
	example              any
	ok                   string         // success status (default 200)
	resp                 any            // success body; nil: none
	more                 map[string]any // other answers by status, as resp
	contentType          string
	// query parameter schemas (default: string), for the names the route takes.
	query map[string]openapi.Schema
}

var (
	errorBody  = o(map[string]openapi.Schema{"error": openapi.Ref(Error{})}, "error")
	prorlError = o(map[string]openapi.Schema{"detail": str}, "detail")
	polarError = openapi.OneOf(
		o(map[string]openapi.Schema{"detail": str}, "detail"),
		o(map[string]openapi.Schema{"detail": arr(o(map[string]openapi.Schema{"type": str, "loc": arr(openapi.Any), "msg": str}, "type", "loc", "msg"))}, "detail"))
	nodeReplies = openapi.MapOf(openapi.Ref(coord.NodeReply{}))
	cancelled   = o(map[string]openapi.Schema{"cancelled": itg}, "cancelled")
	waitParam   = openapi.Describe(str, `how long to wait for the result: a duration ("30s") or seconds`)
	seqParam    = openapi.Schema{"type": "integer", "minimum": 0}
	limitParam  = openapi.Schema{"type": "integer", "minimum": 1}
)

func apiDocs() map[string]routeDoc {
	pipelineStats := o(map[string]openapi.Schema{"pending_sessions": itg, "init_queue_depth": itg, "init_inflight": itg,
		"ready_depth": itg, "run_inflight": itg, "postrun_queue_depth": itg, "postrun_inflight": itg},
		"pending_sessions", "init_queue_depth", "init_inflight", "ready_depth", "run_inflight", "postrun_queue_depth", "postrun_inflight")
	return map[string]routeDoc{
		"submit": {summary: "Submit a task as a group of n rollouts", ok: "202", body: SubmitRequest{}, resp: SubmitResponse{},
			example:     map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}, "n": 4, "sampling": map[string]any{"temperature": 1.0}},
			description: "Answers 202 once the rollouts are stored; 200 with the same ids for a repeated idempotency_key."},
		"submit_batch": {summary: "Submit many groups at once (optionally dynamic sampling)", ok: "202", body: BatchRequest{},
			resp: o(map[string]openapi.Schema{"groups": arr(openapi.Ref(SubmitResponse{})), "dynamic_id": openapi.Describe(str, "with informative_groups: the dynamic-sampling batch")}, "groups")},
		"cancel_many": {summary: "Cancel a group, the rollouts of older policies, or all", body: CancelManyRequest{}, resp: cancelled},
		"list_rollouts": {summary: "Rollouts queued or running", resp: o(map[string]openapi.Schema{"rollouts": arr(openapi.Ref(pipeline.Summary{}))}, "rollouts"),
			query: map[string]openapi.Schema{"status": openapi.Enum("queued", "running"), "older_than": openapi.Describe(str, `a duration ("5m")`)}},
		"get_rollout": {summary: "A rollout's result, or its state while it runs", resp: trajectory.Result{},
			query: map[string]openapi.Schema{"wait": waitParam}},
		"cancel_rollout": {summary: "Cancel one rollout", resp: cancelled},
		"results": {summary: "Finished results not yet acknowledged, in order", query: map[string]openapi.Schema{"since": seqParam, "limit": limitParam, "wait": waitParam},
			resp: o(map[string]openapi.Schema{"results": arr(openapi.Ref(trajectory.Result{})), "next_since": itg}, "results", "next_since")},
		"results_stream": {summary: "Finished results as they come: NDJSON, or server-sent events with Accept: text/event-stream",
			contentType: "application/x-ndjson", resp: openapi.Ref(trajectory.Result{}), query: map[string]openapi.Schema{"since": seqParam, "limit": limitParam}},
		"ack":           {summary: "Acknowledge results: they leave /v1/results", body: AckRequest{}, resp: o(map[string]openapi.Schema{"acked": itg}, "acked")},
		"node_rollouts": {summary: "A coordinator places rollouts on this host (admin)", body: NodeRolloutsRequest{}, resp: o(map[string]openapi.Schema{"rollouts": arr(openapi.Ref(pipeline.AssignedState{}))}, "rollouts")},
		"register_node": {summary: "A host joins the coordinator (admin)", body: coord.NodeInfo{}, resp: o(map[string]openapi.Schema{"id": str, "state": str}, "id", "state")},
		"list_nodes":    {summary: "The coordinator's nodes", resp: o(map[string]openapi.Schema{"nodes": arr(openapi.Ref(coord.NodeStatus{}))}, "nodes")},
		"node_heartbeat": {summary: "A node's heartbeat with its load (admin)", body: coord.Load{},
			resp: o(map[string]openapi.Schema{"ok": bln}, "ok")},
		"drain_node":     {summary: "Stop placing rollouts on a node (admin)", body: openapi.Schema{"type": "object"}, resp: o(map[string]openapi.Schema{"id": str, "state": str}, "id", "state")},
		"add_backend":    {summary: "Add an inference backend (admin)", ok: "201", body: BackendRequest{}, resp: backend.Status{}},
		"list_backends":  {summary: "The inference backends and their load", resp: o(map[string]openapi.Schema{"backends": arr(openapi.Ref(backend.Status{}))}, "backends")},
		"remove_backend": {summary: "Remove a backend; its rollouts move to others (admin)", ok: "204"},
		"set_policy": {summary: "Set the policy version stamped on new generations (admin)", body: PolicyRequest{},
			resp: openapi.OneOf(o(map[string]openapi.Schema{"version": itg}, "version"), o(map[string]openapi.Schema{"version": itg, "nodes": nodeReplies}, "version", "nodes"))},
		"get_policy": {summary: "The policy version and whether generation is paused", resp: pipeline.PolicyState{}},
		"pause_policy": {summary: "Pause generation for a weight sync (admin)", body: PauseRequest{},
			description: "Answers once no generation is in flight; past timeout_s, 504 and generation stays paused.",
			resp:        openapi.OneOf(openapi.Ref(pipeline.PauseReport{}), o(map[string]openapi.Schema{"nodes": nodeReplies}, "nodes"))},
		"resume_policy": {summary: "Resume generation under a policy version (admin)", body: PolicyRequest{},
			resp: openapi.OneOf(openapi.Ref(pipeline.ResumeReport{}), o(map[string]openapi.Schema{"version": itg, "nodes": nodeReplies}, "version", "nodes"))},
		"domains": {summary: "The enabled domains and their health", resp: o(map[string]openapi.Schema{"domains": arr(openapi.Ref(pluginhost.Status{}))}, "domains")},
		"evaluate": {summary: "Score a response as the domain scores a rollout", body: EvaluateRequest{},
			example: map[string]any{"domain": "math", "task": map[string]any{"question": "What is 17 + 25?", "answer": "42"}, "response": `\boxed{42}`},
			resp:    o(map[string]openapi.Schema{"domain": str, "reward": flt, "resolved": bln, "metrics": openapi.Schema{"type": []string{"object", "null"}, "additionalProperties": flt}, "info": openapi.Any}, "domain", "reward", "resolved", "metrics", "info")},
		"open_session": {summary: "Open a gateway session for an agent that runs elsewhere", ok: "201", body: SessionRequest{}, resp: SessionResponse{}},
		"close_session": {summary: "Close a session with its reward, or have the domain score it", ok: "202", body: CloseRequest{},
			description: "202 at once; with wait, 200 and the session's result once it is scored.",
			query:       map[string]openapi.Schema{"wait": waitParam},
			resp:        o(map[string]openapi.Schema{"session_id": str, "status": str}, "session_id", "status"),
			more:        map[string]any{"200": trajectory.Result{}}},
		"ui_overview": {summary: "The dashboard's overview of the host", resp: uiOverview{}},
		"ui_stream": {summary: "The overview as server-sent events", contentType: "text/event-stream", resp: str,
			query: map[string]openapi.Schema{"interval_ms": openapi.Schema{"type": "integer", "minimum": 1}}},
		"ui_rollouts": {summary: "Live rollouts, then the last finished", query: map[string]openapi.Schema{"stuck_after": str, "limit": limitParam, "offset": openapi.Schema{"type": "integer", "minimum": 0}},
			resp: o(map[string]openapi.Schema{"rollouts": arr(openapi.Ref(uiRollout{})), "total": itg, "stuck_after_seconds": flt}, "rollouts", "total", "stuck_after_seconds")},
		"ui_tokens": {summary: "A rollout's tokens as text", resp: o(map[string]openapi.Schema{"id": str, "texts": arr(str), "truncated": bln}, "id", "texts", "truncated")},
		"ui_cancel": {summary: "Cancel a rollout or a group from the dashboard (admin)", body: UICancelRequest{}, resp: cancelled},
		"openapi":   {summary: "This document (OpenAPI 3.1)", resp: openapi.Schema{"type": "object"}},
		"healthz":   {summary: "Liveness", resp: o(map[string]openapi.Schema{"status": str}, "status")},
		"readyz": {summary: "Readiness: the store, the domains, the backends", description: "503 with the same body when not ready.",
			resp: o(map[string]openapi.Schema{"ready": bln, "problems": arr(str), "backends_healthy": itg}, "ready", "problems", "backends_healthy")},

		// ProRL Agent server.
		"prorl_start":  {summary: "ProRL: accept jobs", resp: o(map[string]openapi.Schema{"status": str}, "status")},
		"prorl_stop":   {summary: "ProRL: stop accepting jobs; running ones are cancelled", resp: o(map[string]openapi.Schema{"status": str}, "status")},
		"prorl_status": {summary: "ProRL: the server's queues", resp: prorlStatus()},
		"prorl_process": {summary: "ProRL: run one instance and answer its trajectory", body: processRequest{},
			resp: openapi.OneOf(openapi.Ref(ProRLResult{}), o(map[string]openapi.Schema{"error": str}, "error"))},
		"prorl_cancel":           {summary: "ProRL: cancel a job", body: prorlCancelRequest{}, resp: o(map[string]openapi.Schema{"status": str}, "status")},
		"prorl_add_llm_server":   {summary: "ProRL: add an inference server", body: prorlServerRequest{}, resp: o(map[string]openapi.Schema{"status": str}, "status")},
		"prorl_clear_llm_server": {summary: "ProRL: remove every inference server", resp: o(map[string]openapi.Schema{"status": str}, "status")},

		// Polar.
		"polar_submit": {summary: "Polar: submit a task of num_samples sessions", body: polarTaskRequest{},
			example: map[string]any{"task_id": "t-1", "instruction": "What is 17 + 25?", "num_samples": 2,
				"agent":     map[string]any{"harness": "prorl", "model_name": "policy"},
				"evaluator": map[string]any{"strategy": "math", "config": map[string]any{"answer": "42"}}},
			resp: o(map[string]openapi.Schema{"task_id": str, "status": str}, "task_id", "status")},
		"polar_get_task":    {summary: "Polar: a task's status and finished sessions", resp: PolarTaskStatus{}},
		"polar_cancel_task": {summary: "Polar: cancel a task", resp: PolarTaskStatus{}},
		"polar_status": {summary: "Polar: tasks and queues",
			resp: o(map[string]openapi.Schema{"tasks": openapi.MapOf(str), "pipeline": pipelineStats,
				"nodes": o(map[string]openapi.Schema{"total": itg, "healthy": itg, "node_ids": arr(str)}, "total", "healthy", "node_ids")}, "tasks", "pipeline", "nodes")},
		"polar_tasks": {summary: "Polar: recent tasks, newest first", query: map[string]openapi.Schema{"limit": limitParam, "status": str, "harness": str, "since": openapi.Describe(flt, "Unix seconds: tasks updated since")},
			resp: o(map[string]openapi.Schema{"tasks": arr(o(map[string]openapi.Schema{"task_id": str, "status": str, "harness": str, "model": str,
				"num_samples": itg, "completed_sessions": itg, "errored_sessions": itg, "mean_reward": openapi.Nullable(flt), "mean_traces": openapi.Nullable(flt),
				"mean_completions": openapi.Nullable(flt), "created_at": flt, "updated_at": flt, "source": str},
				"task_id", "status", "harness", "model", "num_samples", "completed_sessions", "errored_sessions", "mean_reward", "mean_traces", "mean_completions", "created_at", "updated_at", "source"))}, "tasks")},
		"polar_sessions": {summary: "Polar: a task's sessions",
			resp: o(map[string]openapi.Schema{"task_id": str, "sessions": arr(o(map[string]openapi.Schema{"session_id": str, "task_id": str, "status": str,
				"node_id": openapi.Nullable(str), "reward": openapi.Nullable(flt), "timing": openapi.Ref(PolarTiming{}), "error": openapi.Nullable(str)}, "session_id", "task_id", "status"))}, "task_id", "sessions")},
		"polar_events": {summary: "Polar: task events as server-sent events", contentType: "text/event-stream", resp: str},
		"polar_health": {summary: "Polar: liveness", resp: o(map[string]openapi.Schema{"status": str, "nodes": itg}, "status", "nodes")},
	}
}

func prorlStatus() openapi.Schema {
	props := map[string]openapi.Schema{"status": str, "running": bln}
	req := []string{"status", "running"}
	for _, k := range []string{"pending_jobs", "jobs", "init", "run", "eval", "init_queue", "run_queue", "eval_queue", "active_init", "active_run", "active_eval", "total"} {
		props[k] = itg
		req = append(req, k)
	}
	return o(props, req...)
}

var (
	docOnce sync.Once
	docJSON []byte
)

// document builds the OpenAPI document of s's routes and the gateway's.
func (s *Server) document() []byte {
	docOnce.Do(func() {
		d := openapi.NewDocument("prorl", "1", "Rollouts as a service for RL training of multi-turn LLM agents: "+
			"the v1 API, the ProRL Agent server's and Polar's endpoints, and the LLM gateway harnesses call.")
		d.Schemas.Override(Timeout(0), openapi.OneOf(openapi.Describe(str, `a duration: "30s", "5m"`), openapi.Describe(flt, "seconds")))
		d.SecuritySchemes["token"] = openapi.Schema{"type": "http", "scheme": "bearer", "description": "[server] token (or admin_token)"}
		d.SecuritySchemes["admin"] = openapi.Schema{"type": "http", "scheme": "bearer", "description": "[server] admin_token (the token when none is set)"}
		d.SecuritySchemes["session"] = openapi.Schema{"type": "http", "scheme": "bearer", "description": "a session's api_key (also x-api-key, or in the path)"}
		d.Tags = []openapi.Tag{{Name: "v1", Description: "prorl's own API"}, {Name: "prorl", Description: "the ProRL Agent server's endpoints, same paths and fields"},
			{Name: "polar", Description: "Polar's task API, same paths, fields and status codes"}, {Name: "gateway", Description: "OpenAI and Anthropic APIs bound to sessions"},
			{Name: "dashboard", Description: "the dashboard's data"}}
		docs := apiDocs()
		for _, rt := range s.routes() {
			rd := docs[rt.name]
			op := openapi.Operation{ID: rt.name, Summary: rd.summary, Description: rd.description, Body: rd.body, BodyExample: rd.example,
				ContentType: rd.contentType, Responses: map[string]any{}, Query: map[string]openapi.Schema{}}
			tag, errs := dialect(rt)
			op.Tags = []string{tag}
			for _, q := range rt.query {
				op.Query[q] = str
				if sc, ok := rd.query[q]; ok {
					op.Query[q] = sc
				}
			}
			if rt.query == nil { // ProRL's and Polar's routes ignore unknown parameters
				for q, sc := range rd.query {
					op.Query[q] = sc
				}
			}
			okCode := rd.ok
			if okCode == "" {
				okCode = "200"
			}
			op.Responses[okCode] = rd.resp
			for code, body := range rd.more {
				op.Responses[code] = body
			}
			op.Responses["default"] = errs
			switch rt.level {
			case userLevel:
				op.Security = []string{"token", "admin"}
			case adminLevel:
				op.Security = []string{"admin"}
			}
			d.Add(rt.path, rt.method, op)
		}
		for _, prefix := range gateway.Prefixes {
			for _, rt := range gateway.Routes {
				op := openapi.Operation{ID: rt.Name, Summary: rt.Summary, Tags: []string{"gateway"}, Security: []string{"session"},
					Description: "The " + rt.API() + " API's own request and response shapes (its streaming too), bound to the session; errors in its error shape.",
					Responses:   map[string]any{"200": openapi.Schema{"type": "object"}, "default": openapi.Schema{"type": "object"}}}
				if prefix != gateway.Prefixes[len(gateway.Prefixes)-1] {
					op.ID += "_in_path"
				}
				if rt.Method != http.MethodGet {
					op.Body = openapi.Schema{"type": "object"}
				}
				d.Add(prefix+rt.Path, rt.Method, op)
			}
		}
		d.Add("/metrics", http.MethodGet, openapi.Operation{ID: "metrics", Summary: "Prometheus metrics", Tags: []string{"v1"},
			ContentType: "text/plain", Responses: map[string]any{"200": str}})
		d.Add("/ui", http.MethodGet, openapi.Operation{ID: "ui", Summary: "The dashboard (its assets are under /ui/)", Tags: []string{"dashboard"},
			ContentType: "text/html", Responses: map[string]any{"200": str}})
		var err error
		if docJSON, err = json.Marshal(d.JSON()); err != nil {
			panic(err) // maps of strings and schemas: cannot fail
		}
	})
	return docJSON
}

// dialect is a route's tag and its error body.
func dialect(rt route) (string, openapi.Schema) {
	switch {
	case strings.HasPrefix(rt.name, "prorl_"):
		return "prorl", openapi.OneOf(prorlError, errorBody) // auth and the host's guard answer in v1's shape
	case strings.HasPrefix(rt.name, "polar_"):
		return "polar", openapi.OneOf(polarError, errorBody)
	case strings.HasPrefix(rt.name, "ui_"):
		return "dashboard", errorBody
	}
	return "v1", errorBody
}

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(s.document())
}
