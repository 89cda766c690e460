package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/trajectory"
)

func (e *env) domain(t *testing.T) pluginhost.Status {
	var d struct {
		Domains []pluginhost.Status `json:"domains"`
	}
	e.do("GET", "/v1/domains", nil).json(t, &d)
	if len(d.Domains) != 1 {
		t.Fatalf("domains %+v", d.Domains)
	}
	return d.Domains[0]
}

// waitRunning waits until at least n rollouts are in the run stage.
func (e *env) waitRunning(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var l struct {
			Rollouts []map[string]any `json:"rollouts"`
		}
		e.do("GET", "/v1/rollouts?status=running&stage=run", nil).json(t, &l)
		if len(l.Rollouts) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rollouts never reached the run stage: %v", l)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) wait(t *testing.T, id string) *trajectory.Result {
	t.Helper()
	// Long enough for the first of many queued rollouts on a loaded 2-core
	// machine: a fresh-clone make test ran TestHarnessRollouts' 54 agent
	// CLIs beside the other packages' tests, and the first one waited for
	// was not done 90 s after its submission (alone, the test takes 146 s).
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		var res trajectory.Result
		e.do("GET", "/v1/rollouts/"+id+"?wait=30s", nil).json(t, &res)
		if res.Status.Finished() {
			return &res
		}
	}
	t.Fatalf("rollout %s did not finish", id)
	return nil
}

func TestPluginCrash(t *testing.T) {
	// Slow tokens keep rollouts inside the run stage long enough to kill the plugin under them.
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1", "--think-turns", "2", "--token-latency", "15ms"}})
	e.startHost()
	e.addBackend()
	var sub api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}, "n": 6}).json(t, &sub)
	e.waitRunning(t, 3)
	before := e.domain(t)
	if before.PID == 0 {
		t.Fatal("no plugin pid")
	}
	if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Math keeps no per-process state: every rollout goes on with the
	// restarted process, and none is lost to the crash.
	for _, id := range sub.RolloutIDs {
		if res := e.wait(t, id); res.Status != trajectory.StatusCompleted || res.Reward != 1 {
			t.Errorf("%s: %s %+v reward %v after a plugin crash", id, res.Status, res.Failure, res.Reward)
		}
	}
	if r := e.do("GET", "/healthz", nil); r.code != 200 {
		t.Fatalf("host unhealthy after plugin crash: %d", r.code)
	}
	after := e.domain(t)
	deadline := time.Now().Add(30 * time.Second)
	for !after.Healthy && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		after = e.domain(t)
	}
	if !after.Healthy || after.Restarts != 1 || after.PID == before.PID {
		t.Fatalf("plugin not restarted: %+v", after)
	}
	if err := syscall.Kill(before.PID, 0); err == nil {
		t.Errorf("old plugin process %d still exists", before.PID)
	}
	var sub2 api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}, "n": 2}).json(t, &sub2)
	for _, id := range sub2.RolloutIDs {
		if res := e.wait(t, id); res.Status != trajectory.StatusCompleted || res.Reward != 1 {
			t.Fatalf("after restart: %s %+v reward %v", res.Status, res.Failure, res.Reward)
		}
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.startHost()
	e.addBackend()
	task := `{"domain":"math","question":"q","answer":"1"}`
	big := `{"task":` + task + `,"metadata":{"x":"` + strings.Repeat("a", 9<<20) + `"}}`
	tests := []struct {
		name, method, path, body string
		code                     int
		errCode, field           string
	}{
		{"malformed json", "POST", "/v1/rollouts", `{"task":`, 400, "malformed_json", ""},
		{"not an object", "POST", "/v1/rollouts", `[1,2]`, 400, "invalid_type", ""},
		{"empty body", "POST", "/v1/rollouts", ``, 400, "empty_body", ""},
		{"trailing data", "POST", "/v1/rollouts", `{"task":` + task + `} {}`, 400, "malformed_json", ""},
		{"unknown field", "POST", "/v1/rollouts", `{"task":` + task + `,"bogus":1}`, 400, "unknown_field", "bogus"},
		{"unknown nested field", "POST", "/v1/rollouts", `{"task":` + task + `,"sampling":{"temprature":1}}`, 400, "unknown_field", "temprature"},
		{"wrong type", "POST", "/v1/rollouts", `{"task":` + task + `,"n":"4"}`, 400, "invalid_type", "n"},
		{"missing task", "POST", "/v1/rollouts", `{"n":1}`, 422, "invalid_field", "task"},
		{"task not object", "POST", "/v1/rollouts", `{"task":"math"}`, 422, "invalid_field", "task"},
		{"unknown domain", "POST", "/v1/rollouts", `{"task":{"domain":"chess"}}`, 422, "invalid_field", "task.domain"},
		{"unknown data_source", "POST", "/v1/rollouts", `{"task":{"data_source":"chess"}}`, 422, "invalid_field", "task.data_source"},
		{"n zero", "POST", "/v1/rollouts", `{"task":` + task + `,"n":0}`, 422, "invalid_field", "n"},
		{"n negative", "POST", "/v1/rollouts", `{"task":` + task + `,"n":-3}`, 422, "invalid_field", "n"},
		{"n huge", "POST", "/v1/rollouts", `{"task":` + task + `,"n":1000000}`, 422, "invalid_field", "n"},
		{"temperature negative", "POST", "/v1/rollouts", `{"task":` + task + `,"sampling":{"temperature":-0.5}}`, 422, "invalid_field", "sampling.temperature"},
		{"top_p zero", "POST", "/v1/rollouts", `{"task":` + task + `,"sampling":{"top_p":0}}`, 422, "invalid_field", "sampling.top_p"},
		{"bad timeout", "POST", "/v1/rollouts", `{"task":` + task + `,"timeout":"soon"}`, 422, "invalid_field", "timeout"},
		{"bad group id", "POST", "/v1/rollouts", `{"task":` + task + `,"group_id":"a b"}`, 422, "invalid_field", "group_id"},
		{"reserved idempotency key", "POST", "/v1/rollouts", `{"task":` + task + `,"idempotency_key":"polar-task:1:t"}`, 422, "invalid_field", "idempotency_key"},
		{"reserved idempotency key, dynamic batch", "POST", "/v1/rollouts", `{"task":` + task + `,"idempotency_key":"dynamic-batch:d-1"}`, 422, "invalid_field", "idempotency_key"},
		{"reserved idempotency key, early stop", "POST", "/v1/rollouts", `{"task":` + task + `,"idempotency_key":"early-stop:r-1"}`, 422, "invalid_field", "idempotency_key"},
		{"oversized body", "POST", "/v1/rollouts", big, 413, "body_too_large", ""},
		{"batch empty", "POST", "/v1/rollouts:batch", `{"requests":[]}`, 422, "invalid_field", "requests"},
		{"batch bad item", "POST", "/v1/rollouts:batch", `{"requests":[{"task":` + task + `},{"task":` + task + `,"n":0}]}`, 422, "invalid_field", "requests[1].n"},
		{"unknown protocol", "POST", "/v1/backends", `{"url":"http://127.0.0.1:1","protocol":"grpc"}`, 422, "invalid_field", "protocol"},
		{"sglang without a Go tokenizer", "POST", "/v1/backends", `{"url":"http://127.0.0.1:1","protocol":"sglang"}`, 422, "invalid_field", "protocol"},
		{"bad backend url", "POST", "/v1/backends", `{"url":"ftp://x"}`, 422, "invalid_field", "url"},
		{"ack without ids", "POST", "/v1/results/ack", `{}`, 422, "invalid_field", "ids"},
		{"cancel two selectors", "POST", "/v1/rollouts:cancel", `{"all":true,"group_id":"g"}`, 422, "invalid_field", ""},
		{"policy negative", "PUT", "/v1/policy", `{"version":-1}`, 422, "invalid_field", "version"},
		{"policy int64 max", "PUT", "/v1/policy", `{"version":9223372036854775807}`, 422, "invalid_field", "version"},
		{"policy jump", "PUT", "/v1/policy", `{"version":5000000}`, 422, "invalid_field", "version"},
		{"policy not an integer", "PUT", "/v1/policy", `{"version":1.5}`, 400, "invalid_type", "version"},
		{"body not an object", "POST", "/v1/rollouts", `[1,2]`, 400, "invalid_type", ""},
		{"evaluate no response", "POST", "/v1/evaluate", `{"domain":"math","task":{"question":"q","answer":"1"}}`, 422, "invalid_field", "response"},
		{"evaluate bad task", "POST", "/v1/evaluate", `{"domain":"math","task":{"question":"q"},"response":"x"}`, 422, "invalid_task", "task.answer"},
		{"unknown rollout", "GET", "/v1/rollouts/nope", ``, 404, "not_found", "id"},
		{"bad wait", "GET", "/v1/results?wait=forever", ``, 400, "invalid_field", "wait"},
		{"misspelt query parameter", "GET", "/v1/results?since=0&groupid=g-1", ``, 400, "unknown_field", "groupid"},
		{"query parameter twice", "GET", "/v1/results?since=1&since=2", ``, 400, "invalid_field", "since"},
		{"query parameter not taken", "GET", "/v1/domains?verbose=1", ``, 400, "unknown_field", "verbose"},
		{"malformed query", "GET", "/v1/results?since=%zz", ``, 400, "malformed_query", ""},
		{"no route", "GET", "/v2/things", ``, 404, "not_found", ""},
		{"wrong method", "PATCH", "/v1/rollouts", `{}`, 405, "method_not_allowed", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.method, tt.path, tt.body)
			var body struct {
				Error api.Error `json:"error"`
			}
			r.json(t, &body)
			if r.code != tt.code || body.Error.Code != tt.errCode || body.Error.Field != tt.field || body.Error.Message == "" {
				t.Errorf("%s %s: %d %s; want %d code=%s field=%q", tt.method, tt.path, r.code, r.body, tt.code, tt.errCode, tt.field)
			}
		})
	}
	// An SSE client resuming after the last event it had (its id).
	req, _ := http.NewRequest("GET", e.host+"/v1/results/stream", nil)
	req.Header.Set("Last-Event-ID", "seven")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 400 {
		t.Fatalf("stream with a bad Last-Event-ID: %v %v", res, err)
	} else {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !strings.Contains(string(b), `"field":"Last-Event-ID"`) {
			t.Fatalf("stream with a bad Last-Event-ID: %s", b)
		}
	}
	if r := e.do("GET", "/healthz", nil); r.code != 200 {
		t.Fatalf("host stopped serving: %d", r.code)
	}
	var sub api.SubmitResponse
	r := e.do("POST", "/v1/rollouts", `{"task":{"domain":"math","question":"What is 17 + 25?","answer":"42"}}`)
	if r.code != http.StatusAccepted {
		t.Fatalf("valid request after bad ones: %d %s", r.code, r.body)
	}
	r.json(t, &sub)
	if res := e.wait(t, sub.RolloutIDs[0]); res.Status != trajectory.StatusCompleted {
		t.Fatalf("%s %+v", res.Status, res.Failure)
	}
	// A task the plugin refuses is reported, with its stage and reason, not dropped.
	e.do("POST", "/v1/rollouts", `{"task":{"domain":"math","question":"no answer"}}`).json(t, &sub)
	res := e.wait(t, sub.RolloutIDs[0])
	if res.Status != trajectory.StatusFailed || res.Failure.Stage != "init" || res.Failure.Reason != "invalid_task" || !strings.Contains(res.Failure.Message, "answer") {
		t.Fatalf("refused task: %s %+v", res.Status, res.Failure)
	}
}

func TestSHA256Refused(t *testing.T) {
	e := newEnv(t, envOpts{sha256: strings.Repeat("0", 64)})
	p := start(t, "prorl-host", "serve", "--config", e.cfgPath, "--addr-file", filepath.Join(e.dir, "host.addr"))
	select {
	case err := <-p.done:
		p.done <- err
		if err == nil {
			t.Fatal("host started with a wrong plugin sha256")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("host did not exit")
	}
	good, err := pluginhost.HashFile(e.plugin)
	if err != nil {
		t.Fatal(err)
	}
	msg := p.stderr.String()
	for _, want := range []string{"plugin math", good, strings.Repeat("0", 64), e.plugin} {
		if !strings.Contains(msg, want) {
			t.Errorf("error output lacks %q:\n%s", want, msg)
		}
	}
	if _, err := os.Stat(filepath.Join(e.dir, "host.addr")); err == nil {
		t.Error("host listened despite the refusal")
	}
	_ = fmt.Sprint()
}

// A backend that fails 30% of generations with HTTP 500: each failure is
// retried on the same backend and every rollout completes, token-exact.
func TestBackendFailuresRetried(t *testing.T) {
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1", "--fail-rate", "0.3"}})
	e.startHost()
	e.addBackend()
	var sub api.SubmitResponse
	// 48 single-turn rollouts at a 30% failure rate: the chance that none is
	// injected is 0.7^48, about 4e-8 (with 12 it was 1.4%, and it happened).
	e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}, "n": 48,
		"sampling": map[string]any{"seed": 1}}).json(t, &sub)
	var results []*trajectory.Result
	for _, id := range sub.RolloutIDs {
		res := e.wait(t, id)
		if res.Status != trajectory.StatusCompleted || res.Reward != 1 {
			t.Fatalf("%s: %s %+v", id, res.Status, res.Failure)
		}
		results = append(results, res)
	}
	log := e.simEntries()
	for _, res := range results {
		checkTokens(t, res, log)
	}
	fails := 0
	for _, en := range log {
		if en.Path == "/v1/completions" && en.Status == 500 {
			fails++
		}
	}
	if fails == 0 {
		t.Fatal("the simulator injected no failure: the test proved nothing")
	}
	t.Logf("%d injected 500s, all retried", fails)
}

// A plugin that keeps crashing is marked unhealthy: /v1/domains and /readyz
// say so, and submissions get 503 with a clear message, until its crashes
// age out of the restart window.
func TestCrashLoopingPluginUnhealthy(t *testing.T) {
	e := newEnv(t, envOpts{pluginTOML: "max_restarts = 1\nrestart_window = \"4s\""})
	e.startHost()
	e.addBackend()
	for i := 0; i < 2; i++ {
		pid := e.domain(t).PID
		if pid == 0 {
			t.Fatal("no plugin pid")
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		deadline := time.Now().Add(20 * time.Second)
		for p := e.domain(t).PID; (p == pid || p == 0) && time.Now().Before(deadline); p = e.domain(t).PID {
			time.Sleep(20 * time.Millisecond)
		}
	}
	d := e.domain(t)
	if d.Healthy || d.State != "unhealthy" || d.Restarts != 2 {
		t.Fatalf("after two crashes in the window: %+v", d)
	}
	if r := e.do("GET", "/readyz", nil); r.code != 503 || !strings.Contains(string(r.body), "domain math is unhealthy") {
		t.Fatalf("/readyz: %d %s", r.code, r.body)
	}
	r := e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": "q", "answer": "1"}})
	if r.code != 503 || !strings.Contains(string(r.body), "domain_unavailable") {
		t.Fatalf("submission to an unhealthy domain: %d %s", r.code, r.body)
	}
	// The crashes age out: healthy again, and it serves.
	deadline := time.Now().Add(15 * time.Second)
	for !e.domain(t).Healthy && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if r := e.do("GET", "/readyz", nil); r.code != 200 || !strings.Contains(string(r.body), `"problems":[]`) {
		t.Fatalf("/readyz healthy again: %d %s", r.code, r.body)
	}
	var sub api.SubmitResponse
	r = e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}})
	if r.code != 202 {
		t.Fatalf("after the window: %d %s", r.code, r.body)
	}
	r.json(t, &sub)
	if res := e.wait(t, sub.RolloutIDs[0]); res.Status != trajectory.StatusCompleted {
		t.Fatalf("%s %+v", res.Status, res.Failure)
	}
}

// A backend that fails every generation: after retries the rollout leaves it
// for a healthy one, keeps its tokens, and its turn records both backends.
func TestFailoverToAnotherBackend(t *testing.T) {
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1", "--think-turns", "0"}})
	_, badURL := listening(t, filepath.Join(e.dir, "bad.addr"), "prorl-simllm", "--listen", "127.0.0.1:0", "--answers", e.tasks, "--fail-rate", "1")
	e.startHost()
	var b1, b2 struct{ ID string }
	e.do("POST", "/v1/backends", map[string]any{"url": badURL}).json(t, &b1)
	e.do("POST", "/v1/backends", map[string]any{"url": e.sim}).json(t, &b2)
	var sub api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}, "n": 4}).json(t, &sub)
	moved := 0
	for _, id := range sub.RolloutIDs {
		res := e.wait(t, id)
		if res.Status != trajectory.StatusCompleted || res.Reward != 1 {
			t.Fatalf("%s: %s %+v", id, res.Status, res.Failure)
		}
		checkTokens(t, res, e.simEntries())
		for _, turn := range res.Turns {
			if len(turn.Backends) == 2 && turn.Backends[0] == b1.ID && turn.Backends[1] == b2.ID && turn.Backend == b2.ID {
				moved++
			}
		}
	}
	if moved == 0 {
		t.Fatal("no turn moved from the failing backend to the healthy one")
	}
	t.Logf("%d of 4 rollouts moved from %s to %s", moved, b1.ID, b2.ID)
}

// TestStoreFaultHeals fills the store's file system (a small tmpfs) while
// rollouts finish: the host says it is not ready, refuses submissions with
// 503, keeps every finished result visible, and once space is back writes
// them all without a restart; a restart then finds them on disk.
func TestStoreFaultHeals(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	fs := t.TempDir()
	if err := syscall.Mount("tmpfs", fs, "tmpfs", 0, "size=8m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(fs, syscall.MNT_DETACH) })
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1", "--think-turns", "2", "--token-latency", "20ms"}, staticBackend: true,
		extraTOML: fmt.Sprintf("[store]\npath = %q\n", filepath.Join(fs, "prorl.db"))})
	e.startHost()
	var sub api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}, "n": 24}).json(t, &sub)
	// The disk fills while they run.
	filler := filepath.Join(fs, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	for _, id := range sub.RolloutIDs {
		if res := e.wait(t, id); res.Status != trajectory.StatusCompleted {
			t.Fatalf("%s: %s %+v", id, res.Status, res.Failure)
		}
	}
	if r := e.do("GET", "/readyz", nil); r.code != 503 || !strings.Contains(string(r.body), "store cannot write") {
		t.Fatalf("readyz during the fault: %d %s", r.code, r.body)
	}
	if held := metric(t, e, "prorl_store_held_results"); held != 24 {
		t.Fatalf("%v results held, want 24", held)
	}
	if r := e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": "q", "answer": "1"}}); r.code != 503 || !strings.Contains(string(r.body), "store_unavailable") {
		t.Fatalf("submit during the fault: %d %s", r.code, r.body)
	}
	if r := e.do("POST", "/v1/results/ack", map[string]any{"ids": sub.RolloutIDs[:1]}); r.code != 503 {
		t.Fatalf("ack during the fault: %d %s", r.code, r.body)
	}
	// A new policy version takes effect at once (the trainer's weights are
	// loaded); its record is held and written with the results.
	if r := e.do("PUT", "/v1/policy", map[string]any{"version": 3}); r.code != 200 {
		t.Fatalf("policy version during the fault: %d %s", r.code, r.body)
	}
	// Space again: everything held becomes durable, no restart.
	t0 := time.Now()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for metric(t, e, "prorl_store_held_results") != 0 || e.do("GET", "/readyz", nil).code != 200 {
		if time.Since(t0) > 20*time.Second {
			t.Fatalf("not healed 20 s after the fault ended: %s", e.do("GET", "/readyz", nil).body)
		}
		time.Sleep(5 * time.Millisecond)
	}
	healed := time.Since(t0)
	// Durable: a crash now loses nothing and re-runs nothing.
	e.killHost()
	e.startHost()
	var page struct {
		Results []*trajectory.Result `json:"results"`
	}
	e.do("GET", "/v1/results?since=0&limit=100", nil).json(t, &page)
	found := 0
	for _, r := range page.Results {
		if r.Attempt == 1 && r.Status == trajectory.StatusCompleted {
			found++
		}
	}
	if found != 24 {
		t.Fatalf("after a crash %d of 24 results are on disk as first attempts: %+v", found, page.Results)
	}
	var ps struct{ Version int64 }
	if e.do("GET", "/v1/policy", nil).json(t, &ps); ps.Version != 3 {
		t.Fatalf("after a crash the policy version is %d, want 3 (set during the fault)", ps.Version)
	}
	t.Logf("24 results held during a full disk; durable %v after the fault ended (readiness included)", healed)
}

// TestSampleKinds: every result says what it is to a trainer, as
// docs/trainers.md's table says: a rollout no backend could serve is an
// infrastructure failure (no sample, no reward to learn from), a refused
// task an invalid_task, a cancelled one cancelled, a scored one
// trainable; the JSON carries it and usable() agrees.
func TestSampleKinds(t *testing.T) {
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1", "--token-latency", "20ms", "--think-turns", "3"}})
	e.startHost()
	submitWith := func(task, more string) string {
		t.Helper()
		var sub api.SubmitResponse
		e.do("POST", "/v1/rollouts", `{"task":`+task+more+`}`).json(t, &sub)
		return sub.RolloutIDs[0]
	}
	submit := func(task string) string { t.Helper(); return submitWith(task, "") }
	math := `{"domain":"math","question":"What is 17 + 25?","answer":"42"}`
	// No backend yet: it waits [backends] wait_for_backend (10 s), then
	// fails; not run again, as asked (each retry would wait as long).
	noBackend := submitWith(math, `,"retry_infra":false`)
	if res := e.wait(t, noBackend); res.Failure == nil || res.Failure.Reason != trajectory.ReasonBackendUnavailable || res.Sample != trajectory.SampleInfrastructure || res.Reward != 0 || res.Attempt != 1 {
		t.Fatalf("no backend: %s %+v sample %q reward %v attempt %d", res.Status, res.Failure, res.Sample, res.Reward, res.Attempt)
	}
	e.addBackend()
	cancelled := submit(math)
	e.waitRunning(t, 1)
	if r := e.do("DELETE", "/v1/rollouts/"+cancelled, nil); r.code/100 != 2 {
		t.Fatalf("cancel: %d %s", r.code, r.body)
	}
	cases := map[string]string{
		submit(math): trajectory.SampleTrainable,
		submit(`{"domain":"math","question":"no answer"}`): trajectory.SampleInvalidTask,
		cancelled: trajectory.SampleCancelled,
	}
	for id, want := range cases {
		res := e.wait(t, id)
		if res.Sample != want || res.MaskSample {
			t.Errorf("%s: %s %+v: sample %q mask %v, want %q", id, res.Status, res.Failure, res.Sample, res.MaskSample, want)
		}
		raw := e.do("GET", "/v1/rollouts/"+id, nil)
		if !strings.Contains(string(raw.body), `"sample":"`+want+`"`) {
			t.Errorf("%s: the JSON does not say sample %q: %.300s", id, want, raw.body)
		}
	}
}
