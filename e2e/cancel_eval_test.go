package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/sandbox"
	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/harnessplay"
	"github.com/prorl/prorl/sdk/sdktest"
)

// TestCancelStopsEvaluation: cancelling a rollout whose evaluation runs a
// test that would take 45 s ends the rollout and leaves no process of that
// test running within a second, measured, on bwrap and on Apptainer.
func TestCancelStopsEvaluation(t *testing.T) {
	for _, driver := range []string{"bwrap", "apptainer"} {
		t.Run(driver, func(t *testing.T) { testCancelStopsEvaluation(t, driver) })
	}
}

func testCancelStopsEvaluation(t *testing.T, driver string) {
	imageDir := imagesDir()
	sandboxTOML := "[sandbox]\nimage_dir = \"" + imageDir + "\"\nagent_binary = \"" + filepath.Join(binDir, "prorl-sandbox-agent") + "\"\n"
	image := filepath.Join(imageDir, "default", "rootfs")
	if driver == "apptainer" {
		if _, err := sandbox.FindApptainer(""); err != nil {
			sdktest.Missing(t, "apptainer (make apptainer)", err)
		}
		mode := "user"
		image = filepath.Join(imageDir, "default.sandbox")
		if os.Geteuid() == 0 {
			mode, image = "userns", filepath.Join(imageDir, "default.sif")
		}
		sandboxTOML += "driver = \"apptainer\"\napptainer_root_mode = \"" + mode + "\"\n"
	}
	if _, err := os.Stat(image); err != nil {
		sdktest.Missing(t, "the default sandbox image (make image)", err)
	}
	// A marker no other process has: the test's own sleep, by its length.
	marker := fmt.Sprintf("45.%d", os.Getpid()%1000+100)
	solution := "import subprocess\nsubprocess.run(['sleep', '" + marker + "'])\nprint(4)"
	row := map[string]any{"id": "slow-" + driver, "question": "Print 4 (" + driver + ").", "time_limit": 50,
		"tests": []map[string]string{{"input": "", "output": "4\n"}}, "solution": solution}
	rowJSON, err := json.Marshal(row)
	if err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(binDir, "plugins/prorl-code")
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1"}, tasks: string(rowJSON) + "\n",
		extraTOML: "[plugins.code]\nenabled = true\npath = \"" + plugin + "\"\n[plugins.code.config]\nimage = \"default\"\n" + sandboxTOML})
	e.startHost()
	e.addBackend()
	task := map[string]any{"domain": "code"}
	for k, v := range row {
		if k != "solution" {
			task[k] = v
		}
	}
	var sub api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": task}).json(t, &sub)
	id := sub.RolloutIDs[0]
	// The evaluation is running once the test's sleep is.
	ended, gone := cancelWhileRunning(t, e, id, func() bool { return len(processesWith("sleep", marker)) > 0 })
	t.Logf("%s: cancel -> rollout ended in %v, the evaluation's test process gone in %v", driver, ended.Round(time.Millisecond), gone.Round(time.Millisecond))
	if ended > time.Second || gone > time.Second {
		t.Errorf("%s: cancel took %v to end the rollout and %v to stop its evaluation, want <= 1 s each", driver, ended, gone)
	}
}

// cancelWhileRunning waits (3 minutes at most) until running reports what
// rollout id started is up, cancels the rollout, and measures until its
// result is final and says cancelled (ended) and running reports nothing
// left (gone).
func cancelWhileRunning(t *testing.T, e *env, id string, running func() bool) (ended, gone time.Duration) {
	t.Helper()
	return cancelWith(t, e, id, running, func() {
		if r := e.do("DELETE", "/v1/rollouts/"+id, nil); r.code/100 != 2 {
			t.Fatalf("cancel: %d %s", r.code, r.body)
		}
	})
}

// cancelWith is cancelWhileRunning with the cancel the caller makes.
func cancelWith(t *testing.T, e *env, id string, running func() bool, cancel func()) (ended, gone time.Duration) {
	t.Helper()
	result := func() trajectory.Result {
		var res trajectory.Result
		e.do("GET", "/v1/rollouts/"+id, nil).json(t, &res)
		return res
	}
	for deadline := time.Now().Add(3 * time.Minute); !running(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			res := result()
			t.Fatalf("what the rollout starts never ran: %s %+v %v", res.Status, res.Failure, res.Metrics)
		}
	}
	t0 := time.Now()
	cancel()
	for ended == 0 || gone == 0 {
		if ended == 0 {
			if res := result(); res.Status.Finished() {
				ended = time.Since(t0)
				if res.Status != trajectory.StatusCancelled || res.Sample != trajectory.SampleCancelled {
					t.Errorf("cancelled: %s %+v sample %q", res.Status, res.Failure, res.Sample)
				}
			}
		}
		if gone == 0 && !running() {
			gone = time.Since(t0)
		}
		if time.Since(t0) > 30*time.Second {
			t.Fatalf("30 s after the cancel: rollout ended %v, what it started gone %v", ended, gone)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return ended, gone
}

// processesWith lists the pids whose command line is exactly these words.
func processesWith(words ...string) []string {
	want := []byte(strings.Join(words, "\x00") + "\x00")
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, en := range ents {
		if b, err := os.ReadFile(filepath.Join("/proc", en.Name(), "cmdline")); err == nil && bytes.Equal(b, want) {
			out = append(out, en.Name())
		}
	}
	return out
}

// TestCancelAbortsGeneration: cancelling a rollout while its backend is
// generating ends the generation on the backend (the simulator's engine
// runs nothing more) within a second, measured.
func TestCancelAbortsGeneration(t *testing.T) {
	// An engine twenty times slower than the calibrated GPU: a turn
	// generates for seconds, a step takes about 0.1-0.2 s (the engine drops a
	// cancelled request at its next step boundary, as vLLM does).
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1", "--engine", "--engine-speed", "0.05"}})
	e.startHost()
	e.addBackend()
	engine := func() (running int, generated int64) {
		var st struct {
			Running   int   `json:"running"`
			Generated int64 `json:"generated_tokens"`
		}
		r, err := httpGetJSON(e.sim+"/sim/stats", &st)
		if err != nil || r != 200 {
			t.Fatalf("sim stats: %d %v", r, err)
		}
		return st.Running, st.Generated
	}
	var sub api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}}).json(t, &sub)
	_, stopped := cancelWhileRunning(t, e, sub.RolloutIDs[0], func() bool { n, _ := engine(); return n > 0 })
	_, before := engine()
	time.Sleep(300 * time.Millisecond)
	if _, after := engine(); after != before {
		t.Errorf("the engine generated %d more tokens after the cancel", after-before)
	}
	t.Logf("cancel -> the backend's generation ended in %v", stopped.Round(time.Millisecond))
	if stopped > time.Second {
		t.Errorf("the generation ran %v after the cancel, want <= 1 s", stopped)
	}
}

// httpGetJSON GETs url and decodes its JSON answer into v.
func httpGetJSON(url string, v any) (int, error) {
	res, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	return res.StatusCode, json.NewDecoder(res.Body).Decode(v)
}

// TestCancelStopsHarness: cancelling a harness rollout while the harness
// (mini-swe-agent, unmodified) runs a command that would take 45 s ends
// the rollout and leaves neither the command nor the harness running,
// within a second, measured.
func TestCancelStopsHarness(t *testing.T) {
	h := harnessplay.Harnesses[0] // mini-swe-agent: it runs commands through its bash tool
	if _, err := os.Stat(filepath.Join(harnessDir(h.Name), ".prorl-installed")); err != nil {
		sdktest.Missing(t, "harness "+h.Name+" (make harnesses)", err)
	}
	marker := fmt.Sprintf("45.%d", os.Getpid()%1000+200)
	question := "How long is " + marker + "?"
	script := h.Script(question, []string{"sleep " + marker}, []string{"sleep " + marker})
	scriptFile := filepath.Join(t.TempDir(), "scripts.jsonl")
	if err := os.WriteFile(scriptFile, []byte(script+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	imageDir := imagesDir()
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1", "--max-model-len", "1000000", "--scripts", scriptFile},
		extraTOML: "[sandbox]\nimage_dir = \"" + imageDir + "\"\nagent_binary = \"" + filepath.Join(binDir, "prorl-sandbox-agent") + "\"\n"})
	e.startHost()
	e.addBackend()
	var sub api.SubmitResponse
	r := e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": question, "answer": "45"},
		"sampling": map[string]any{"max_total_tokens": 1000000},
		"harness":  map[string]any{"name": h.Name, "instruction": h.Instruction(question), "image": "default"}})
	if r.code != 202 {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	r.json(t, &sub)
	id := sub.RolloutIDs[0]
	var harness []string
	ended, gone := cancelWhileRunning(t, e, id, func() bool {
		if len(processesWith("sleep", marker)) > 0 {
			if harness == nil {
				// Its processes, taken once its command runs.
				if harness = processesMatching("minisweagent.run.mini"); len(harness) == 0 {
					t.Fatal("no harness process found while its command runs")
				}
			}
			return true
		}
		return harness != nil && len(alivePids(harness)) > 0
	})
	t.Logf("%s: cancel -> rollout ended in %v, its command and the harness (%d processes) gone in %v", h.Name,
		ended.Round(time.Millisecond), len(harness), gone.Round(time.Millisecond))
	if ended > time.Second || gone > time.Second {
		t.Errorf("cancel took %v to end the rollout and %v to stop the harness, want <= 1 s each", ended, gone)
	}
}

// processesMatching lists the pids whose command line contains s.
func processesMatching(s string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, en := range ents {
		if b, err := os.ReadFile(filepath.Join("/proc", en.Name(), "cmdline")); err == nil && bytes.Contains(b, []byte(s)) {
			out = append(out, en.Name())
		}
	}
	return out
}

// alivePids are those of pids still running (not gone, not zombies).
func alivePids(pids []string) []string {
	var out []string
	for _, p := range pids {
		if b, err := os.ReadFile(filepath.Join("/proc", p, "stat")); err == nil {
			if i := bytes.LastIndexByte(b, ')'); i > 0 && len(b) > i+2 && b[i+2] != 'Z' {
				out = append(out, p)
			}
		}
	}
	return out
}

// TestCancelStopsToolCommand: cancelling a rollout of the host's own loop
// while its python tool runs a program that would take 45 s ends the
// rollout and the program within a second, measured.
func TestCancelStopsToolCommand(t *testing.T) {
	e, task, marker := sleepingTool(t, 45)
	var sub api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": task}).json(t, &sub)
	id := sub.RolloutIDs[0]
	ended, gone := cancelWhileRunning(t, e, id, func() bool { return len(processesWith("sleep", marker)) > 0 })
	t.Logf("cancel -> rollout ended in %v, the tool's program gone in %v", ended.Round(time.Millisecond), gone.Round(time.Millisecond))
	if ended > time.Second || gone > time.Second {
		t.Errorf("cancel took %v to end the rollout and %v to stop its tool's program, want <= 1 s each", ended, gone)
	}
}

// sleepingTool is a host whose simulator answers its math task by running
// a program in the python tool (a sleep of about whole seconds, its
// argument the marker that finds its process) before the answer.
func sleepingTool(t *testing.T, whole int) (e *env, task map[string]any, marker string) {
	t.Helper()
	marker = fmt.Sprintf("%d.%d", whole, os.Getpid()%1000+300)
	question := "What is " + marker + " rounded down?"
	script, err := json.Marshal(map[string]any{"key": question, "final": fmt.Sprintf("The answer is \\boxed{%d}.", whole),
		"calls": []map[string]any{{"tool": "python", "arguments": map[string]any{"code": "import subprocess\nsubprocess.run(['sleep', '" + marker + "'])", "timeout": 60}}}})
	if err != nil {
		t.Fatal(err)
	}
	scriptFile := filepath.Join(t.TempDir(), "scripts.jsonl")
	if err := os.WriteFile(scriptFile, append(script, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	e = newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1", "--scripts", scriptFile},
		extraTOML: "[sandbox]\nagent_binary = \"" + filepath.Join(binDir, "prorl-sandbox-agent") + "\"\n"})
	e.startHost()
	e.addBackend()
	return e, map[string]any{"domain": "math", "question": question, "answer": fmt.Sprint(whole)}, marker
}

// TestCancelScopes: a tool's program is stopped within a second whatever
// the cancel names: the rollout's group, the rollouts of policies before
// a version, or everything; its process and its sandbox's cgroup are
// empty after (CPU it used drops with them).
func TestCancelScopes(t *testing.T) {
	for _, scope := range []string{"group", "batch", "before policy", "all"} {
		t.Run(scope, func(t *testing.T) { testCancelScope(t, scope) })
	}
}

func testCancelScope(t *testing.T, scope string) {
	e, task, marker := sleepingTool(t, 46)
	var sub api.SubmitResponse
	var body map[string]any
	if scope == "batch" {
		// A dynamic-sampling batch of one group of two.
		var b struct {
			Groups    []api.SubmitResponse `json:"groups"`
			DynamicID string               `json:"dynamic_id"`
		}
		e.do("POST", "/v1/rollouts:batch", map[string]any{"requests": []any{map[string]any{"task": task, "n": 2}}, "informative_groups": 1}).json(t, &b)
		sub, body = b.Groups[0], map[string]any{"dynamic_id": b.DynamicID}
	} else {
		e.do("POST", "/v1/rollouts", map[string]any{"task": task}).json(t, &sub)
	}
	switch scope {
	case "group":
		body = map[string]any{"group_id": sub.GroupID}
	case "before policy":
		body = map[string]any{"before_policy_version": 1}
	case "all":
		body = map[string]any{"all": true}
	}
	var groups []string
	running := func() bool {
		pids := processesWith("sleep", marker)
		if len(pids) > 0 && groups == nil {
			groups = cgroupsOf(pids[0])
		}
		return len(pids) > 0
	}
	ended, gone := cancelWith(t, e, sub.RolloutIDs[0], running, func() {
		if scope == "before policy" {
			e.do("PUT", "/v1/policy", map[string]any{"version": 1})
		}
		if r := e.do("POST", "/v1/rollouts:cancel", body); r.code != 200 {
			t.Fatalf("cancel %v: %d %s", body, r.code, r.body)
		}
	})
	t.Logf("cancel (%s) -> rollout ended in %v, the tool's program gone in %v; its cgroups %v", scope, ended.Round(time.Millisecond), gone.Round(time.Millisecond), groups)
	if ended > time.Second || gone > time.Second {
		t.Errorf("cancel took %v to end the rollout and %v to stop its tool's program, want <= 1 s each", ended, gone)
	}
	if len(groups) == 0 {
		t.Log("the program ran in no cgroup of its own (this host makes none): the process check stands alone")
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, g := range groups {
		for procs := cgroupProcs(g); len(procs) > 0; procs = cgroupProcs(g) {
			if time.Now().After(deadline) {
				t.Errorf("cgroup %s still holds %v after the cancel", g, procs)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// cgroupsOf is the cgroup directories of a process that are not the
// test's own (the sandbox's), as paths under /sys/fs/cgroup.
func cgroupsOf(pid string) []string {
	mine, _ := os.ReadFile("/proc/self/cgroup")
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.Contains(string(mine), line) {
			continue
		}
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		ctrl := strings.TrimPrefix(strings.Split(f[1], ",")[0], "name=")
		dir := filepath.Join("/sys/fs/cgroup", ctrl, f[2])
		if f[1] == "" {
			dir = filepath.Join("/sys/fs/cgroup", f[2])
		}
		out = append(out, dir)
	}
	return out
}

// cgroupProcs lists the processes left in a cgroup (none when it is gone).
func cgroupProcs(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}
