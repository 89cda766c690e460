// Package api is the host's HTTP API: the v1 API, the ProRL-compatible
// endpoints and Polar's task API. Every route is in this file.
package api

import (
	"context"
	"crypto/subtle"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/mux"
	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/coord"
	"github.com/prorl/prorl/core/gateway"
	"github.com/prorl/prorl/core/metrics"
	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/core/ui"
)

// Deps are what the API serves.
type Deps struct {
	Cfg      *config.Config
	Log      hclog.Logger
	Pipeline *pipeline.Pipeline
	Pool     *backend.Pool
	Plugins  *pluginhost.Manager
	Store    store.Store
	Metrics  *metrics.Metrics
	// Admission, when set, is asked before any rollout is accepted: an
	// error refuses it with 503 and says why (a coordinator with no live
	// node).
	Admission func() error
	// Cluster is a coordinator's node registry; nil on a host.
	Cluster *coord.Coordinator
	// SandboxStats counts sandboxes running and starting (nil: none).
	SandboxStats func() (running, starting int)
}

// Server holds the API's state.
type Server struct {
	Deps
	idemMu sync.Mutex
	// ProRL compatibility: /start and /stop toggle whether /process accepts jobs.
	compatRunning atomic.Bool
	jobsMu        sync.Mutex
	jobs          map[string]string // ProRL job_id -> rollout id
	closing       atomic.Bool
	// Polar's task API.
	polar     *polarTasks
	callbacks callbacks
	// streamSnap is the overview the live streams share (ui.go).
	streamSnap sharedSnapshot
	// waits ends with EndWaits: long polls and streams (waitCtx).
	waits    context.Context
	endWaits context.CancelFunc
}

// New returns the API handler with every route.
func New(d Deps) (*Server, http.Handler) {
	s := &Server{Deps: d, jobs: map[string]string{}, polar: newPolarTasks()}
	var err error
	if s.callbacks, err = newCallbacks(d.Cfg.Server.CallbackAllow); err != nil {
		// Validate refused it already; a config built in code gets none.
		d.Log.Error("Polar callbacks refused: bad allow-list", "error", err)
		s.callbacks, _ = newCallbacks(nil)
	}
	s.waits, s.endWaits = context.WithCancel(context.Background())
	s.compatRunning.Store(d.Cfg.Compat.StartOnBoot)
	return s, newGuard(d.Cfg).guarded(s.router(d.Pipeline.Gateway()))
}

// router is every route: the table of routes(), the dashboard, metrics
// and the gateway's.
func (s *Server) router(gw *gateway.Gateway) *mux.Router {
	d := s.Deps
	r := mux.NewRouter()
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errf(http.StatusNotFound, "not_found", "", "no route %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errf(http.StatusMethodNotAllowed, "method_not_allowed", "", "%s is not allowed on %s", r.Method, r.URL.Path))
	})
	// The dashboard's page and assets: public (they hold no data; the page
	// reads the API with the user's token).
	r.PathPrefix("/ui").Handler(ui.Handler()).Methods(http.MethodGet, http.MethodHead)
	for _, rt := range s.routes() {
		f := rt.f
		if strings.HasPrefix(rt.path, "/v1/") { // ProRL's and Polar's endpoints ignore unknown parameters, as theirs do
			f = strictQuery(rt.query, f)
		}
		if rt.level != publicLevel {
			f = s.auth(rt.level, f)
		}
		if rt.method != http.MethodGet {
			f = requireJSON(f)
		}
		f = boundedVars(rt.path, f)
		r.Handle(rt.path, s.instrument(rt.name, f)).Methods(rt.method)
	}
	if d.Metrics != nil {
		r.Handle("/metrics", d.Metrics.Handler()).Methods(http.MethodGet)
	}
	// The LLM gateway (/gateway/...): OpenAI and Anthropic APIs bound to
	// sessions, authenticated by each session's own key, not the host's token.
	gw.Register(r, func(name string, h http.HandlerFunc) http.Handler { return s.instrument(name, h) })
	return r
}

// maxPathVar bounds an id taken from a path, as ids in bodies are (a
// Polar task id is at most 512 characters).
const maxPathVar = 512

// boundedVars refuses a path whose ids are longer than maxPathVar: an id
// is kept, looked up in the store and logged, and a path may be as long as
// the server's header limit.
func boundedVars(path string, f http.HandlerFunc) http.HandlerFunc {
	polar := strings.HasPrefix(path, "/rollout/") || strings.HasPrefix(path, "/tasks/")
	return func(w http.ResponseWriter, r *http.Request) {
		for name, v := range mux.Vars(r) {
			if len(v) <= maxPathVar {
				continue
			}
			if polar { // FastAPI's answer for a str parameter with max_length
				fastAPIInvalid(w, "string_too_long", []any{"path", name}, fmt.Sprintf("String should have at most %d characters", maxPathVar))
				return
			}
			writeError(w, invalid(name, "at most %d characters, got %d", maxPathVar, len(v)))
			return
		}
		f(w, r)
	}
}

// requireJSON refuses a body not declared application/json (guard.go).
func requireJSON(f http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if e := jsonBody(r); e != nil {
			writeError(w, e)
			return
		}
		f(w, r)
	}
}

type level int

// route is one endpoint, the token it needs, and (v1) the query
// parameters it takes.
type route struct {
	path, method, name string
	level              level
	f                  http.HandlerFunc
	query              []string
}

// strictQuery refuses, naming it, a query parameter the endpoint does not
// take or one given twice: a misspelt group_id would otherwise page
// through every group's results, and a misspelt wait answer at once.
func strictQuery(allowed []string, f http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			q, err := url.ParseQuery(r.URL.RawQuery)
			if err != nil {
				writeError(w, errf(http.StatusBadRequest, "malformed_query", "", "query string: %v", err))
				return
			}
			for _, k := range slices.Sorted(maps.Keys(q)) {
				if !slices.Contains(allowed, k) {
					takes := "none"
					if len(allowed) > 0 {
						takes = strings.Join(allowed, ", ")
					}
					writeError(w, errf(http.StatusBadRequest, "unknown_field", k, "unknown query parameter %q (%s %s takes: %s)", k, r.Method, r.URL.Path, takes))
					return
				}
				if n := len(q[k]); n > 1 {
					writeError(w, errf(http.StatusBadRequest, "invalid_field", k, "query parameter given %d times", n))
					return
				}
			}
		}
		f(w, r)
	}
}

// routes lists every endpoint, in one place, with the token each needs
// and the query parameters a v1 endpoint takes (nil: none).
func (s *Server) routes() []route {
	return []route{
		// v1
		{"/v1/rollouts", http.MethodPost, "submit", userLevel, s.submit, nil},
		{"/v1/rollouts:batch", http.MethodPost, "submit_batch", userLevel, s.submitBatch, nil},
		// group_id needs the user token; before_policy_version and all reach
		// everyone's rollouts and need the admin token (checked inside).
		{"/v1/rollouts:cancel", http.MethodPost, "cancel_many", userLevel, s.cancelMany, nil},
		{"/v1/rollouts", http.MethodGet, "list_rollouts", userLevel, s.listRollouts, []string{"status", "stage", "older_than"}},
		{"/v1/rollouts/{id}", http.MethodGet, "get_rollout", userLevel, s.getRollout, []string{"wait"}},
		{"/v1/rollouts/{id}", http.MethodDelete, "cancel_rollout", userLevel, s.cancelRollout, nil},
		{"/v1/results", http.MethodGet, "results", userLevel, s.results, []string{"since", "group_id", "limit", "wait"}},
		{"/v1/results/stream", http.MethodGet, "results_stream", userLevel, s.resultsStream, []string{"since", "group_id", "limit"}},
		{"/v1/results/ack", http.MethodPost, "ack", userLevel, s.ack, nil},
		{"/v1/node/rollouts", http.MethodPost, "node_rollouts", adminLevel, s.nodeRollouts, nil},
		// A coordinator's node registry (404 on a plain host).
		{"/v1/nodes", http.MethodPost, "register_node", adminLevel, s.registerNode, nil},
		{"/v1/nodes", http.MethodGet, "list_nodes", userLevel, s.listNodes, nil},
		{"/v1/nodes/{id:[^/:]+}:heartbeat", http.MethodPost, "node_heartbeat", adminLevel, s.nodeHeartbeat, nil},
		{"/v1/nodes/{id:[^/:]+}:drain", http.MethodPost, "drain_node", adminLevel, s.drainNode, nil},
		{"/v1/backends", http.MethodPost, "add_backend", adminLevel, s.addBackend, nil},
		{"/v1/backends", http.MethodGet, "list_backends", userLevel, s.listBackends, nil},
		{"/v1/backends/{id}", http.MethodDelete, "remove_backend", adminLevel, s.removeBackend, nil},
		{"/v1/policy", http.MethodPut, "set_policy", adminLevel, s.setPolicy, nil},
		{"/v1/policy", http.MethodGet, "get_policy", userLevel, s.getPolicy, nil},
		{"/v1/policy:pause", http.MethodPost, "pause_policy", adminLevel, s.pausePolicy, nil},
		{"/v1/policy:resume", http.MethodPost, "resume_policy", adminLevel, s.resumePolicy, nil},
		{"/v1/domains", http.MethodGet, "domains", userLevel, s.domains, nil},
		{"/v1/evaluate", http.MethodPost, "evaluate", userLevel, s.evaluate, nil},
		// Sessions: rollouts whose agent runs elsewhere and calls the gateway.
		{"/v1/sessions", http.MethodPost, "open_session", userLevel, s.openSession, nil},
		{"/v1/sessions/{id:[^/:]+}:close", http.MethodPost, "close_session", userLevel, s.closeSession, []string{"wait"}},
		// The dashboard's data (the pages themselves are /ui).
		{"/v1/ui/overview", http.MethodGet, "ui_overview", userLevel, s.uiOverview, nil},
		{"/v1/ui/stream", http.MethodGet, "ui_stream", userLevel, s.uiStream, []string{"interval_ms"}},
		{"/v1/ui/rollouts", http.MethodGet, "ui_rollouts", userLevel, s.uiRollouts, []string{"stuck_after", "limit", "offset"}},
		{"/v1/ui/rollouts/{id}/tokens", http.MethodGet, "ui_tokens", userLevel, s.uiTokens, nil},
		{"/v1/ui/cancel", http.MethodPost, "ui_cancel", adminLevel, s.uiCancel, nil},
		{"/healthz", http.MethodGet, "healthz", publicLevel, s.healthz, nil},
		{"/readyz", http.MethodGet, "readyz", publicLevel, s.readyz, nil},
		{"/openapi.json", http.MethodGet, "openapi", publicLevel, s.openAPI, nil},
		// ProRL Agent server compatibility (same paths and fields).
		{"/start", http.MethodPost, "prorl_start", adminLevel, s.prorlStart, nil},
		{"/stop", http.MethodPost, "prorl_stop", adminLevel, s.prorlStop, nil},
		{"/status", http.MethodGet, "prorl_status", userLevel, s.prorlStatus, nil},
		{"/process", http.MethodPost, "prorl_process", userLevel, s.prorlProcess, nil},
		{"/cancel", http.MethodPost, "prorl_cancel", userLevel, s.prorlCancel, nil},
		{"/add_llm_server", http.MethodPost, "prorl_add_llm_server", adminLevel, s.prorlAddServer, nil},
		{"/clear_llm_server", http.MethodPost, "prorl_clear_llm_server", adminLevel, s.prorlClearServers, nil},
		// Polar's task API (same paths, fields and status codes).
		{"/rollout/task/submit", http.MethodPost, "polar_submit", userLevel, s.polarSubmit, nil},
		{"/rollout/task/{task_id:.+}", http.MethodGet, "polar_get_task", userLevel, s.polarGet, nil},
		{"/rollout/task/{task_id:.+}", http.MethodDelete, "polar_cancel_task", userLevel, s.polarCancel, nil},
		{"/rollout/status", http.MethodGet, "polar_status", userLevel, s.polarStatus, nil},
		{"/tasks", http.MethodGet, "polar_tasks", userLevel, s.polarTaskList, nil},
		{"/tasks/{task_id:.+}/sessions", http.MethodGet, "polar_sessions", userLevel, s.polarSessions, nil},
		{"/events", http.MethodGet, "polar_events", userLevel, s.polarEvents, nil},
		{"/health", http.MethodGet, "polar_health", publicLevel, s.polarHealth, nil},
	}
}

const (
	userLevel level = iota
	adminLevel
	publicLevel // no token: health checks only
)

// authOpen reports a deployment without tokens.
func (s *Server) authOpen() bool { return s.Cfg.Server.Token == "" && s.Cfg.Server.AdminToken == "" }

// caller classifies a request's bearer token (constant-time comparisons).
// Without an admin token of its own the deployment's token is also admin.
func (s *Server) caller(r *http.Request) (isUser, isAdmin bool) {
	user, adm := s.Cfg.Server.Token, s.Cfg.Server.Admin()
	eq := func(a, b string) bool { return b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	isAdmin = ok && eq(got, adm)
	return ok && (isAdmin || eq(got, user)), isAdmin
}

// auth checks the bearer token when the deployment set one: 401 without a
// valid token, 403 for a user token on an admin endpoint.
func (s *Server) auth(need level, f http.HandlerFunc) http.HandlerFunc {
	if s.authOpen() {
		return f
	}
	return func(w http.ResponseWriter, r *http.Request) {
		isUser, isAdmin := s.caller(r)
		switch {
		case !isUser:
			w.Header().Set("WWW-Authenticate", `Bearer realm="prorl"`)
			writeError(w, errf(http.StatusUnauthorized, "unauthorized", "", "a valid bearer token is required"))
		case need == adminLevel && !isAdmin:
			writeError(w, errf(http.StatusForbidden, "forbidden", "", "this endpoint needs the admin token"))
		default:
			f(w, r)
		}
	}
}

// SetClosing makes /readyz fail and submissions get 503 during shutdown.
func (s *Server) SetClosing() { s.closing.Store(true) }

// EndWaits ends every long poll and stream, now and later: each answers
// what it has (a stream ends cleanly; its client reconnects with
// Last-Event-ID). Called at shutdown once no more results can come, so
// they do not hold the server's grace period and then get cut.
func (s *Server) EndWaits() { s.endWaits() }

// waitCtx is r's context, ended too by EndWaits.
func (s *Server) waitCtx(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.waits, cancel)
	return ctx, func() { stop(); cancel() }
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(c int) { w.code = c; w.ResponseWriter.WriteHeader(c) }

// Flush lets streaming handlers flush through the wrapper.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) instrument(name string, f http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: 200}
		start := time.Now()
		defer func() {
			if p := recover(); p != nil {
				s.Log.Error("handler panic", "route", name, "panic", p)
				writeError(sw, errf(http.StatusInternalServerError, "internal", "", "internal error"))
			}
			if s.Metrics != nil {
				s.Metrics.HTTP.WithLabelValues(name, strconv.Itoa(sw.code)).Inc()
			}
			if sw.code >= 500 {
				s.Log.Warn("request failed", "route", name, "code", sw.code, "elapsed", time.Since(start))
			}
		}()
		f(sw, r)
	})
}
