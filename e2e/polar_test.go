package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Polar's wire models (src/polar/rollout/models.py, trajectory/models.py),
// decoded strictly: a field we send that Polar's clients do not know, or
// one we leave out, fails here.
type polarTrace struct {
	PromptIDs        []int            `json:"prompt_ids"`
	ResponseIDs      []int            `json:"response_ids"`
	LossMask         []int            `json:"loss_mask"`
	PromptMessages   []map[string]any `json:"prompt_messages"`
	ResponseMessages []map[string]any `json:"response_messages"`
	Tools            []map[string]any `json:"tools"`
	FinishReason     *string          `json:"finish_reason"`
	ResponseLogprobs []float64        `json:"response_logprobs"`
	Reward           *float64         `json:"reward"`
	Metadata         map[string]any   `json:"metadata"`
}

type polarSession struct {
	SessionID  string `json:"session_id"`
	TaskID     string `json:"task_id"`
	Status     string `json:"status"`
	Trajectory struct {
		Status   string         `json:"status"`
		Metadata map[string]any `json:"metadata"`
		Traces   []polarTrace   `json:"traces"`
		Error    *string        `json:"error"`
	} `json:"trajectory"`
	Timing   map[string]float64 `json:"timing"`
	NodeID   *string            `json:"node_id"`
	Error    *string            `json:"error"`
	Metadata map[string]any     `json:"metadata"`
}

type polarTaskStatus struct {
	TaskID            string         `json:"task_id"`
	Status            string         `json:"status"`
	TotalSessions     int            `json:"total_sessions"`
	CompletedSessions int            `json:"completed_sessions"`
	Results           []polarSession `json:"results"`
	ResultPaths       []string       `json:"result_paths"`
	GroupID           string         `json:"group_id"`
}

// Polar's SessionTiming forbids fields it does not define.
var polarTimingFields = map[string]bool{"register_to_init_queue_ms": true, "rollout_dispatch_ms": true, "rollout_result_wait_ms": true,
	"rollout_pipeline_e2e_ms": true, "init_ms": true, "ready_queue_ms": true, "run_ms": true, "postrun_queue_ms": true, "postrun_ms": true,
	"container_start_ms": true, "eval_container_start_ms": true, "runtime_validation_ms": true, "eval_runtime_validation_ms": true,
	"prepare_ms": true, "eval_prepare_ms": true, "agent_setup_ms": true, "agent_exec_ms": true, "agent_postprocess_ms": true,
	"build_ms": true, "eval_ms": true, "postrun_exec_ms": true, "runtime_stop_ms": true, "e2e_ms": true}

func strictJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("not Polar's shape: %v\n%s", err, b)
	}
}

func polarTask(id string, n int, extra map[string]any) map[string]any {
	t := map[string]any{
		"task_id": id, "instruction": "What is 17 + 25?", "num_samples": n, "timeout_seconds": 120,
		"agent":     map[string]any{"harness": "prorl", "model_name": "policy", "settings": map[string]any{"temperature": 1.0, "max_turns": 6}},
		"builder":   map[string]any{"strategy": "prefix_merging"},
		"evaluator": map[string]any{"strategy": "math", "config": map[string]any{"answer": "42"}},
		"runtime":   map[string]any{"backend": "apptainer", "image": "math.sif", "allow_internet": false},
		"metadata":  map[string]any{"step": 3},
	}
	for k, v := range extra {
		t[k] = v
	}
	return t
}

func (e *env) waitTask(t *testing.T, id string) polarTaskStatus {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		r := e.do("GET", "/rollout/task/"+id, nil)
		if r.code != 200 {
			t.Fatalf("GET task %s: %d %s", id, r.code, r.body)
		}
		var st polarTaskStatus
		strictJSON(t, r.body, &st)
		if st.Status != "running" && st.Status != "cancelling" {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("task %s never finished", id)
	return polarTaskStatus{}
}

// TestPolarTaskAPI drives Polar's task API as a Polar trainer bridge does:
// submit, poll, the callback, /events, /tasks, sessions, cancel with the
// register_if_missing tombstone, the 409/422 answers, early stop, and a
// task found again after a host restart.
func TestPolarTaskAPI(t *testing.T) {
	// The operator lets callbacks reach the trainer on this machine.
	e := newEnv(t, envOpts{simArgs: []string{"--think-turns", "2", "--token-latency", "2ms", "--correct-rate", "1"}, staticBackend: true,
		pipelineTOML: "run_workers = 1\n", serverTOML: "callback_allow = [\"127.0.0.1\"]\n"})
	e.startHost()

	// The callback fails once: the host retries.
	var calls atomic.Int32
	cbBody := make(chan []byte, 4)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if calls.Add(1) == 1 {
			w.WriteHeader(500)
			return
		}
		cbBody <- b
	}))
	defer cb.Close()

	// /events, read as a Polar dashboard does.
	evReq, _ := http.NewRequest("GET", e.host+"/events", nil)
	evRes, err := http.DefaultClient.Do(evReq)
	if err != nil || evRes.StatusCode != 200 || !strings.HasPrefix(evRes.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("/events: %v %v", err, evRes)
	}
	var evMu sync.Mutex
	var events []string
	go func() {
		sc := bufio.NewScanner(evRes.Body)
		for sc.Scan() {
			if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				evMu.Lock()
				events = append(events, name)
				evMu.Unlock()
			}
		}
	}()
	defer evRes.Body.Close()

	r := e.do("POST", "/rollout/task/submit", polarTask("t-1", 4, map[string]any{"callback_url": cb.URL + "/done"}))
	if r.code != 200 || !strings.Contains(string(r.body), `"status":"running"`) {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	if r := e.do("POST", "/rollout/task/submit", polarTask("t-1", 4, nil)); r.code != 409 || !strings.Contains(string(r.body), "already running") {
		t.Fatalf("duplicate running task: %d %s", r.code, r.body)
	}
	st := e.waitTask(t, "t-1")
	if st.Status != "completed" || st.TotalSessions != 4 || st.CompletedSessions != 4 || len(st.Results) != 4 || st.ResultPaths == nil {
		t.Fatalf("task: %+v", st)
	}
	for _, s := range st.Results {
		checkPolarSession(t, s, "t-1")
		if s.Status != "COMPLETED" || s.Trajectory.Traces[0].Reward == nil || *s.Trajectory.Traces[0].Reward != 1 {
			t.Fatalf("session %s: %s reward %v", s.SessionID, s.Status, s.Trajectory.Traces[0].Reward)
		}
		if s.Metadata["step"] != 3.0 {
			t.Errorf("task metadata not on the session: %v", s.Metadata)
		}
	}
	select {
	case b := <-cbBody:
		var res struct {
			TaskID      string         `json:"task_id"`
			Status      string         `json:"status"`
			Results     []polarSession `json:"results"`
			ResultPaths []string       `json:"result_paths"`
		}
		strictJSON(t, b, &res)
		if res.TaskID != "t-1" || res.Status != "completed" || len(res.Results) != 4 || calls.Load() != 2 {
			t.Fatalf("callback after %d calls: %s %s %d results", calls.Load(), res.TaskID, res.Status, len(res.Results))
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no callback delivered (%d attempts)", calls.Load())
	}
	// A finished id may be submitted again (Polar allows it).
	if r := e.do("POST", "/rollout/task/submit", polarTask("t-1", 1, nil)); r.code != 200 {
		t.Fatalf("resubmit a finished task: %d %s", r.code, r.body)
	}
	if st := e.waitTask(t, "t-1"); st.TotalSessions != 1 || st.Status != "completed" {
		t.Fatalf("resubmitted task: %+v", st)
	}

	// Listing, sessions and status.
	var list struct {
		Tasks []map[string]any `json:"tasks"`
	}
	e.do("GET", "/tasks?status=completed&limit=10", nil).json(t, &list)
	if len(list.Tasks) != 1 || list.Tasks[0]["task_id"] != "t-1" || list.Tasks[0]["mean_reward"] != 1.0 || list.Tasks[0]["harness"] != "prorl" {
		t.Fatalf("/tasks: %+v", list.Tasks)
	}
	var sess struct {
		TaskID   string           `json:"task_id"`
		Sessions []map[string]any `json:"sessions"`
	}
	e.do("GET", "/tasks/t-1/sessions", nil).json(t, &sess)
	if len(sess.Sessions) != 1 || sess.Sessions[0]["status"] != "COMPLETED" || sess.Sessions[0]["reward"] != 1.0 {
		t.Fatalf("sessions: %+v", sess)
	}
	var rs map[string]any
	e.do("GET", "/rollout/status", nil).json(t, &rs)
	if tasks, _ := rs["tasks"].(map[string]any); tasks["t-1"] != "completed" {
		t.Fatalf("/rollout/status: %v", rs)
	}

	// Early stop: one run worker, six samples, two usable wanted.
	if r := e.do("POST", "/rollout/task/submit", polarTask("t-early", 6, map[string]any{"early_stop_min_usable_sessions": 2})); r.code != 200 {
		t.Fatalf("submit early: %d %s", r.code, r.body)
	}
	st = e.waitTask(t, "t-early")
	usable, stopped := 0, 0
	for _, s := range st.Results {
		checkPolarSession(t, s, "t-early")
		switch {
		case s.Status == "COMPLETED":
			usable++
		case s.Metadata["early_stopped"] == true && s.Error != nil && strings.HasPrefix(*s.Error, "early_stopped"):
			stopped++
		default:
			t.Fatalf("session %s: %s %v", s.SessionID, s.Status, s.Error)
		}
	}
	if st.Status != "completed" || len(st.Results) != 6 || usable < 2 || stopped < 1 {
		t.Fatalf("early stop: %s, %d results, %d usable, %d stopped", st.Status, len(st.Results), usable, stopped)
	}

	// Cancel a running task: its unfinished sessions leave no results. The
	// simulator is paused meanwhile, so the task is still running when the
	// cancel arrives however slowly a loaded machine delivers it.
	if err := e.simP.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if r := e.do("POST", "/rollout/task/submit", polarTask("t-cancel", 8, nil)); r.code != 200 {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	r = e.do("DELETE", "/rollout/task/t-cancel", nil)
	if err := e.simP.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var cs polarTaskStatus
	strictJSON(t, r.body, &cs)
	if r.code != 200 || cs.Status != "cancelled" || cs.TotalSessions != 8 || len(cs.Results) == 8 {
		t.Fatalf("cancel: %d %+v", r.code, cs)
	}
	if r := e.do("DELETE", "/rollout/task/nope", nil); r.code != 404 || !strings.Contains(string(r.body), "Task not found") {
		t.Fatalf("cancel unknown: %d %s", r.code, r.body)
	}
	// The cancel marker: a DELETE that beats the submit keeps it out.
	if r := e.do("DELETE", "/rollout/task/late?register_if_missing=true", nil); r.code != 200 || !strings.Contains(string(r.body), `"cancelled"`) {
		t.Fatalf("register_if_missing: %d %s", r.code, r.body)
	}
	if r := e.do("POST", "/rollout/task/submit", polarTask("late", 1, nil)); r.code != 409 || !strings.Contains(string(r.body), "cancelled before submission") {
		t.Fatalf("submit after the marker: %d %s", r.code, r.body)
	}

	// What is refused, each with FastAPI's 422 naming the field.
	for _, c := range []struct {
		body map[string]any
		loc  string
	}{
		{map[string]any{"task_id": "x", "instruction": "q"}, `["body","agent"]`},
		{polarTask("x", 2, map[string]any{"early_stop_min_usable_sessions": 3}), `["body","early_stop_min_usable_sessions"]`},
		{polarTask("x", 1, map[string]any{"dispatch_priority": 101}), `["body","dispatch_priority"]`},
		{polarTask("x", 0, nil), `["body","num_samples"]`},
		{polarTask("x", 1, map[string]any{"agent": map[string]any{"harness": "gemini_cli"}}), `["body","agent","harness"]`},
		{polarTask("x", 1, map[string]any{"agent": map[string]any{"settings": map[string]any{"reasoning_effort": "high"}}}), `["body","agent","settings","reasoning_effort"]`},
		{polarTask("x", 1, map[string]any{"runtime": map[string]any{"image": "i", "prepare": []any{map[string]any{"type": "exec", "command": "pip install x"}}}}), `["body","runtime","prepare"]`},
		{polarTask("x", 1, map[string]any{"evaluator": map[string]any{"strategy": "nosuch"}}), `["body","evaluator","strategy"]`},
		{polarTask("x", 1, map[string]any{"timeout_seconds": 0}), `["body","timeout_seconds"]`},
		{polarTask("x", 1, map[string]any{"bogus": 1}), `["body","bogus"]`},
		{polarTask("x", 1, map[string]any{"metadata": map[string]any{"agent_timeout": -1}}), `["body","metadata"]`},
	} {
		r := e.do("POST", "/rollout/task/submit", c.body)
		if r.code != 422 || !strings.Contains(string(r.body), `"loc":`+c.loc) {
			t.Errorf("want 422 at %s: %d %s", c.loc, r.code, r.body)
		}
	}

	evMu.Lock()
	seen := strings.Join(events, ",")
	evMu.Unlock()
	for _, want := range []string{"task.created", "session.state_changed", "task.updated", "task.completed"} {
		if !strings.Contains(seen, want) {
			t.Errorf("/events never sent %s: %s", want, seen)
		}
	}

	// A restarted host finds the task again from its store, and keeps the
	// cancel marker.
	e.stopHost()
	e.startHost()
	st = e.waitTask(t, "t-early")
	if st.Status != "completed" || len(st.Results) != 6 {
		t.Fatalf("after restart: %s with %d results", st.Status, len(st.Results))
	}
	if r := e.do("POST", "/rollout/task/submit", polarTask("late", 1, nil)); r.code != 409 || !strings.Contains(string(r.body), "cancelled before submission") {
		t.Fatalf("submit after the marker, after a restart: %d %s", r.code, r.body)
	}
}

// checkPolarSession checks a session against Polar's models and our
// sequence: the trace's ids, mask and logprobs line up.
func checkPolarSession(t *testing.T, s polarSession, task string) {
	t.Helper()
	if s.TaskID != task || s.SessionID == "" || s.Trajectory.Status != s.Status || s.Timing == nil {
		t.Fatalf("session: %+v", s)
	}
	for k := range s.Timing {
		if !polarTimingFields[k] {
			t.Fatalf("timing field %q is not in Polar's SessionTiming (it forbids extras)", k)
		}
	}
	if s.Status != "COMPLETED" {
		return
	}
	if len(s.Trajectory.Traces) != 1 {
		t.Fatalf("session %s has %d traces", s.SessionID, len(s.Trajectory.Traces))
	}
	tr := s.Trajectory.Traces[0]
	if len(tr.PromptIDs) == 0 || len(tr.ResponseIDs) == 0 || len(tr.LossMask) != len(tr.ResponseIDs) || len(tr.ResponseLogprobs) != len(tr.ResponseIDs) {
		t.Fatalf("trace lengths: prompt %d response %d mask %d logprobs %d", len(tr.PromptIDs), len(tr.ResponseIDs), len(tr.LossMask), len(tr.ResponseLogprobs))
	}
	if tr.ResponseMessages[0]["role"] != "assistant" || tr.PromptMessages[len(tr.PromptMessages)-1]["role"] != "user" || tr.FinishReason == nil {
		t.Fatalf("trace messages split wrongly: %v / %v", tr.PromptMessages, tr.ResponseMessages[0])
	}
	for _, m := range tr.LossMask {
		if m != 0 && m != 1 {
			t.Fatalf("loss_mask value %d", m)
		}
	}
}

// TestPolarResubmitAfterCrash: a task still running when its host was
// killed is running again after the restart (its rollouts resume), so a
// resubmission of its id is refused as it would have been before the
// crash, rather than starting a second group beside the first.
func TestPolarResubmitAfterCrash(t *testing.T) {
	e := newEnv(t, envOpts{simArgs: []string{"--think-turns", "3", "--token-latency", "20ms", "--correct-rate", "1"}, staticBackend: true})
	e.startHost()
	if r := e.do("POST", "/rollout/task/submit", polarTask("t-crash", 2, nil)); r.code != 200 {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	e.killHost()
	e.startHost()
	if r := e.do("POST", "/rollout/task/submit", polarTask("t-crash", 2, nil)); r.code != 409 || !strings.Contains(string(r.body), "already running") {
		t.Fatalf("resubmit after the crash, while the task runs: %d %s", r.code, r.body)
	}
	if st := e.waitTask(t, "t-crash"); st.Status != "completed" || len(st.Results) != 2 {
		t.Fatalf("after the crash: %s with %d results", st.Status, len(st.Results))
	}
}
