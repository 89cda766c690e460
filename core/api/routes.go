// Package api is the host's HTTP API: the v1 API, the ProRL-compatible
// endpoints and Polar's task API. Every route is in this file.
package api

import (
	"crypto/subtle"
	"net/http"
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
	polar *polarTasks
	// streamSnap is the overview the live streams share (ui.go).
	streamSnap sharedSnapshot
}

// New returns the API handler with every route.
func New(d Deps) (*Server, http.Handler) {
	s := &Server{Deps: d, jobs: map[string]string{}, polar: newPolarTasks()}
	s.compatRunning.Store(d.Cfg.Compat.StartOnBoot)
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
		if rt.level != publicLevel {
			f = s.auth(rt.level, f)
		}
		r.Handle(rt.path, s.instrument(rt.name, f)).Methods(rt.method)
	}
	if d.Metrics != nil {
		r.Handle("/metrics", d.Metrics.Handler()).Methods(http.MethodGet)
	}
	// The LLM gateway (/gateway/...): OpenAI and Anthropic APIs bound to
	// sessions, authenticated by each session's own key, not the host's token.
	d.Pipeline.Gateway().Register(r, func(name string, h http.HandlerFunc) http.Handler { return s.instrument(name, h) })
	return s, r
}

type level int

// route is one endpoint and the token it needs.
type route struct {
	path, method, name string
	level              level
	f                  http.HandlerFunc
}

// routes lists every endpoint, in one place, with the token each needs.
func (s *Server) routes() []route {
	return []route{
		// v1
		{"/v1/rollouts", http.MethodPost, "submit", userLevel, s.submit},
		{"/v1/rollouts:batch", http.MethodPost, "submit_batch", userLevel, s.submitBatch},
		// group_id needs the user token; before_policy_version and all reach
		// everyone's rollouts and need the admin token (checked inside).
		{"/v1/rollouts:cancel", http.MethodPost, "cancel_many", userLevel, s.cancelMany},
		{"/v1/rollouts", http.MethodGet, "list_rollouts", userLevel, s.listRollouts},
		{"/v1/rollouts/{id}", http.MethodGet, "get_rollout", userLevel, s.getRollout},
		{"/v1/rollouts/{id}", http.MethodDelete, "cancel_rollout", userLevel, s.cancelRollout},
		{"/v1/results", http.MethodGet, "results", userLevel, s.results},
		{"/v1/results/stream", http.MethodGet, "results_stream", userLevel, s.resultsStream},
		{"/v1/results/ack", http.MethodPost, "ack", userLevel, s.ack},
		{"/v1/node/rollouts", http.MethodPost, "node_rollouts", adminLevel, s.nodeRollouts},
		// A coordinator's node registry (404 on a plain host).
		{"/v1/nodes", http.MethodPost, "register_node", adminLevel, s.registerNode},
		{"/v1/nodes", http.MethodGet, "list_nodes", userLevel, s.listNodes},
		{"/v1/nodes/{id:[^/:]+}:heartbeat", http.MethodPost, "node_heartbeat", adminLevel, s.nodeHeartbeat},
		{"/v1/nodes/{id:[^/:]+}:drain", http.MethodPost, "drain_node", adminLevel, s.drainNode},
		{"/v1/backends", http.MethodPost, "add_backend", adminLevel, s.addBackend},
		{"/v1/backends", http.MethodGet, "list_backends", userLevel, s.listBackends},
		{"/v1/backends/{id}", http.MethodDelete, "remove_backend", adminLevel, s.removeBackend},
		{"/v1/policy", http.MethodPut, "set_policy", adminLevel, s.setPolicy},
		{"/v1/policy", http.MethodGet, "get_policy", userLevel, s.getPolicy},
		{"/v1/policy:pause", http.MethodPost, "pause_policy", adminLevel, s.pausePolicy},
		{"/v1/policy:resume", http.MethodPost, "resume_policy", adminLevel, s.resumePolicy},
		{"/v1/domains", http.MethodGet, "domains", userLevel, s.domains},
		{"/v1/evaluate", http.MethodPost, "evaluate", userLevel, s.evaluate},
		// Sessions: rollouts whose agent runs elsewhere and calls the gateway.
		{"/v1/sessions", http.MethodPost, "open_session", userLevel, s.openSession},
		{"/v1/sessions/{id:[^/:]+}:close", http.MethodPost, "close_session", userLevel, s.closeSession},
		// The dashboard's data (the pages themselves are /ui).
		{"/v1/ui/overview", http.MethodGet, "ui_overview", userLevel, s.uiOverview},
		{"/v1/ui/stream", http.MethodGet, "ui_stream", userLevel, s.uiStream},
		{"/v1/ui/rollouts", http.MethodGet, "ui_rollouts", userLevel, s.uiRollouts},
		{"/v1/ui/rollouts/{id}/tokens", http.MethodGet, "ui_tokens", userLevel, s.uiTokens},
		{"/v1/ui/cancel", http.MethodPost, "ui_cancel", adminLevel, s.uiCancel},
		{"/healthz", http.MethodGet, "healthz", publicLevel, s.healthz},
		{"/readyz", http.MethodGet, "readyz", publicLevel, s.readyz},
		// ProRL Agent server compatibility (same paths and fields).
		{"/start", http.MethodPost, "prorl_start", adminLevel, s.prorlStart},
		{"/stop", http.MethodPost, "prorl_stop", adminLevel, s.prorlStop},
		{"/status", http.MethodGet, "prorl_status", userLevel, s.prorlStatus},
		{"/process", http.MethodPost, "prorl_process", userLevel, s.prorlProcess},
		{"/cancel", http.MethodPost, "prorl_cancel", userLevel, s.prorlCancel},
		{"/add_llm_server", http.MethodPost, "prorl_add_llm_server", adminLevel, s.prorlAddServer},
		{"/clear_llm_server", http.MethodPost, "prorl_clear_llm_server", adminLevel, s.prorlClearServers},
		// Polar's task API (same paths, fields and status codes).
		{"/rollout/task/submit", http.MethodPost, "polar_submit", userLevel, s.polarSubmit},
		{"/rollout/task/{task_id:.+}", http.MethodGet, "polar_get_task", userLevel, s.polarGet},
		{"/rollout/task/{task_id:.+}", http.MethodDelete, "polar_cancel_task", userLevel, s.polarCancel},
		{"/rollout/status", http.MethodGet, "polar_status", userLevel, s.polarStatus},
		{"/tasks", http.MethodGet, "polar_tasks", userLevel, s.polarTaskList},
		{"/tasks/{task_id:.+}/sessions", http.MethodGet, "polar_sessions", userLevel, s.polarSessions},
		{"/events", http.MethodGet, "polar_events", userLevel, s.polarEvents},
		{"/health", http.MethodGet, "polar_health", publicLevel, s.polarHealth},
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
