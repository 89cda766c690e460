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

// Doc describes a route in the OpenAPI document.
type Doc struct {
	Summary, Description string
	Body                 any // request body: a Go value or a Schema
	Example              any
	OK                   string         // success status (default 200)
	Resp                 any            // success body; nil: none
	More                 map[string]any // other answers by status, as Resp
	ContentType          string
	// Query parameter schemas (default: string), for the names the route takes.
	Query map[string]openapi.Schema
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

func apiDocs() map[string]Doc {
	return map[string]Doc{
		"submit": {Summary: "Submit a task as a group of n rollouts", OK: "202", Body: SubmitRequest{}, Resp: SubmitResponse{},
			Example:     map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}, "n": 4, "sampling": map[string]any{"temperature": 1.0}},
			Description: "Answers 202 once the rollouts are stored; 200 with the same ids for a repeated idempotency_key."},
		"submit_batch": {Summary: "Submit many groups at once (optionally dynamic sampling)", OK: "202", Body: BatchRequest{},
			Resp: o(map[string]openapi.Schema{"groups": arr(openapi.Ref(SubmitResponse{})), "dynamic_id": openapi.Describe(str, "with informative_groups: the dynamic-sampling batch")}, "groups")},
		"cancel_many": {Summary: "Cancel a group, the rollouts of older policies, or all", Body: CancelManyRequest{}, Resp: cancelled},
		"list_rollouts": {Summary: "Rollouts queued or running", Resp: o(map[string]openapi.Schema{"rollouts": arr(openapi.Ref(pipeline.Summary{}))}, "rollouts"),
			Query: map[string]openapi.Schema{"status": openapi.Enum("queued", "running"), "older_than": openapi.Describe(str, `a duration ("5m")`)}},
		"get_rollout": {Summary: "A rollout's result, or its state while it runs", Resp: trajectory.Result{},
			Query: map[string]openapi.Schema{"wait": waitParam}},
		"cancel_rollout": {Summary: "Cancel one rollout", Resp: cancelled},
		"results": {Summary: "Finished results not yet acknowledged, in order", Query: map[string]openapi.Schema{"since": seqParam, "limit": limitParam, "wait": waitParam},
			Resp: o(map[string]openapi.Schema{"results": arr(openapi.Ref(trajectory.Result{})), "next_since": itg}, "results", "next_since")},
		"results_stream": {Summary: "Finished results as they come: NDJSON, or server-sent events with Accept: text/event-stream",
			ContentType: "application/x-ndjson", Resp: openapi.Ref(trajectory.Result{}), Query: map[string]openapi.Schema{"since": seqParam, "limit": limitParam}},
		"ack":            {Summary: "Acknowledge results: they leave /v1/results", Body: AckRequest{}, Resp: o(map[string]openapi.Schema{"acked": itg}, "acked")},
		"node_rollouts":  {Summary: "A coordinator places rollouts on this host (admin)", Body: NodeRolloutsRequest{}, Resp: o(map[string]openapi.Schema{"rollouts": arr(openapi.Ref(pipeline.AssignedState{}))}, "rollouts")},
		"add_backend":    {Summary: "Add an inference backend (admin)", OK: "201", Body: BackendRequest{}, Resp: backend.Status{}},
		"list_backends":  {Summary: "The inference backends and their load", Resp: o(map[string]openapi.Schema{"backends": arr(openapi.Ref(backend.Status{}))}, "backends")},
		"remove_backend": {Summary: "Remove a backend; its rollouts move to others (admin)", OK: "204"},
		"set_policy": {Summary: "Set the policy version stamped on new generations (admin)", Body: PolicyRequest{},
			Resp: openapi.OneOf(o(map[string]openapi.Schema{"version": itg}, "version"), o(map[string]openapi.Schema{"version": itg, "nodes": nodeReplies}, "version", "nodes"))},
		"get_policy": {Summary: "The policy version and whether generation is paused", Resp: pipeline.PolicyState{}},
		"pause_policy": {Summary: "Pause generation for a weight sync (admin)", Body: PauseRequest{},
			Description: "Answers once no generation is in flight; past timeout_s, 504 and generation stays paused.",
			Resp:        openapi.OneOf(openapi.Ref(pipeline.PauseReport{}), o(map[string]openapi.Schema{"nodes": nodeReplies}, "nodes"))},
		"resume_policy": {Summary: "Resume generation under a policy version (admin)", Body: PolicyRequest{},
			Resp: openapi.OneOf(openapi.Ref(pipeline.ResumeReport{}), o(map[string]openapi.Schema{"version": itg, "nodes": nodeReplies}, "version", "nodes"))},
		"domains": {Summary: "The enabled domains and their health", Resp: o(map[string]openapi.Schema{"domains": arr(openapi.Ref(pluginhost.Status{}))}, "domains")},
		"evaluate": {Summary: "Score a response as the domain scores a rollout", Body: EvaluateRequest{},
			Example: map[string]any{"domain": "math", "task": map[string]any{"question": "What is 17 + 25?", "answer": "42"}, "response": `\boxed{42}`},
			Resp:    o(map[string]openapi.Schema{"domain": str, "reward": flt, "resolved": bln, "metrics": openapi.Schema{"type": []string{"object", "null"}, "additionalProperties": flt}, "info": openapi.Any}, "domain", "reward", "resolved", "metrics", "info")},
		"open_session": {Summary: "Open a gateway session for an agent that runs elsewhere", OK: "201", Body: SessionRequest{}, Resp: SessionResponse{}},
		"close_session": {Summary: "Close a session with its reward, or have the domain score it", OK: "202", Body: CloseRequest{},
			Description: "202 at once; with wait, 200 and the session's result once it is scored.",
			Query:       map[string]openapi.Schema{"wait": waitParam},
			Resp:        o(map[string]openapi.Schema{"session_id": str, "status": str}, "session_id", "status"),
			More:        map[string]any{"200": trajectory.Result{}}},
		"openapi": {Summary: "This document (OpenAPI 3.1)", Resp: openapi.Schema{"type": "object"}},
		"healthz": {Summary: "Liveness", Resp: o(map[string]openapi.Schema{"status": str}, "status")},
		"readyz": {Summary: "Readiness: the store, the domains, the backends", Description: "503 with the same body when not ready.",
			Resp: o(map[string]openapi.Schema{"ready": bln, "problems": arr(str), "backends_healthy": itg}, "ready", "problems", "backends_healthy")},
	}
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
		for _, rt := range s.routes() {
			rd := rt.Doc
			op := openapi.Operation{ID: rt.Name, Summary: rd.Summary, Description: rd.Description, Body: rd.Body, BodyExample: rd.Example,
				ContentType: rd.ContentType, Responses: map[string]any{}, Query: map[string]openapi.Schema{}}
			tag, errs := dialect(rt)
			op.Tags = []string{tag}
			for _, q := range rt.Query {
				op.Query[q] = str
				if sc, ok := rd.Query[q]; ok {
					op.Query[q] = sc
				}
			}
			if rt.Query == nil { // ProRL's and Polar's routes ignore unknown parameters
				for q, sc := range rd.Query {
					op.Query[q] = sc
				}
			}
			okCode := rd.OK
			if okCode == "" {
				okCode = "200"
			}
			op.Responses[okCode] = rd.Resp
			for code, body := range rd.More {
				op.Responses[code] = body
			}
			op.Responses["default"] = errs
			switch rt.Level {
			case UserLevel:
				op.Security = []string{"token", "admin"}
			case AdminLevel:
				op.Security = []string{"admin"}
			}
			d.Add(rt.Path, rt.Method, op)
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
func dialect(rt Route) (string, openapi.Schema) {
	switch {
	case strings.HasPrefix(rt.Name, "prorl_"):
		return "prorl", openapi.OneOf(prorlError, errorBody) // auth and the host's guard answer in v1's shape
	case strings.HasPrefix(rt.Name, "polar_"):
		return "polar", openapi.OneOf(polarError, errorBody)
	case strings.HasPrefix(rt.Name, "ui_"):
		return "dashboard", errorBody
	}
	return "v1", errorBody
}

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(s.document())
}
