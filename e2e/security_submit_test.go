package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The attacks of the security issue, each against a real host on loopback
// (security_*_test.go): what was tried, and what the host must answer.

// hostMemory reads a process's peak and current resident memory (KiB).
func hostMemory(t *testing.T, pid int) (peak, now int64) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmHWM:":
			peak = v
		case "VmRSS:":
			now = v
		}
	}
	return peak, now
}

// mathTask is a math task whose question is size bytes long.
func mathTask(size int) map[string]any {
	return map[string]any{"domain": "math", "question": "What is 1 + 1? " + strings.Repeat("x", size), "answer": "2"}
}

// TestSubmissionAmplification: one request could make the host copy its
// task n times into one store transaction (a 1 MiB task with n = 1024
// grew the store by 1.09 GB and the host to 7.4 GB). A submission is now
// bounded by what it makes the host hold and write, and a group stores its
// task once.
func TestSubmissionAmplification(t *testing.T) {
	data := t.TempDir()
	// Each init in flight marshals its own copy of the task to the
	// plugin, so processing holds up to init_workers copies; one worker
	// keeps that out of what this test bounds, the submission itself.
	e := newEnv(t, envOpts{serverTOML: "data_dir = \"" + data + "\"\n", pipelineTOML: "init_workers = 1\n"})
	e.startHost()
	db := filepath.Join(data, "prorl.db")
	size := func() int64 {
		st, err := os.Stat(db)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	before := size()

	// The attack as filed: refused at submission, naming the limit, and
	// nothing written.
	r := e.do("POST", "/v1/rollouts", map[string]any{"task": mathTask(1 << 20), "n": 1024})
	if r.code != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.body), "server.max_submission_bytes") || !strings.Contains(string(r.body), `"field":"n"`) {
		t.Fatalf("1 MiB task × 1024: %d %.300s", r.code, r.body)
	}
	if grew := size() - before; grew > 1<<20 {
		t.Fatalf("a refused submission grew the store by %d bytes", grew)
	}
	// The same total spread over a batch is refused too.
	batch := []map[string]any{}
	for range 8 {
		batch = append(batch, map[string]any{"task": mathTask(512 << 10), "n": 64})
	}
	if r := e.do("POST", "/v1/rollouts:batch", map[string]any{"requests": batch}); r.code != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.body), `"field":"requests"`) {
		t.Fatalf("batch: %d %.300s", r.code, r.body)
	}

	// A maximal legal submission: the largest task the body limit lets
	// through, as many times as server.max_submission_bytes allows. The
	// store grows by the task once, not n times, and the host's memory by
	// a small multiple of the body.
	const task = 15 << 19 // 7.5 MiB: with the request around it, under the 8 MiB body limit
	n := (128 << 20) / (task + 1<<10 + 64)
	_, rssBefore := hostMemory(t, e.hostP.cmd.Process.Pid)
	before = size()
	body, _ := json.Marshal(map[string]any{"task": mathTask(task), "n": n})
	t0 := time.Now()
	r = e.do("POST", "/v1/rollouts", body)
	took := time.Since(t0)
	if r.code != http.StatusAccepted {
		t.Fatalf("maximal legal submission (n=%d, %d-byte body): %d %.300s", n, len(body), r.code, r.body)
	}
	var sub struct {
		GroupID string `json:"group_id"`
	}
	r.json(t, &sub)
	grew := size() - before
	peak, _ := hostMemory(t, e.hostP.cmd.Process.Pid)
	t.Logf("n=%d of a %d-byte task accepted in %v: store +%d bytes, host peak RSS %d MiB (%d MiB before)", n, task, took.Round(time.Millisecond), grew, peak>>10, rssBefore>>10)
	if grew > 3*task {
		t.Errorf("the store grew by %d bytes for a %d-byte task: stored more than once", grew, task)
	}
	// Stated bound: the host's peak resident memory stays under its
	// resident memory before the submission plus 16 times the body (the
	// body read and decoded, the task written once, its one prompt).
	if bound := rssBefore + 16*int64(len(body))>>10; peak > bound {
		t.Errorf("host peak RSS %d KiB during a maximal legal submission, over the bound %d KiB", peak, bound)
	}
	if r := e.do("POST", "/v1/rollouts:cancel", map[string]any{"group_id": sub.GroupID}); r.code != 200 {
		t.Fatalf("cancel: %d %s", r.code, r.body)
	}
}
