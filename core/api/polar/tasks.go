package polar

import (
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/trajectory"
)

// polarTask is a task's record.
type polarTask struct {
	id, group, harness, model, callback string
	rollouts                            []string
	status                              string
	results                             []PolarSession
	created, updated                    time.Time
	done                                chan struct{} // closed when every session has its result
}

// polarTasks holds the task records. Polar keeps them in memory; here a
// task's group and rollout ids are also in the store, so after a restart
// GET /rollout/task/{id} rebuilds the task from the durable results, for
// [server] idempotency_ttl after its last submission.
type polarTasks struct {
	mu         sync.Mutex
	tasks      map[string]*polarTask
	tombstones map[string]time.Time
	sweeper    *time.Timer // set while tombstones holds any
	events     *eventBus
	node       *string
}

// Finished tasks kept in memory; older ones are acknowledged in the store.
const polarKeep = 1000

var (
	// A DELETE with register_if_missing keeps a late submit of the id out
	// this long (Polar's TTL).
	tombstoneTTL = 5 * time.Minute
	// maxTombstones bounds the cancel markers held in memory at once.
	maxTombstones = 100_000
)

// tombstone records a cancel marker for id until tombstoneTTL from now;
// the markers are swept as they expire, by a timer. Full, it refuses and
// says when the oldest goes.
func (pt *polarTasks) tombstone(id string, now time.Time) (wait time.Duration, ok bool) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if _, have := pt.tombstones[id]; !have && len(pt.tombstones) >= maxTombstones {
		oldest := now.Add(tombstoneTTL)
		for _, until := range pt.tombstones {
			if until.Before(oldest) {
				oldest = until
			}
		}
		return oldest.Sub(now), false
	}
	pt.tombstones[id] = now.Add(tombstoneTTL)
	if pt.sweeper == nil {
		pt.sweeper = time.AfterFunc(tombstoneTTL, pt.sweepTombstones)
	}
	return 0, true
}

// sweepTombstones drops the expired markers and runs again when the next
// one expires; none left, it stops.
func (pt *polarTasks) sweepTombstones() {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	now := time.Now()
	var next time.Time
	for id, until := range pt.tombstones {
		switch {
		case !now.Before(until):
			delete(pt.tombstones, id)
		case next.IsZero() || until.Before(next):
			next = until
		}
	}
	if next.IsZero() {
		pt.sweeper = nil
		return
	}
	pt.sweeper.Reset(next.Sub(now))
}

func newPolarTasks() *polarTasks {
	pt := &polarTasks{tasks: map[string]*polarTask{}, tombstones: map[string]time.Time{}, events: newEventBus()}
	if h, err := os.Hostname(); err == nil {
		pt.node = &h
	}
	return pt
}

func (pt *polarTasks) statusLocked(t *polarTask) PolarTaskStatus {
	return PolarTaskStatus{TaskID: t.id, Status: t.status, TotalSessions: len(t.rollouts), CompletedSessions: len(t.results),
		Results: append([]PolarSession{}, t.results...), ResultPaths: []string{}, GroupID: t.group}
}

// prune drops the oldest finished tasks past polarKeep and acknowledges
// their results in the store; pt.mu is held.
func (pt *polarTasks) prune(st api.Service) {
	if len(pt.tasks) <= polarKeep {
		return
	}
	var old []*polarTask
	for _, t := range pt.tasks {
		if t.status != "running" && t.status != "cancelling" {
			old = append(old, t)
		}
	}
	sort.Slice(old, func(i, j int) bool { return old[i].updated.Before(old[j].updated) })
	for _, t := range old[:min(len(old), len(pt.tasks)-polarKeep)] {
		delete(pt.tasks, t.id)
		_, _ = st.Ack(t.rollouts)
	}
}

// lookup finds a task, in memory or, after a restart, from the store.
func (s *server) lookup(id string) *polarTask {
	pt := s.tasks
	pt.mu.Lock()
	t := pt.tasks[id]
	pt.mu.Unlock()
	if t != nil {
		return t
	}
	sub, found := s.polarRecord(id)
	if !found {
		return nil
	}
	t = &polarTask{id: id, group: sub.GroupID, rollouts: sub.RolloutIDs, harness: "prorl", status: "running", done: make(chan struct{})}
	var live []*pipeline.Rollout
	for _, rid := range sub.RolloutIDs {
		// The pipeline first: a rollout's result is stored before it
		// leaves the pipeline, so none slips between the two looks.
		if r, ok := s.svc.Live(rid); ok {
			live = append(live, r)
		} else if res, ok := s.svc.Result(rid); ok && res.Status.Finished() {
			t.results = append(t.results, toPolarSession(res, id, pt.node))
		}
	}
	if len(live)+len(t.results) == 0 {
		// Nothing of it is left (its results acknowledged, as prune does
		// past polarKeep): evicted, as Polar answers, not "completed" with
		// none of its sessions.
		return nil
	}
	t.created, t.updated = time.Now(), time.Now()
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if cur := pt.tasks[id]; cur != nil {
		return cur
	}
	pt.tasks[id] = t
	if len(live) == 0 {
		t.status = "completed"
		close(t.done)
	} else {
		go s.polarWatch(t, live)
	}
	return t
}

func (s *server) get(w http.ResponseWriter, r *http.Request) {
	t := s.lookup(mux.Vars(r)["task_id"])
	if t == nil {
		api.Detail(w, http.StatusNotFound, "Task not found")
		return
	}
	s.tasks.mu.Lock()
	st := s.tasks.statusLocked(t)
	s.tasks.mu.Unlock()
	api.WriteJSON(w, http.StatusOK, st)
}

func (s *server) cancel(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["task_id"]
	reg := false
	if v := r.URL.Query().Get("register_if_missing"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			api.FastAPIInvalid(w, "bool_parsing", []any{"query", "register_if_missing"}, "Input should be a valid boolean")
			return
		}
		reg = b
	}
	pt := s.tasks
	t := s.lookup(id)
	if t == nil {
		if !reg {
			api.Detail(w, http.StatusNotFound, "Task not found")
			return
		}
		if wait, ok := pt.tombstone(id, time.Now()); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
			api.Detail(w, http.StatusTooManyRequests, fmt.Sprintf("%d cancel markers are held; retry later", maxTombstones))
			return
		}
		// In the store too, so a host restarted within the TTL keeps the
		// late submit out; the memory one holds if the store cannot write.
		if err := s.svc.Mark(polarTombKey(id)); err != nil {
			s.svc.Logger().Warn("Polar cancel marker not stored; it holds until a restart", "task_id", logID(id), "error", err)
		}
		api.WriteJSON(w, http.StatusOK, PolarTaskStatus{TaskID: id, Status: "cancelled", Results: []PolarSession{}, ResultPaths: []string{}})
		return
	}
	pt.mu.Lock()
	if t.status != "running" {
		st := pt.statusLocked(t)
		pt.mu.Unlock()
		api.WriteJSON(w, http.StatusOK, st)
		return
	}
	t.status = "cancelling"
	pt.mu.Unlock()
	s.svc.CancelWhere(func(ro *pipeline.Rollout) bool { return ro.Req.GroupID == t.group }, "polar task cancelled")
	select {
	case <-t.done:
	case <-r.Context().Done():
		return
	case <-time.After(30 * time.Second):
	}
	pt.mu.Lock()
	if t.status != "completed" {
		t.status = "cancelled"
	}
	t.updated = time.Now()
	st := pt.statusLocked(t)
	pt.mu.Unlock()
	pt.events.publish("task.completed", map[string]any{"task_id": id, "status": "cancelled"})
	api.WriteJSON(w, http.StatusOK, st)
}

func (s *server) status(w http.ResponseWriter, _ *http.Request) {
	pt := s.tasks
	pt.mu.Lock()
	tasks := map[string]string{}
	pending := 0
	for id, t := range pt.tasks {
		tasks[id] = t.status
		if t.status == "running" || t.status == "cancelling" {
			pending += len(t.rollouts) - len(t.results)
		}
	}
	pt.mu.Unlock()
	st := s.svc.Stats()
	api.WriteJSON(w, http.StatusOK, map[string]any{
		"tasks":    tasks,
		"pipeline": map[string]any{"pending_sessions": pending, "init_queue_depth": st.InitQueue, "init_inflight": st.ActiveInit, "ready_depth": st.RunQueue, "run_inflight": st.ActiveRun, "postrun_queue_depth": st.EvalQueue, "postrun_inflight": st.ActiveEval},
		"nodes":    map[string]any{"total": 1, "healthy": 1, "node_ids": []any{pt.node}},
	})
}

func (s *server) health(w http.ResponseWriter, _ *http.Request) {
	api.WriteJSON(w, http.StatusOK, map[string]any{"status": "ok", "nodes": 1})
}

func (s *server) taskList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 200
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			api.FastAPIInvalid(w, "value_error", []any{"query", "limit"}, "must be an integer from 1 to 1000")
			return
		}
		limit = n
	}
	var since *float64
	if v := q.Get("since"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			api.FastAPIInvalid(w, "float_parsing", []any{"query", "since"}, "Input should be a valid number")
			return
		}
		since = &f
	}
	pt := s.tasks
	pt.mu.Lock()
	out := []map[string]any{}
	for _, t := range pt.tasks {
		up := float64(t.updated.UnixNano()) / 1e9
		if (q.Get("status") != "" && t.status != q.Get("status")) || (q.Get("harness") != "" && t.harness != q.Get("harness")) || (since != nil && up < *since) {
			continue
		}
		out = append(out, map[string]any{"task_id": t.id, "status": t.status, "harness": t.harness, "model": t.model,
			"num_samples": len(t.rollouts), "completed_sessions": len(t.results), "errored_sessions": errored(t.results),
			"mean_reward": meanReward(t.results), "mean_traces": meanTraces(t.results), "mean_completions": meanCompletions(t.results),
			"created_at": float64(t.created.UnixNano()) / 1e9, "updated_at": up, "source": "live"})
	}
	pt.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i]["updated_at"].(float64) > out[j]["updated_at"].(float64) })
	api.WriteJSON(w, http.StatusOK, map[string]any{"tasks": out[:min(limit, len(out))]})
}

func (s *server) sessions(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["task_id"]
	t := s.lookup(id)
	if t == nil {
		api.Detail(w, http.StatusNotFound, "Task not found")
		return
	}
	pt := s.tasks
	pt.mu.Lock()
	done := map[string]PolarSession{}
	for _, sess := range t.results {
		done[sess.SessionID] = sess
	}
	rollouts := append([]string{}, t.rollouts...)
	pt.mu.Unlock()
	out := []map[string]any{}
	for _, rid := range rollouts {
		if sess, ok := done[rid]; ok {
			var reward *float64
			if tr := sess.Trajectory.Traces; len(tr) > 0 {
				reward = tr[len(tr)-1].Reward
			}
			out = append(out, map[string]any{"session_id": rid, "task_id": id, "status": sess.Status, "node_id": sess.NodeID, "reward": reward, "timing": sess.Timing, "error": sess.Error})
			continue
		}
		status := "REGISTERED"
		if ro, ok := s.svc.Live(rid); ok {
			snap := s.svc.Snapshot(ro)
			status = polarLiveStatus(string(snap.Status), snap.Stage)
		}
		out = append(out, map[string]any{"session_id": rid, "task_id": id, "status": status})
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"task_id": id, "sessions": out})
}

// polarLiveStatus names a live rollout's place in Polar's session states.
func polarLiveStatus(status, stage string) string {
	running := status == "running"
	switch stage {
	case trajectory.StageInit:
		if running {
			return "INITIALIZING"
		}
		return "REGISTERED"
	case trajectory.StageRun:
		if running {
			return "RUNNING"
		}
		return "READY"
	case trajectory.StageEval:
		if running {
			return "EVALUATING"
		}
		return "POST_RUN"
	}
	return "REGISTERED"
}
