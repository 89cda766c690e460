package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/dirlock"
	"github.com/prorl/prorl/core/rundir"
	"github.com/prorl/prorl/core/trajectory"
)

func gone(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		// A zombie still answers kill(0); /proc tells exited from running.
		if err := syscall.Kill(pid, 0); err != nil || isZombie(pid) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// No plugin outlives its host, even when the host gets no chance to stop it;
// and what such a host leaves in the temporary directory (its directory of
// sockets: the plugins', the gateway's) the next host removes.
func TestHostSIGKILLTakesPluginsAlong(t *testing.T) {
	tmp := hostTMPDIR(t)
	e := newEnv(t, envOpts{})
	e.startHost()
	pid := e.domain(t).PID
	if pid == 0 {
		t.Fatal("no plugin pid")
	}
	killed := hostDirs(t, tmp)
	if len(killed) != 1 {
		t.Fatalf("host directories %v, want one", killed)
	}
	if sockets, _ := filepath.Glob(filepath.Join(killed[0], "plugin*")); len(sockets) != 1 {
		t.Fatalf("plugin sockets in %s: %v, want the math plugin's", killed[0], sockets)
	}
	if err := e.hostP.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.hostP.done <- <-e.hostP.done // waited for; kept for the cleanup's wait
	if !gone(pid, 10*time.Second) {
		t.Fatalf("plugin %d survived its SIGKILLed host", pid)
	}
	if _, err := os.Stat(killed[0]); err != nil {
		t.Fatalf("the killed host's directory: %v (the test shows nothing)", err)
	}
	e.startHost()
	if now := hostDirs(t, tmp); len(now) != 1 || now[0] == killed[0] {
		t.Fatalf("host directories %v after a restart, want one other than the killed host's %s", now, killed[0])
	}
	e.stopHost()
	entries, _ := os.ReadDir(tmp)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "Test") { // the test's own t.TempDir
			t.Errorf("left in TMPDIR by a host that stopped: %s", e.Name())
		}
	}
}

// A second SIGTERM exits at once, mid-shutdown; the host's directory of
// sockets goes with it all the same.
func TestSecondSignalLeavesNothing(t *testing.T) {
	tmp := hostTMPDIR(t)
	e := newEnv(t, envOpts{staticBackend: true, simArgs: []string{"--correct-rate", "1", "--token-latency", "50ms"}})
	e.startHost()
	if len(hostDirs(t, tmp)) != 1 {
		t.Fatalf("host directories %v, want one", hostDirs(t, tmp))
	}
	// Rollouts that take seconds: the first signal's shutdown waits for them.
	e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}, "n": 4})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var live struct{ Rollouts []any }
		e.do("GET", "/v1/rollouts?stage=run", nil).json(t, &live)
		if len(live.Rollouts) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no rollout generating after 30 s")
		}
	}
	for range 2 {
		if err := e.hostP.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	select {
	case err := <-e.hostP.done:
		e.hostP.done <- err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Fatalf("host exit %v, want status 130 (the second signal's, mid-shutdown)", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("host did not exit after two SIGTERMs")
	}
	if left := hostDirs(t, tmp); len(left) != 0 {
		t.Fatalf("left by a host that exited on a second signal: %v", left)
	}
}

// A TMPDIR too long for sockets under it (a batch job's scratch directory
// can be) does not stop a host: its directory of sockets goes to /tmp, and
// goes when the host stops. Before, the plugins' broker could not bind and
// the host did not start.
func TestLongTMPDIR(t *testing.T) {
	long := filepath.Join(hostTMPDIR(t), strings.Repeat("d", 100))
	if err := os.Mkdir(long, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", long)
	e := newEnv(t, envOpts{staticBackend: true, simArgs: []string{"--correct-rate", "1"}})
	e.startHost()
	// The host's directory is the one whose lock it holds (its sandbox
	// manager holds another, in the work root).
	var dir string
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", e.hostP.cmd.Process.Pid))
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", e.hostP.cmd.Process.Pid, fd.Name()))
		if err == nil && filepath.Base(l) == dirlock.Name && strings.HasPrefix(filepath.Base(filepath.Dir(l)), rundir.Prefix) {
			dir = filepath.Dir(l)
		}
	}
	if filepath.Dir(dir) != "/tmp" || !strings.HasPrefix(filepath.Base(dir), rundir.Prefix) {
		t.Fatalf("host directory %q, want one in /tmp", dir)
	}
	var sub api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}}).json(t, &sub)
	if res := e.wait(t, sub.RolloutIDs[0]); res.Status != trajectory.StatusCompleted || res.Reward != 1 {
		t.Fatalf("%s reward %v %+v", res.Status, res.Reward, res.Failure)
	}
	e.stopHost()
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s after the host stopped: %v", dir, err)
	}
}

// hostTMPDIR is a new temporary directory the hosts a test starts inherit
// as TMPDIR: short, for sockets under it (t.TempDir's path carries the
// test's name).
func hostTMPDIR(t *testing.T) string {
	t.Helper()
	tmp, err := os.MkdirTemp("/tmp", "k")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	t.Setenv("TMPDIR", tmp)
	return tmp
}

// hostDirs lists the hosts' socket directories in dir.
func hostDirs(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, rundir.Prefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// SIGTERM: stop taking work, let live rollouts finish, persist them, stop the
// plugins, exit 0. A restarted host serves every result: nothing is lost and
// nothing had to be re-run.
func TestGracefulShutdown(t *testing.T) {
	e := newEnv(t, envOpts{staticBackend: true, simArgs: []string{"--correct-rate", "1", "--token-latency", "5ms"}})
	e.startHost()
	pid := e.domain(t).PID
	var sub api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}, "n": 32}).json(t, &sub)
	// A trainer's results stream, open across the shutdown: it gets every
	// result the shutdown lets finish, then a clean end (a complete body).
	streamed := make(chan error, 1)
	var events int
	{
		req, _ := http.NewRequest("GET", e.host+"/v1/results/stream", nil)
		req.Header.Set("Accept", "text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		br := bufio.NewReader(res.Body)
		if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "retry:") {
			t.Fatalf("stream began %q %v", line, err)
		}
		go func() {
			for {
				line, err := br.ReadString('\n')
				if line == "event: result\n" {
					events++
				}
				if err != nil {
					if err == io.EOF {
						err = nil
					}
					streamed <- err
					return
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond) // the rollouts are generating
	if err := e.hostP.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-e.hostP.done:
		e.hostP.done <- err
		if err != nil {
			t.Fatalf("host exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("host did not exit after SIGTERM")
	}
	if err := <-streamed; err != nil || events != len(sub.RolloutIDs) {
		t.Fatalf("the results stream across the shutdown: %d results of %d, then %v (want a clean end)", events, len(sub.RolloutIDs), err)
	}
	if !gone(pid, 5*time.Second) {
		t.Fatalf("plugin %d still running after the host stopped", pid)
	}
	e.startHost()
	for _, id := range sub.RolloutIDs {
		res := e.wait(t, id)
		if res.Status != trajectory.StatusCompleted || res.Attempt != 1 {
			t.Errorf("%s: %s attempt %d %+v: live work was lost or redone in shutdown", id, res.Status, res.Attempt, res.Failure)
		}
	}
	// What the first run learned of the task's lengths came back with the
	// host (saved at shutdown beside the store): the same task is expected
	// to generate what it did.
	var again api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}}).json(t, &again)
	var list struct {
		Rollouts []struct {
			ID            string `json:"id"`
			LearnedTokens int    `json:"learned_tokens"`
		} `json:"rollouts"`
	}
	e.do("GET", "/v1/rollouts", nil).json(t, &list)
	found := false
	for _, r := range list.Rollouts {
		if r.ID == again.RolloutIDs[0] {
			found = true
			if r.LearnedTokens <= 0 {
				t.Errorf("after a restart the task's learned_tokens is %d", r.LearnedTokens)
			}
		}
	}
	if !found {
		t.Errorf("rollout %s not listed while it runs (5 ms a token)", again.RolloutIDs[0])
	}
	metrics := string(e.do("GET", "/metrics", nil).body)
	for _, want := range []string{`prorl_expected_tokens_total{source="learned"} 1`, `prorl_expected_tokens_memory_tasks 1`} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
	e.wait(t, again.RolloutIDs[0])
}

// A math rollout whose model calls python: the host starts a bubblewrap
// sandbox on that first call, the program runs in it, and the sandbox is
// gone after the rollout.
func TestMathPythonInSandbox(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap not installed (make test installs it)")
	}
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1", "--python-turns", "1", "--think-turns", "0"}})
	e.startHost()
	e.addBackend()
	var sub api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}}).json(t, &sub)
	res := e.wait(t, sub.RolloutIDs[0])
	if res.Status != trajectory.StatusCompleted || res.Reward != 1 {
		t.Fatalf("%s %+v reward %v", res.Status, res.Failure, res.Reward)
	}
	var obs string
	for _, m := range res.Messages {
		if m.Role == "tool" && m.Name == "python" {
			obs = m.Content
		}
	}
	if obs != "42\n[Command finished with exit code 0]" {
		t.Fatalf("python observation %q", obs)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.do("GET", "/metrics", nil)
		if strings.Contains(string(r.body), "prorl_sandboxes_alive 0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandbox outlived its rollout")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An idempotency key lives [server] idempotency_ttl: within it a retry gets
// the first submission back; after it the key is free and a submission
// under it is a new group (the host's sweep, not the request, expires it).
func TestIdempotencyKeyExpires(t *testing.T) {
	e := newEnv(t, envOpts{staticBackend: true, simArgs: []string{"--correct-rate", "1"}, serverTOML: "idempotency_ttl = \"2s\"\n"})
	e.startHost()
	// A Polar task's record expires too: submitted first, so the sweep
	// that frees the v1 key below has passed it as well.
	if r := e.do("POST", "/rollout/task/submit", polarTask("t-old", 1, nil)); r.code != http.StatusOK {
		t.Fatalf("Polar submit: %d %s", r.code, r.body)
	}
	if st := e.waitTask(t, "t-old"); st.Status != "completed" {
		t.Fatalf("Polar task: %+v", st)
	}
	body := map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}, "idempotency_key": "step-1"}
	var first, again api.SubmitResponse
	if r := e.do("POST", "/v1/rollouts", body); r.code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", r.code, r.body)
	} else {
		r.json(t, &first)
	}
	if r := e.do("POST", "/v1/rollouts", body); r.code != http.StatusOK {
		t.Fatalf("a retry within the key's life: %d %s", r.code, r.body)
	} else if r.json(t, &again); again.GroupID != first.GroupID {
		t.Fatalf("a retry within the key's life got group %s, want %s", again.GroupID, first.GroupID)
	}
	// Swept every second once 2 s old: gone within 4 s; 20 s is slack for a loaded machine.
	deadline := time.Now().Add(20 * time.Second)
	for {
		time.Sleep(500 * time.Millisecond)
		r := e.do("POST", "/v1/rollouts", body)
		if r.code == http.StatusAccepted {
			r.json(t, &again)
			if again.GroupID == first.GroupID {
				t.Fatalf("a new submission under the expired key reused group %s", first.GroupID)
			}
			break
		}
		if r.code != http.StatusOK || time.Now().After(deadline) {
			t.Fatalf("the key never expired: %d %s", r.code, r.body)
		}
	}
	// The host had the task in memory; a restarted one reads the store,
	// where its record is gone (TestPolarTaskAPI finds one within its life).
	e.stopHost()
	e.startHost()
	if r := e.do("GET", "/rollout/task/t-old", nil); r.code != http.StatusNotFound {
		t.Fatalf("an expired Polar task after a restart: %d %s, want 404", r.code, r.body)
	}
}
