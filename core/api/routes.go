// Package api is the host's HTTP API: the v1 API and the ProRL-compatible
// endpoints. Every route is in this file.
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
	"github.com/prorl/prorl/core/metrics"
	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/store"
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
}

// New returns the API handler with every route.
func New(d Deps) (*Server, http.Handler) {
	s := &Server{Deps: d, jobs: map[string]string{}}
	s.compatRunning.Store(d.Cfg.Compat.StartOnBoot)
	r := mux.NewRouter()
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errf(http.StatusNotFound, "not_found", "", "no route %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errf(http.StatusMethodNotAllowed, "method_not_allowed", "", "%s is not allowed on %s", r.Method, r.URL.Path))
	})
	h := func(path, method, name string, f http.HandlerFunc) {
		r.Handle(path, s.instrument(name, s.auth(userLevel, f))).Methods(method)
	}
	admin := func(path, method, name string, f http.HandlerFunc) {
		r.Handle(path, s.instrument(name, s.auth(adminLevel, f))).Methods(method)
	}
	public := func(path, method, name string, f http.HandlerFunc) {
		r.Handle(path, s.instrument(name, f)).Methods(method)
	}
	// v1
	h("/v1/rollouts", http.MethodPost, "submit", s.submit)
	h("/v1/rollouts:batch", http.MethodPost, "submit_batch", s.submitBatch)
	h("/v1/rollouts:cancel", http.MethodPost, "cancel_many", s.cancelMany)
	h("/v1/rollouts", http.MethodGet, "list_rollouts", s.listRollouts)
	h("/v1/rollouts/{id}", http.MethodGet, "get_rollout", s.getRollout)
	h("/v1/rollouts/{id}", http.MethodDelete, "cancel_rollout", s.cancelRollout)
	h("/v1/results", http.MethodGet, "results", s.results)
	h("/v1/results/stream", http.MethodGet, "results_stream", s.resultsStream)
	h("/v1/results/ack", http.MethodPost, "ack", s.ack)
	admin("/v1/backends", http.MethodPost, "add_backend", s.addBackend)
	h("/v1/backends", http.MethodGet, "list_backends", s.listBackends)
	admin("/v1/backends/{id}", http.MethodDelete, "remove_backend", s.removeBackend)
	admin("/v1/policy", http.MethodPut, "set_policy", s.setPolicy)
	h("/v1/policy", http.MethodGet, "get_policy", s.getPolicy)
	h("/v1/domains", http.MethodGet, "domains", s.domains)
	h("/v1/evaluate", http.MethodPost, "evaluate", s.evaluate)
	public("/healthz", http.MethodGet, "healthz", s.healthz)
	public("/readyz", http.MethodGet, "readyz", s.readyz)
	if d.Metrics != nil {
		r.Handle("/metrics", d.Metrics.Handler()).Methods(http.MethodGet)
	}
	// ProRL Agent server compatibility (same paths and fields).
	admin("/start", http.MethodPost, "prorl_start", s.prorlStart)
	admin("/stop", http.MethodPost, "prorl_stop", s.prorlStop)
	h("/status", http.MethodGet, "prorl_status", s.prorlStatus)
	h("/process", http.MethodPost, "prorl_process", s.prorlProcess)
	h("/cancel", http.MethodPost, "prorl_cancel", s.prorlCancel)
	admin("/add_llm_server", http.MethodPost, "prorl_add_llm_server", s.prorlAddServer)
	admin("/clear_llm_server", http.MethodPost, "prorl_clear_llm_server", s.prorlClearServers)
	return s, r
}

type level int

const (
	userLevel level = iota
	adminLevel
)

// authOpen reports a deployment without tokens.
func (s *Server) authOpen() bool { return s.Cfg.Server.Token == "" && s.Cfg.Server.AdminToken == "" }

// caller classifies a request's bearer token (constant-time comparisons).
// Without an admin token of its own the deployment's token is also admin.
func (s *Server) caller(r *http.Request) (isUser, isAdmin bool) {
	user, adm := s.Cfg.Server.Token, s.Cfg.Server.AdminToken
	if adm == "" {
		adm = user
	}
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
