// Package dashboard serves the dashboard's data (/v1/ui/*): an overview
// of the host, live and recent rollouts, a rollout's tokens as text, and
// cancels from the page. The page itself is core/ui.
package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/coord"
	"github.com/prorl/prorl/core/openapi"
	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/core/tally"
)

// Deps are the parts of the host the dashboard shows.
type Deps struct {
	Pipeline *pipeline.Pipeline
	Pool     *backend.Pool
	Plugins  *pluginhost.Manager
	Store    store.Store
	// Cluster is a coordinator's node registry; nil on a host.
	Cluster *coord.Coordinator
	// SandboxStats counts sandboxes running and starting (nil: none).
	SandboxStats func() (running, starting int)
}

type server struct {
	Deps
	svc api.Service
	// streamSnap is the overview the live streams share.
	streamSnap sharedSnapshot
}

// Routes are the dashboard's data over d, as a dialect of the API.
func Routes(d Deps) api.Dialect {
	return func(svc api.Service) []api.Route {
		s := &server{Deps: d, svc: svc}
		o, arr, str, bln, itg := openapi.Object, openapi.ArrayOf, openapi.String, openapi.Boolean, openapi.Integer
		cancelled := o(map[string]openapi.Schema{"cancelled": itg}, "cancelled")
		return []api.Route{
			{Path: "/v1/ui/overview", Method: http.MethodGet, Name: "ui_overview", Level: api.UserLevel, Handler: s.uiOverview,
				Doc: api.Doc{Summary: "The dashboard's overview of the host", Resp: uiOverview{}}},
			{Path: "/v1/ui/stream", Method: http.MethodGet, Name: "ui_stream", Level: api.UserLevel, Handler: s.uiStream, Query: []string{"interval_ms"},
				Doc: api.Doc{Summary: "The overview as server-sent events", ContentType: "text/event-stream", Resp: str,
					Query: map[string]openapi.Schema{"interval_ms": {"type": "integer", "minimum": 1}}}},
			{Path: "/v1/ui/rollouts", Method: http.MethodGet, Name: "ui_rollouts", Level: api.UserLevel, Handler: s.uiRollouts, Query: []string{"stuck_after", "limit", "offset"},
				Doc: api.Doc{Summary: "Live rollouts, then the last finished", Query: map[string]openapi.Schema{"stuck_after": str, "limit": {"type": "integer", "minimum": 1}, "offset": {"type": "integer", "minimum": 0}},
					Resp: o(map[string]openapi.Schema{"rollouts": arr(openapi.Ref(uiRollout{})), "total": itg, "stuck_after_seconds": openapi.Number}, "rollouts", "total", "stuck_after_seconds")}},
			{Path: "/v1/ui/rollouts/{id}/tokens", Method: http.MethodGet, Name: "ui_tokens", Level: api.UserLevel, Handler: s.uiTokens,
				Doc: api.Doc{Summary: "A rollout's tokens as text", Resp: o(map[string]openapi.Schema{"id": str, "texts": arr(str), "truncated": bln}, "id", "texts", "truncated")}},
			{Path: "/v1/ui/cancel", Method: http.MethodPost, Name: "ui_cancel", Level: api.AdminLevel, Handler: s.uiCancel,
				Doc: api.Doc{Summary: "Cancel a rollout or a group from the dashboard (admin)", Body: UICancelRequest{}, Resp: cancelled}},
		}
	}
}

// uiOverview is the dashboard's overview: one snapshot of the host.
type uiOverview struct {
	Time      time.Time            `json:"time"`
	Instance  string               `json:"instance,omitempty"`
	Policy    pipeline.PolicyState `json:"policy"`
	Stages    pipeline.Stats       `json:"stages"`
	Tally     tally.Snapshot       `json:"tally"`
	Backends  []backend.Status     `json:"backends"`
	Plugins   []pluginhost.Status  `json:"plugins"`
	Sandboxes *uiSandboxes         `json:"sandboxes,omitempty"`
	Nodes     []coord.NodeStatus   `json:"nodes,omitempty"`
	Unacked   int                  `json:"unacked_results"`
	// Stuck counts live rollouts held in one stage longer than
	// pipeline.stuck_after.
	Stuck      int     `json:"stuck"`
	StuckAfter float64 `json:"stuck_after_seconds"`
}

type uiSandboxes struct {
	Running  int `json:"running"`
	Starting int `json:"starting"`
}

func (s *server) overview() uiOverview {
	o := uiOverview{Time: time.Now(), Policy: s.Pipeline.PolicyState(), Stages: s.Pipeline.Stats(), Tally: s.Pipeline.Tally().Snapshot(),
		Backends: s.Pool.List(), Plugins: s.Plugins.Statuses(), Unacked: s.Store.Stats().Finished}
	o.StuckAfter = s.svc.Settings().Pipeline.StuckAfter.Seconds()
	o.Stuck = StuckCount(s.Pipeline.Active(), s.svc.Settings().Pipeline.StuckAfter.Duration, o.Time)
	if s.SandboxStats != nil {
		r, st := s.SandboxStats()
		o.Sandboxes = &uiSandboxes{Running: r, Starting: st}
	}
	if s.Cluster != nil {
		o.Nodes = s.Cluster.Nodes()
	}
	return o
}

func (s *server) uiOverview(w http.ResponseWriter, _ *http.Request) {
	api.WriteJSON(w, http.StatusOK, s.overview())
}

// streamMinInterval is the shortest interval_ms of the live stream, and
// how long its viewers share one overview.
const streamMinInterval = 250 * time.Millisecond

// sharedSnapshot is the encoded overview the live streams send: built at
// most once per streamMinInterval whatever the number of viewers (each
// built its own before, so a dashboard open in many tabs cost the host one
// snapshot per tab per interval).
type sharedSnapshot struct {
	mu   sync.Mutex
	at   time.Time
	data []byte
}

// get returns the snapshot, rebuilt by build if older than streamMinInterval.
func (c *sharedSnapshot) get(build func() []byte) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.data == nil || time.Since(c.at) >= streamMinInterval {
		c.data, c.at = build(), time.Now()
	}
	return c.data
}

// uiStream pushes the overview as server-sent events every interval_ms
// (default 1000, at least 250); the viewers share one snapshot.
func (s *server) uiStream(w http.ResponseWriter, r *http.Request) {
	every := time.Second
	if v := r.URL.Query().Get("interval_ms"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < int(streamMinInterval.Milliseconds()) || ms > 60000 {
			api.WriteError(w, api.Invalid("interval_ms", "between %d and 60000", streamMinInterval.Milliseconds()))
			return
		}
		every = time.Duration(ms) * time.Millisecond
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	ctx, cancel := s.svc.WaitCtx(r)
	defer cancel()
	fl, _ := w.(http.Flusher)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		b := s.streamSnap.get(func() []byte {
			b, _ := json.Marshal(s.overview())
			return b
		})
		if _, err := fmt.Fprintf(w, "event: overview\ndata: %s\n\n", b); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// uiRollout is a row of the dashboard's rollouts table.
type uiRollout struct {
	ID         string  `json:"id"`
	GroupID    string  `json:"group_id"`
	Domain     string  `json:"domain"`
	Status     string  `json:"status"`
	Stage      string  `json:"stage"`
	Backend    string  `json:"backend,omitempty"`
	Turn       int     `json:"turns"`
	AgeSeconds float64 `json:"age_seconds"`
	InStageS   float64 `json:"in_stage_seconds,omitempty"`
	// ExpectedTokens and LearnedTokens are a live rollout's (Summary).
	ExpectedTokens int        `json:"expected_tokens,omitempty"`
	LearnedTokens  int        `json:"learned_tokens,omitempty"`
	Stuck          bool       `json:"stuck,omitempty"`
	Reward         *float64   `json:"reward,omitempty"`
	Reason         string     `json:"reason,omitempty"`
	Health         []string   `json:"health,omitempty"`
	FinishedAt     *time.Time `json:"finished_at,omitempty"`
}

// uiRollouts lists live rollouts (a stage held longer than stuck_after,
// default 10m, is flagged) then the last 500 that finished, newest first;
// limit and offset page through them.
func (s *server) uiRollouts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	stuck := s.svc.Settings().Pipeline.StuckAfter.Duration
	if v := q.Get("stuck_after"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			api.WriteError(w, api.Invalid("stuck_after", "a positive duration like 10m, got %q", v))
			return
		}
		stuck = d
	}
	limit, offset := 200, 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			api.WriteError(w, api.Invalid("limit", "between 1 and 1000"))
			return
		}
		limit = n
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			api.WriteError(w, api.Invalid("offset", "a non-negative integer"))
			return
		}
		offset = n
	}
	now := time.Now()
	var rows []uiRollout
	for _, sm := range s.Pipeline.Active() {
		row := uiRollout{ID: sm.ID, GroupID: sm.GroupID, Domain: sm.Domain, Status: sm.Status, Stage: sm.Stage, Backend: sm.Backend, Turn: sm.Turn, AgeSeconds: sm.AgeSeconds,
			ExpectedTokens: sm.ExpectedTokens, LearnedTokens: sm.LearnedTokens}
		if !sm.StageSince.IsZero() {
			row.InStageS = now.Sub(sm.StageSince).Seconds()
			row.Stuck = now.Sub(sm.StageSince) > stuck
		}
		rows = append(rows, row)
	}
	for _, f := range s.Pipeline.Tally().Recent() {
		reward, at := f.Reward, f.FinishedAt
		rows = append(rows, uiRollout{ID: f.ID, GroupID: f.GroupID, Domain: f.Domain, Status: f.Status, Stage: f.Stage, Backend: f.Backend,
			Turn: f.Turns, AgeSeconds: f.TotalMS / 1000, Reward: &reward, Reason: f.Reason, Health: f.Health, FinishedAt: &at})
	}
	total := len(rows)
	rows = rows[min(offset, total):min(offset+limit, total)]
	if rows == nil {
		rows = []uiRollout{}
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"rollouts": rows, "total": total, "stuck_after_seconds": stuck.Seconds()})
}

// uiTokens is each token's text of a rollout's sequence, for the viewer
// (at most 20,000 tokens).
func (s *server) uiTokens(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	res, ok := s.Store.Get(id)
	if !ok {
		if rl, live := s.Pipeline.Lookup(id); live {
			res = s.Pipeline.Snapshot(rl)
		} else {
			api.WriteError(w, api.Errf(http.StatusNotFound, "not_found", "id", "no rollout %q", id))
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	texts, err := s.Pipeline.TokenTexts(ctx, res.Tokens.IDs, 20000)
	if err != nil {
		api.WriteError(w, api.Errf(http.StatusServiceUnavailable, "no_tokenizer", "", "%v", err))
		return
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "texts": texts, "truncated": len(texts) < len(res.Tokens.IDs)})
}

// uiCancel cancels a rollout or a whole group from the dashboard: admin
// only, unlike the API's own cancels (a dashboard is shared).
func (s *server) uiCancel(w http.ResponseWriter, r *http.Request) {
	var req UICancelRequest
	if e := api.Decode(w, r, 1<<16, &req); e != nil {
		api.WriteError(w, e)
		return
	}
	switch {
	case (req.ID == "") == (req.GroupID == ""):
		api.WriteError(w, api.Invalid("id", "give id or group_id"))
	case req.ID != "":
		if !s.Pipeline.Cancel(req.ID, "cancelled from the dashboard") {
			api.WriteError(w, api.Errf(http.StatusNotFound, "not_found", "id", "no live rollout %q", req.ID))
			return
		}
		api.WriteJSON(w, http.StatusOK, map[string]any{"cancelled": 1})
	default:
		n := s.Pipeline.CancelWhere(func(o *pipeline.Rollout) bool { return o.Req.GroupID == req.GroupID }, "cancelled from the dashboard")
		api.WriteJSON(w, http.StatusOK, map[string]any{"cancelled": n})
	}
}

// StuckCount counts live rollouts held in one stage longer than after.
func StuckCount(active []pipeline.Summary, after time.Duration, now time.Time) int {
	n := 0
	for _, sm := range active {
		if !sm.StageSince.IsZero() && now.Sub(sm.StageSince) > after {
			n++
		}
	}
	return n
}

// UICancelRequest is POST /v1/ui/cancel: a rollout or a group.
type UICancelRequest struct {
	ID      string `json:"id"`
	GroupID string `json:"group_id"`
}
