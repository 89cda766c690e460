// Package e2e tests prorl over real processes: the prorl-host binary, the
// math plugin binary and the prorl-simllm simulator, talking real HTTP and gRPC.
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prorl/prorl/core/trajectory"

	"github.com/prorl/prorl/internal/testbin"
)

var binDir string

func TestMain(m *testing.M) {
	dir, cleanup := testbin.ForMain("prorl-e2e", map[string]string{"prorl-host": M + "cmd/prorl-host", "prorl-simllm": M + "cmd/prorl-simllm",
		"plugins/prorl-math": M + "plugins/math", "plugins/prorl-stem": M + "plugins/stem", "plugins/prorl-code": M + "plugins/code",
		"plugins/prorl-swe": M + "plugins/swe", "prorl-sandbox-agent": M + "cmd/prorl-sandbox-agent"})
	binDir = dir
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// M prefixes this repository's import paths.
const M = "github.com/prorl/prorl/"

// proc is a child process killed with its group at test end.
type proc struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan error
}

func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return startCmd(t, name, exec.Command(filepath.Join(binDir, name), args...))
}

// startCmd starts cmd in its own process group, killed with it at test
// end; its stderr is kept and shown if the test failed.
func startCmd(t *testing.T, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &proc{cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = &syncWriter{b: p.stderr}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		// Stopped as an operator would, so a host removes its run
		// directory: SIGTERM, a second one after 3 s (a host then exits at
		// once, still removing it), then SIGKILL for the group, which ends
		// what it left. A test that stopped it put its result back in done.
		stopped := func(d time.Duration) bool {
			select {
			case <-p.done:
				return true
			case <-time.After(d):
				return false
			}
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := stopped(3 * time.Second)
		if !done {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done = stopped(2 * time.Second)
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if !done {
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s stderr (tail):\n%s", name, tail(p.stderr.String(), 3000))
		}
	})
	return p
}

type syncWriter struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// listening starts a server that writes its address to addrFile (its
// --addr-file) and returns it with its URL once it listens.
func listening(t *testing.T, addrFile, name string, args ...string) (*proc, string) {
	t.Helper()
	os.Remove(addrFile)
	p := start(t, name, append(args, "--addr-file", addrFile)...)
	addr := waitFile(t, addrFile, p)
	if strings.HasPrefix(addr, "unix:") {
		return p, addr
	}
	return p, "http://" + addr
}

func waitFile(t *testing.T, path string, p *proc) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("process exited before listening: %v\n%s", err, p.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("timed out waiting for %s", path)
	return ""
}

// env is a simulator plus a host.
type env struct {
	t       *testing.T
	dir     string
	host    string // base URL
	sim     string
	simLog  string
	hostP   *proc
	simP    *proc
	tasks   string
	plugin  string
	cfgPath string
}

type envOpts struct {
	simArgs   []string
	extraTOML string
	sha256    string
	// staticBackend puts the simulator in the config, so a restarted host has it.
	staticBackend bool
	// simSocket has the simulator listen on a Unix socket (as vLLM's --uds).
	simSocket bool
	// staticSuffix is appended to the static backend's url (e.g. /v1).
	staticSuffix string
	// pluginTOML adds keys to the [plugins.math] table; backendsTOML to [backends].
	pluginTOML   string
	backendsTOML string
	// tasks are more JSONL task rows whose answers the simulator knows.
	tasks string
	// serverTOML adds keys to the [server] table; pipelineTOML to [pipeline].
	serverTOML   string
	pipelineTOML string
}

const testTasks = `{"id":"t-add","question":"What is 17 + 25?","answer":"42"}
{"id":"t-frac","question":"Compute 1/2 + 1/3.","answer":"\\frac{5}{6}"}
{"data_source":"deepscaler","prompt":[{"role":"user","content":"How many positive divisors does 36 have?"}],"reward_model":{"ground_truth":"9"}}
`

// runWorkers is the default run pool unless the test's [pipeline] sets one.
func runWorkers(pipelineTOML string) string {
	if strings.Contains(pipelineTOML, "run_workers") {
		return ""
	}
	return "run_workers = 64\n"
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), plugin: filepath.Join(binDir, "plugins/prorl-math")}
	e.tasks = filepath.Join(e.dir, "tasks.jsonl")
	if err := os.WriteFile(e.tasks, []byte(testTasks+o.tasks), 0o644); err != nil {
		t.Fatal(err)
	}
	e.simLog = filepath.Join(e.dir, "sim.jsonl")
	listen := "127.0.0.1:0"
	if o.simSocket {
		listen = "unix://" + filepath.Join(e.dir, "sim.sock")
	}
	args := append([]string{"--listen", listen, "--answers", e.tasks, "--log", e.simLog}, o.simArgs...)
	e.simP, e.sim = listening(t, filepath.Join(e.dir, "sim.addr"), "prorl-simllm", args...)
	e.cfgPath = filepath.Join(e.dir, "host.toml")
	sha := ""
	if o.sha256 != "" {
		sha = fmt.Sprintf("sha256 = %q\n", o.sha256)
	}
	static := ""
	if o.staticBackend {
		static = fmt.Sprintf("[[backends.static]]\nurl = %q\n", e.sim+o.staticSuffix)
	}
	cfg := fmt.Sprintf(`%s[server]
listen = "127.0.0.1:0"
shutdown_timeout = "5s"
%s
[pipeline]
%s%s
[backends]
health_interval = "500ms"
wait_for_backend = "10s"
%s
[log]
level = "debug"
[plugins.math]
enabled = true
path = %q
%sstart_timeout = "20s"
%s
[plugins.math.config]
max_turns = 6
%s`, static, o.serverTOML, runWorkers(o.pipelineTOML), o.pipelineTOML, o.backendsTOML, e.plugin, sha, o.pluginTOML, o.extraTOML)
	if err := os.WriteFile(e.cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

// startHost starts the host on the env's config, with more flags if given.
func (e *env) startHost(flags ...string) {
	e.t.Helper()
	e.hostP, e.host = listening(e.t, filepath.Join(e.dir, "host.addr"), "prorl-host", append([]string{"serve", "--config", e.cfgPath}, flags...)...)
}

// stopHost stops the host as an operator does (SIGTERM) and fails the
// test unless it exits 0.
func (e *env) stopHost() {
	e.t.Helper()
	if err := e.hostP.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		e.t.Fatal(err)
	}
	err := <-e.hostP.done
	e.hostP.done <- err // kept for the cleanup's wait
	if err != nil {
		e.t.Fatalf("host exit: %v", err)
	}
}

// killHost kills the host as a crash would (SIGKILL), for a test that
// starts it again on the same store.
func (e *env) killHost() {
	e.t.Helper()
	if err := e.hostP.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		e.t.Fatal(err)
	}
	<-e.hostP.done
	e.hostP.done <- nil // for the cleanup's wait
}

type resp struct {
	code int
	body []byte
}

func (r resp) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (e *env) do(method, path string, body any) resp {
	e.t.Helper()
	r, err := e.request(method, path, body)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// request is do without the test: safe from any goroutine.
func (e *env) request(method, path string, body any) (resp, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.host+path, rd)
	if err != nil {
		return resp{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return resp{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return resp{res.StatusCode, b}, err
}

func (e *env) addBackend() {
	e.t.Helper()
	e.register(map[string]any{"url": e.sim, "protocol": "vllm"})
}

// register adds a backend (POST /v1/backends) and expects 201.
func (e *env) register(fields map[string]any) {
	e.t.Helper()
	if r := e.do("POST", "/v1/backends", fields); r.code != http.StatusCreated {
		e.t.Fatalf("add backend %v: %d %s", fields, r.code, r.body)
	}
}

// simEntries reads the simulator's request log.
func (e *env) simEntries() []simEntry { return readEntries(e.t, e.simLog) }

// readEntries reads a request log in the simulator's format (the llama.cpp
// server writes the same).
func readEntries(t *testing.T, path string) []simEntry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A line without its newline is still being written (a long one goes
	// out in several writes): it belongs to a request still in flight.
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		b = nil
	}
	var out []simEntry
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var s simEntry
		if err := json.Unmarshal(line, &s); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, s)
	}
	return out
}

type simEntry struct {
	Time     time.Time       `json:"time"`
	Path     string          `json:"path"`
	Request  json.RawMessage `json:"request"`
	Response json.RawMessage `json:"response"`
	Status   int             `json:"status"`
	Decision *struct {
		Question string `json:"question"`
		Correct  bool   `json:"correct"`
		Action   string `json:"action"`
		Scripted bool   `json:"scripted"`
	} `json:"decision"`
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// submitMath submits n single-sample math rollouts in batches of up to 1,000
// and returns their ids.
func (e *env) submitMath(t *testing.T, n int) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for left := n; left > 0; left -= 1000 {
		reqs := make([]any, min(left, 1000))
		for i := range reqs {
			reqs[i] = map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}}
		}
		var batch struct {
			Groups []struct {
				RolloutIDs []string `json:"rollout_ids"`
			} `json:"groups"`
		}
		r := e.do("POST", "/v1/rollouts:batch", map[string]any{"requests": reqs})
		if r.code != 202 {
			t.Fatalf("submit: %d %s", r.code, r.body)
		}
		r.json(t, &batch)
		for _, g := range batch.Groups {
			for _, id := range g.RolloutIDs {
				ids[id] = true
			}
		}
	}
	if len(ids) != n {
		t.Fatalf("submitted %d of %d", len(ids), n)
	}
	return ids
}

// resultPages follows GET /v1/results from a cursor, failing the test on
// a rollout reported twice.
type resultPages struct {
	e     *env
	since uint64
	seen  map[string]*trajectory.Result
}

func (e *env) resultPages() *resultPages {
	return &resultPages{e: e, seen: map[string]*trajectory.Result{}}
}

// next reads one page, waiting up to wait for a result, into seen.
func (p *resultPages) next(t *testing.T, wait string) {
	t.Helper()
	var page struct {
		Results   []*trajectory.Result `json:"results"`
		NextSince uint64               `json:"next_since"`
	}
	p.e.do("GET", fmt.Sprintf("/v1/results?since=%d&wait=%s&limit=10000", p.since, wait), nil).json(t, &page)
	for _, r := range page.Results {
		if p.seen[r.ID] != nil {
			t.Fatalf("rollout %s reported twice", r.ID)
		}
		p.seen[r.ID] = r
	}
	p.since = page.NextSince
}

// crashAt reads results until count() reaches at least from, acknowledges
// them, kills the host (SIGKILL) and starts it again, then reads until all
// total rollouts are reported. The count seen at the kill must be below
// stop (the tally's stop): rollouts finishing in the same moment can raise
// it by more than one between two reads. It returns the count at the kill
// and how many results were reported before it.
func (p *resultPages) crashAt(t *testing.T, what string, count func() int, from, stop, total int) (at, before int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for count() < from {
		if time.Now().After(deadline) {
			t.Fatalf("%d %s before the kill after 3 minutes", count(), what)
		}
		p.next(t, "1s")
	}
	if at = count(); at >= stop {
		t.Fatalf("%d %s at once, want fewer than %d: the kill would land after the stop", at, what, stop)
	}
	before = len(p.seen)
	p.ackSeen(t)
	time.Sleep(200 * time.Millisecond) // a tally is stored just after each result
	p.e.killHost()
	p.e.startHost()
	p.since = 0 // a new run: the acknowledged results are gone, the rest served again
	deadline = time.Now().Add(3 * time.Minute)
	for len(p.seen) < total {
		if time.Now().After(deadline) {
			t.Fatalf("after the restart %d of %d rollouts reported", len(p.seen), total)
		}
		p.next(t, "5s")
	}
	return at, before
}

// ackSeen acknowledges every result seen so far.
func (p *resultPages) ackSeen(t *testing.T) {
	t.Helper()
	ids := make([]string, 0, len(p.seen))
	for id := range p.seen {
		ids = append(ids, id)
	}
	if r := p.e.do("POST", "/v1/results/ack", map[string]any{"ids": ids}); r.code != 200 {
		t.Fatalf("ack: %d %s", r.code, r.body)
	}
}
