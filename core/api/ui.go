package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/coord"
	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/tally"
)

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

func (s *Server) overview() uiOverview {
	o := uiOverview{Time: time.Now(), Policy: s.Pipeline.PolicyState(), Stages: s.Pipeline.Stats(), Tally: s.Pipeline.Tally().Snapshot(),
		Backends: s.Pool.List(), Plugins: s.Plugins.Statuses(), Unacked: s.Store.Stats().Finished}
	o.StuckAfter = s.Cfg.Pipeline.StuckAfter.Seconds()
	o.Stuck = StuckCount(s.Pipeline.Active(), s.Cfg.Pipeline.StuckAfter.Duration, o.Time)
	if s.SandboxStats != nil {
		r, st := s.SandboxStats()
		o.Sandboxes = &uiSandboxes{Running: r, Starting: st}
	}
	if s.Cluster != nil {
		o.Nodes = s.Cluster.Nodes()
	}
	return o
}

func (s *Server) uiOverview(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, s.overview())
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
func (s *Server) uiStream(w http.ResponseWriter, r *http.Request) {
	every := time.Second
	if v := r.URL.Query().Get("interval_ms"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < int(streamMinInterval.Milliseconds()) || ms > 60000 {
			WriteError(w, Invalid("interval_ms", "between %d and 60000", streamMinInterval.Milliseconds()))
			return
		}
		every = time.Duration(ms) * time.Millisecond
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	ctx, cancel := s.waitCtx(r)
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
func (s *Server) uiRollouts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	stuck := s.Cfg.Pipeline.StuckAfter.Duration
	if v := q.Get("stuck_after"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			WriteError(w, Invalid("stuck_after", "a positive duration like 10m, got %q", v))
			return
		}
		stuck = d
	}
	limit, offset := 200, 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			WriteError(w, Invalid("limit", "between 1 and 1000"))
			return
		}
		limit = n
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			WriteError(w, Invalid("offset", "a non-negative integer"))
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
	WriteJSON(w, http.StatusOK, map[string]any{"rollouts": rows, "total": total, "stuck_after_seconds": stuck.Seconds()})
}

// uiTokens is each token's text of a rollout's sequence, for the viewer
// (at most 20,000 tokens).
func (s *Server) uiTokens(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	res, ok := s.Store.Get(id)
	if !ok {
		if rl, live := s.Pipeline.Lookup(id); live {
			res = s.Pipeline.Snapshot(rl)
		} else {
			WriteError(w, Errf(http.StatusNotFound, "not_found", "id", "no rollout %q", id))
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	texts, err := s.Pipeline.TokenTexts(ctx, res.Tokens.IDs, 20000)
	if err != nil {
		WriteError(w, Errf(http.StatusServiceUnavailable, "no_tokenizer", "", "%v", err))
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{"id": id, "texts": texts, "truncated": len(texts) < len(res.Tokens.IDs)})
}

// uiCancel cancels a rollout or a whole group from the dashboard: admin
// only, unlike the API's own cancels (a dashboard is shared).
func (s *Server) uiCancel(w http.ResponseWriter, r *http.Request) {
	var req UICancelRequest
	if e := Decode(w, r, 1<<16, &req); e != nil {
		WriteError(w, e)
		return
	}
	switch {
	case (req.ID == "") == (req.GroupID == ""):
		WriteError(w, Invalid("id", "give id or group_id"))
	case req.ID != "":
		if !s.Pipeline.Cancel(req.ID, "cancelled from the dashboard") {
			WriteError(w, Errf(http.StatusNotFound, "not_found", "id", "no live rollout %q", req.ID))
			return
		}
		WriteJSON(w, http.StatusOK, map[string]any{"cancelled": 1})
	default:
		n := s.Pipeline.CancelWhere(func(o *pipeline.Rollout) bool { return o.Req.GroupID == req.GroupID }, "cancelled from the dashboard")
		WriteJSON(w, http.StatusOK, map[string]any{"cancelled": n})
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
