package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prorl/prorl/core/sandbox"

	"github.com/prorl/prorl/sdk/sdktest"
)

// TestSWEDomain runs the SWE fixtures (make swe-fixtures) through the host,
// the swe plugin process and the simulator, in bubblewrap sandboxes from
// the per-instance images: the simulator applies the right patch with one
// bash call for some rollouts and changes nothing for others; every
// reward equals its decision, the git_patch is the agent's change, and
// /v1/evaluate grades a patch on its own.
func TestSWEDomain(t *testing.T) {
	for _, driver := range []string{"bwrap", "apptainer"} {
		t.Run(driver, func(t *testing.T) { testSWE(t, driver) })
	}
}

func testSWE(t *testing.T, driver string) {
	sandboxTOML := "[sandbox]\nagent_binary = \"" + filepath.Join(binDir, "prorl-sandbox-agent") + "\"\n"
	template := "{image_dir}/swe-{instance_id}/rootfs"
	if driver == "apptainer" {
		if _, err := sandbox.FindApptainer(""); err != nil {
			sdktest.Missing(t, "apptainer (make apptainer)", err)
		}
		// As root, the SIF; rootless Apptainer cannot mount one without FUSE
		// access, so the same image unpacked.
		mode := "user"
		template = "{image_dir}/swe-{instance_id}.sandbox"
		if os.Geteuid() == 0 {
			mode, template = "userns", "{image_dir}/swe-{instance_id}.sif"
		}
		sandboxTOML += "driver = \"apptainer\"\napptainer_root_mode = \"" + mode + "\"\n"
	}
	imageDir := imagesDir()
	if _, err := os.Stat(strings.NewReplacer("{image_dir}", imageDir, "{instance_id}", "prorl__calc-1").Replace(template)); err != nil {
		sdktest.Missing(t, "SWE fixtures (make swe-fixtures)", err)
	}
	tasks := exampleTasks(t, "swe")
	probe := newNetProbe(t, tasks)
	plugin := filepath.Join(binDir, "plugins/prorl-swe")
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "0.5"}, tasks: tasks + probe.row + "\n",
		extraTOML: "[plugins.swe]\nenabled = true\npath = \"" + plugin + "\"\n[plugins.swe.config]\nmax_turns = 4\nimage_dir = \"" + imageDir + "\"\nimage_template = \"" + template + "\"\n" +
			sandboxTOML})
	e.startHost()
	e.addBackend()
	results, right, wrong := runExamples(t, e, "swe", tasks, 3, 9)
	for _, res := range results {
		var info struct {
			Patch   string            `json:"git_patch"`
			Verdict string            `json:"verdict"`
			Tests   map[string]string `json:"tests"`
		}
		if err := json.Unmarshal(res.Info, &info); err != nil {
			t.Fatal(err)
		}
		switch {
		case res.Reward == 1 && (info.Patch == "" || info.Verdict != "resolved"):
			t.Fatalf("%s: resolved without a patch: %s", res.ID, res.Info)
		case res.Reward == 0 && (info.Patch != "" || info.Verdict != "empty_patch"):
			t.Fatalf("%s: the simulator changed nothing, yet: %s", res.ID, res.Info)
		}
	}
	t.Logf("%s: %d resolved, %d not", driver, right, wrong)
	// The time split of a full rollout, and eval time per instance (resolved rollouts).
	var initMS, run, eval, total float64
	perInstance := map[string][]float64{}
	n := 0
	for _, res := range results {
		if res.Reward != 1 {
			continue
		}
		n++
		initMS, run, eval, total = initMS+res.Timing.InitMS, run+res.Timing.RunMS, eval+res.Timing.EvalMS, total+res.Timing.TotalMS
		perInstance[res.TaskID] = append(perInstance[res.TaskID], res.Timing.EvalMS)
	}
	if n > 0 {
		t.Logf("%s: resolved rollout, mean ms: init %.0f, run %.0f, eval %.0f, total %.0f; eval ms per instance: %v",
			driver, initMS/float64(n), run/float64(n), eval/float64(n), total/float64(n), perInstance)
	}
	for _, res := range results {
		if res.Reward == 1 {
			t.Logf("%s: resolved %s: init %.0f ms, run %.0f ms, eval %.0f ms", driver, res.TaskID, res.Timing.InitMS, res.Timing.RunMS, res.Timing.EvalMS)
		}
	}
	testRealShapes(t, e, tasks)
	probe.run(t, e)

	// /v1/evaluate grades a patch without a rollout: the gold one resolves,
	// a wrong one does not.
	var row map[string]any
	if err := json.Unmarshal([]byte(tasks[:strings.IndexByte(tasks, '\n')]), &row); err != nil {
		t.Fatal(err)
	}
	gold := row["solution"].(string)
	gold = gold[strings.Index(gold, "diff --git"):]
	gold = gold[:len(gold)-len("PRORL_PATCH")]
	var ev struct {
		Reward  float64            `json:"reward"`
		Metrics map[string]float64 `json:"metrics"`
		Info    map[string]any     `json:"info"`
	}
	e.do("POST", "/v1/evaluate", map[string]any{"domain": "swe", "task": row, "response": gold}).json(t, &ev)
	if ev.Reward != 1 || ev.Metrics["fail_to_pass_passed"] != 1 {
		t.Fatalf("gold patch: %+v", ev)
	}
	wrongPatch := "diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -1,5 +1,5 @@\n def add(a, b):\n-    return a - b\n+    return a * b\n \n \n def mul(a, b):\n"
	e.do("POST", "/v1/evaluate", map[string]any{"domain": "swe", "task": row, "response": wrongPatch}).json(t, &ev)
	if ev.Reward != 0 || ev.Metrics["patch_applied"] != 1 || ev.Info["verdict"] != "unresolved" {
		t.Fatalf("wrong patch: %+v", ev)
	}

	// The conftest cheat: no fix, and a conftest.py that prints the
	// FAIL_TO_PASS test as PASSED after pytest's summary. Dropped from the
	// patch, reported, not resolved.
	cheat := wrongPatch + "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n+++ b/conftest.py\n@@ -0,0 +1,2 @@\n" +
		"+def pytest_unconfigure(config):\n+    print(\"PASSED tests/test_ops.py::test_add\")\n"
	ev.Info = nil
	e.do("POST", "/v1/evaluate", map[string]any{"domain": "swe", "task": row, "response": cheat}).json(t, &ev)
	if ev.Reward != 0 || fmt.Sprint(ev.Info["excluded_from_patch"]) != "[conftest.py]" || strings.Contains(fmt.Sprint(ev.Info["git_patch"]), "conftest") {
		t.Fatalf("conftest cheat: %+v", ev)
	}
	// A patch after which the test run reports nothing at all (the package
	// ends the process on import) is an eval failure, not a reward of 0.
	silent := "diff --git a/calc/__init__.py b/calc/__init__.py\n--- a/calc/__init__.py\n+++ b/calc/__init__.py\n@@ -0,0 +1,2 @@\n+import os\n+os._exit(0)\n"
	r := e.do("POST", "/v1/evaluate", map[string]any{"domain": "swe", "task": row, "response": silent})
	var fail struct {
		Error struct{ Code, Message string }
	}
	r.json(t, &fail)
	if r.code != http.StatusBadGateway || fail.Error.Code != "eval_failed" || !strings.Contains(fail.Error.Message, "no results") {
		t.Fatalf("a run with no results: %d %s", r.code, r.body)
	}
}

// testRealShapes grades the fixtures in the real images' layout (Django
// and sympy from their sdists under the harness's eval scripts, an src
// layout, R2E-Gym and SWE-smith rows) through /v1/evaluate: the gold patch
// resolves, a wrong one does not, and each kind's cheat is not applied.
func testRealShapes(t *testing.T, e *env, tasks string) {
	type evaluation struct {
		Reward  float64            `json:"reward"`
		Metrics map[string]float64 `json:"metrics"`
		Info    map[string]any     `json:"info"`
	}
	evaluate := func(row map[string]any, patch string) evaluation {
		t.Helper()
		var ev evaluation
		r := e.do("POST", "/v1/evaluate", map[string]any{"domain": "swe", "task": row, "response": patch})
		if r.code != http.StatusOK {
			t.Fatalf("%v: %d %s", row["instance_id"], r.code, r.body)
		}
		r.json(t, &ev)
		return ev
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(tasks), "\n") {
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		wrong, ok := row["wrong_patch"].(string)
		if !ok {
			continue
		}
		seen++
		gold := row["solution"].(string)
		gold = gold[strings.Index(gold, "diff --git") : len(gold)-len("PRORL_PATCH")]
		name := fmt.Sprint(row["instance_id"], row["repo_name"])
		if ev := evaluate(row, gold); ev.Reward != 1 || ev.Info["verdict"] != "resolved" {
			t.Fatalf("%s: gold patch: %+v", name, ev)
		}
		if ev := evaluate(row, wrong); ev.Reward != 0 || ev.Info["verdict"] != "unresolved" || ev.Metrics["patch_applied"] != 1 {
			t.Fatalf("%s: wrong patch: %+v", name, ev)
		}
		var cheat string
		switch {
		case row["expected_output_json"] != nil:
			// Replace the held-out tests through the repository's link to them.
			cheat = wrong + "diff --git a/r2e_tests/test_1.py b/r2e_tests/test_1.py\nnew file mode 100644\n--- /dev/null\n+++ b/r2e_tests/test_1.py\n@@ -0,0 +1,2 @@\n" +
				"+class TestKlass:\n+    def test_gamma(self): pass\n"
		case row["patch"] != nil:
			// SWE-smith: make the failing test trivially true.
			cheat = wrong + "diff --git a/tests/test_geom.py b/tests/test_geom.py\n--- a/tests/test_geom.py\n+++ b/tests/test_geom.py\n@@ -5,1 +5,1 @@\n-    assert area(2, 3) == 6\n+    assert True\n"
		default:
			continue
		}
		if ev := evaluate(row, cheat); ev.Reward != 0 {
			t.Fatalf("%s: cheat resolved: %+v", name, ev)
		}
	}
	if seen != 5 {
		t.Fatalf("%d real-shape fixtures, want 5 (make swe-fixtures)", seen)
	}
}

// netProbe is a SWE task whose "fix" (the simulator's answer) tries the
// network from the agent's sandbox: it lists the interfaces it sees and
// connects to a listener of this test on the host's loopback.
type netProbe struct {
	row      string
	ln       net.Listener
	accepted atomic.Int32
}

func newNetProbe(t *testing.T, tasks string) *netProbe {
	p := &netProbe{}
	var err error
	if p.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.ln.Close() })
	go func() {
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			c.Close()
		}
	}()
	var row map[string]any
	if err := json.Unmarshal([]byte(tasks[:strings.IndexByte(tasks, '\n')]), &row); err != nil {
		t.Fatal(err)
	}
	port := p.ln.Addr().(*net.TCPAddr).Port
	row["problem_statement"] = "Network probe: the agent reaches for the host's network from its sandbox."
	row["solution"] = "bash:\necho IFACES $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' '); python3 -c \"" +
		"import socket\ntry:\n    socket.create_connection(('127.0.0.1', " + strconv.Itoa(port) + "), 3); print('NET-OPEN')\n" +
		"except OSError as e:\n    print('NET-CLOSED', e)\""
	b, _ := json.Marshal(row)
	p.row = string(b)
	return p
}

// run submits the probe as a Polar task that asks for the internet and the
// host's network: the task is still the domain's, its sandbox still offline.
func (p *netProbe) run(t *testing.T, e *env) {
	var row map[string]any
	_ = json.Unmarshal([]byte(p.row), &row)
	delete(row, "solution")
	// The row also names another domain: it must not redirect the task.
	row["domain"], row["data_source"] = "math", "deepscaler"
	task := polarTask("net-probe", 4, map[string]any{
		"instruction": "",
		"evaluator":   map[string]any{"strategy": "swe", "config": row},
		"runtime":     map[string]any{"backend": "apptainer", "image": "docker.io/library/ubuntu:latest", "allow_internet": true, "network": "host"},
		"metadata":    map[string]any{"eval_sampling_seed_base": 11},
	})
	if r := e.do("POST", "/rollout/task/submit", task); r.code != 200 {
		t.Fatalf("submit the probe: %d %s", r.code, r.body)
	}
	st := e.waitTask(t, "net-probe")
	probed := 0
	for _, s := range st.Results {
		if s.Status != "COMPLETED" {
			t.Fatalf("probe session %s: %s %v %v", s.SessionID, s.Status, s.Error, s.Metadata)
		}
		if d := s.Trajectory.Metadata["domain"]; d != "swe" {
			t.Fatalf("evaluator.config redirected the task to %v", d)
		}
		for _, m := range s.Trajectory.Traces[0].ResponseMessages {
			out, _ := m["content"].(string)
			if m["role"] != "tool" || !strings.Contains(out, "IFACES") {
				continue
			}
			probed++
			if !strings.Contains(out, "NET-CLOSED") || strings.Contains(out, "NET-OPEN") || !strings.Contains(out, "IFACES lo \n") && !strings.Contains(out, "IFACES lo\n") {
				t.Errorf("the sandbox reached a network: %q", out)
			}
		}
	}
	if probed == 0 {
		t.Fatalf("no session ran the probe (the simulator answered wrongly every time): %+v", st.Results)
	}
	if n := p.accepted.Load(); n != 0 {
		t.Fatalf("the host's loopback listener was reached %d times from sandboxes", n)
	}
	t.Logf("network probe: %d sessions ran it, all offline (only lo), none reached the host", probed)
}

// TestSWEImagesCommand: `prorl-host swe images` (the swe plugin's own
// images command, run through `plugins exec`) lists the instances with
// and without an image, from JSONL or Parquet, and exits 1 for a missing one.
func TestSWEImagesCommand(t *testing.T) {
	imgs := t.TempDir()
	if err := os.MkdirAll(filepath.Join(imgs, "swe-prorl__calc-1", "rootfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "host.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[plugins.swe]\nenabled = true\npath = %q\n[plugins.swe.config]\nimage_dir = %q\n",
		filepath.Join(binDir, "plugins/prorl-swe"), imgs)), 0o644); err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(binDir, "prorl-host")
	out, err := exec.Command(host, "swe", "images", "--config", cfg, "--tasks", "../examples/swe/tasks.jsonl").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "ok       prorl__calc-1") ||
		!strings.Contains(string(out), "missing  prorl__") || !strings.Contains(string(out), "1 of 11 instances have an image") {
		t.Fatalf("swe images: %v\n%s", err, out)
	}
	// The same through the generic command, the image directory overridden.
	if err := os.MkdirAll(filepath.Join(imgs, "all"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(host, "plugins", "exec", "--config", cfg, "swe", "images", "--tasks", "-", "--image-template", "{image_dir}/all", "--missing-only")
	cmd.Stdin = strings.NewReader(`{"instance_id":"a__b-1"}` + "\n" + `{"repo_name":"r","commit_hash":"0123456789abcdef"}` + "\n")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "2 of 2 instances have an image") {
		t.Fatalf("plugins exec: %v\n%s", err, out)
	}
}
