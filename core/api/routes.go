// Package api is the host's HTTP API: the v1 API, the dashboard's data
// and Polar's task API, with their routing, tokens and errors. The host's
// own routes are in this file; other servers' APIs come as Dialects over
// the Service (core/api/prorl).
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
	// Dialects add other servers' APIs (ProRL's, Polar's).
	Dialects []Dialect
}

// Server holds the API's state.
type Server struct {
	Deps
	idemMu  sync.Mutex
	closing atomic.Bool
	// dialects are the routes Deps.Dialects added.
	dialects []Route
	// waits ends with EndWaits: long polls and streams (waitCtx).
	waits    context.Context
	endWaits context.CancelFunc
}

// New returns the API handler with every route.
func New(d Deps) (*Server, http.Handler) {
	s := &Server{Deps: d}
	s.waits, s.endWaits = context.WithCancel(context.Background())
	for _, dialect := range d.Dialects {
		s.dialects = append(s.dialects, dialect(s)...)
	}
	return s, newGuard(d.Cfg).guarded(s.router(d.Pipeline.Gateway()))
}

// router is every route: the table of routes(), the dashboard, metrics
// and the gateway's.
func (s *Server) router(gw *gateway.Gateway) *mux.Router {
	d := s.Deps
	r := mux.NewRouter()
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, Errf(http.StatusNotFound, "not_found", "", "no route %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, Errf(http.StatusMethodNotAllowed, "method_not_allowed", "", "%s is not allowed on %s", r.Method, r.URL.Path))
	})
	// The dashboard's page and assets: public (they hold no data; the page
	// reads the API with the user's token).
	r.PathPrefix("/ui").Handler(ui.Handler()).Methods(http.MethodGet, http.MethodHead)
	for _, rt := range s.routes() {
		f := rt.Handler
		if strings.HasPrefix(rt.Path, "/v1/") { // ProRL's and Polar's endpoints ignore unknown parameters, as theirs do
			f = strictQuery(rt.Query, f)
		}
		if rt.Level != PublicLevel {
			f = s.auth(rt.Level, f)
		}
		if rt.Method != http.MethodGet {
			f = requireJSON(f)
		}
		f = boundedVars(rt.Path, f)
		r.Handle(rt.Path, s.instrument(rt.Name, f)).Methods(rt.Method)
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
				FastAPIInvalid(w, "string_too_long", []any{"path", name}, fmt.Sprintf("String should have at most %d characters", maxPathVar))
				return
			}
			WriteError(w, Invalid(name, "at most %d characters, got %d", maxPathVar, len(v)))
			return
		}
		f(w, r)
	}
}

// requireJSON refuses a body not declared application/json (guard.go).
func requireJSON(f http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if e := jsonBody(r); e != nil {
			WriteError(w, e)
			return
		}
		f(w, r)
	}
}

// Level is the token a route needs.
type Level int

// Route is one endpoint, the token it needs, (v1) the query parameters it
// takes, and its OpenAPI description.
type Route struct {
	Path, Method, Name string
	Level              Level
	Handler            http.HandlerFunc
	Query              []string
	Doc                Doc
}

// Dialect adds the routes of another server's API (ProRL's, Polar's) as
// adapters over the host's Service.
type Dialect func(Service) []Route

// strictQuery refuses, naming it, a query parameter the endpoint does not
// take or one given twice: a misspelt group_id would otherwise page
// through every group's results, and a misspelt wait answer at once.
func strictQuery(allowed []string, f http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			q, err := url.ParseQuery(r.URL.RawQuery)
			if err != nil {
				WriteError(w, Errf(http.StatusBadRequest, "malformed_query", "", "query string: %v", err))
				return
			}
			for _, k := range slices.Sorted(maps.Keys(q)) {
				if !slices.Contains(allowed, k) {
					takes := "none"
					if len(allowed) > 0 {
						takes = strings.Join(allowed, ", ")
					}
					WriteError(w, Errf(http.StatusBadRequest, "unknown_field", k, "unknown query parameter %q (%s %s takes: %s)", k, r.Method, r.URL.Path, takes))
					return
				}
				if n := len(q[k]); n > 1 {
					WriteError(w, Errf(http.StatusBadRequest, "invalid_field", k, "query parameter given %d times", n))
					return
				}
			}
		}
		f(w, r)
	}
}

// routes lists every endpoint: the host's own (v1, the dashboard's,
// health), each with its description (openapi.go), then the dialects'.
func (s *Server) routes() []Route {
	docs := apiDocs()
	var out []Route
	for _, r := range s.ownRoutes() {
		out = append(out, Route{Path: r.path, Method: r.method, Name: r.name, Level: r.level, Handler: r.f, Query: r.query, Doc: docs[r.name]})
	}
	return append(out, s.dialects...)
}

// row is one of the host's own routes: the token it needs and the query
// parameters it takes (nil: none).
type row struct {
	path, method, name string
	level              Level
	f                  http.HandlerFunc
	query              []string
}

// ownRoutes lists the host's own endpoints, in one place.
func (s *Server) ownRoutes() []row {
	return []row{
		// v1
		{"/v1/rollouts", http.MethodPost, "submit", UserLevel, s.submit, nil},
		{"/v1/rollouts:batch", http.MethodPost, "submit_batch", UserLevel, s.submitBatch, nil},
		// group_id needs the user token; before_policy_version and all reach
		// everyone's rollouts and need the admin token (checked inside).
		{"/v1/rollouts:cancel", http.MethodPost, "cancel_many", UserLevel, s.cancelMany, nil},
		{"/v1/rollouts", http.MethodGet, "list_rollouts", UserLevel, s.listRollouts, []string{"status", "stage", "older_than"}},
		{"/v1/rollouts/{id}", http.MethodGet, "get_rollout", UserLevel, s.getRollout, []string{"wait"}},
		{"/v1/rollouts/{id}", http.MethodDelete, "cancel_rollout", UserLevel, s.cancelRollout, nil},
		{"/v1/results", http.MethodGet, "results", UserLevel, s.results, []string{"since", "group_id", "limit", "wait"}},
		{"/v1/results/stream", http.MethodGet, "results_stream", UserLevel, s.resultsStream, []string{"since", "group_id", "limit"}},
		{"/v1/results/ack", http.MethodPost, "ack", UserLevel, s.ack, nil},
		{"/v1/node/rollouts", http.MethodPost, "node_rollouts", AdminLevel, s.nodeRollouts, nil},
		{"/v1/backends", http.MethodPost, "add_backend", AdminLevel, s.addBackend, nil},
		{"/v1/backends", http.MethodGet, "list_backends", UserLevel, s.listBackends, nil},
		{"/v1/backends/{id}", http.MethodDelete, "remove_backend", AdminLevel, s.removeBackend, nil},
		{"/v1/policy", http.MethodPut, "set_policy", AdminLevel, s.setPolicy, nil},
		{"/v1/policy", http.MethodGet, "get_policy", UserLevel, s.getPolicy, nil},
		{"/v1/policy:pause", http.MethodPost, "pause_policy", AdminLevel, s.pausePolicy, nil},
		{"/v1/policy:resume", http.MethodPost, "resume_policy", AdminLevel, s.resumePolicy, nil},
		{"/v1/domains", http.MethodGet, "domains", UserLevel, s.domains, nil},
		{"/v1/evaluate", http.MethodPost, "evaluate", UserLevel, s.evaluate, nil},
		// Sessions: rollouts whose agent runs elsewhere and calls the gateway.
		{"/v1/sessions", http.MethodPost, "open_session", UserLevel, s.openSession, nil},
		{"/v1/sessions/{id:[^/:]+}:close", http.MethodPost, "close_session", UserLevel, s.closeSession, []string{"wait"}},
		{"/healthz", http.MethodGet, "healthz", PublicLevel, s.healthz, nil},
		{"/readyz", http.MethodGet, "readyz", PublicLevel, s.readyz, nil},
		{"/openapi.json", http.MethodGet, "openapi", PublicLevel, s.openAPI, nil},
	}
}

const (
	UserLevel Level = iota
	AdminLevel
	PublicLevel // no token: health checks only
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
func (s *Server) auth(need Level, f http.HandlerFunc) http.HandlerFunc {
	if s.authOpen() {
		return f
	}
	return func(w http.ResponseWriter, r *http.Request) {
		isUser, isAdmin := s.caller(r)
		switch {
		case !isUser:
			w.Header().Set("WWW-Authenticate", `Bearer realm="prorl"`)
			WriteError(w, Errf(http.StatusUnauthorized, "unauthorized", "", "a valid bearer token is required"))
		case need == AdminLevel && !isAdmin:
			WriteError(w, Errf(http.StatusForbidden, "forbidden", "", "this endpoint needs the admin token"))
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
				WriteError(sw, Errf(http.StatusInternalServerError, "internal", "", "internal error"))
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
