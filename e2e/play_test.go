package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prorl/prorl/sdk/sdktest"

	"github.com/prorl/prorl/internal/testbin"
)

// countdownScripts are the simulator's scripts for the countdown tasks
// below: the calls and answers a model would give, keyed by a passage of
// the task's prompt (Go and Python render the numbers differently, the
// rest alike). The third task has no script: the policy tries the calc
// tool and gives up.
const countdownScripts = `{"key": "make 16. Call finish with the equation", "calls": [{"tool": "calc", "arguments": {"expression": "(3 + 5) * 2"}}], "final": "<answer>(3 + 5) * 2</answer>", "wrong": {"calls": [{"tool": "calc", "arguments": {"expression": "3 + 5 + 2"}}], "final": "<answer>3 + 5 + 2</answer>"}}
{"key": "make 36. Call finish with the equation", "final": "It is <answer>(10 - 4) * 6</answer>", "wrong": {"final": "<answer>10 * 4 - 6</answer>"}}
`

const countdownTasks = `{"nums": [3, 5, 2], "target": 16}
{"nums": [10, 4, 6], "target": 36}
{"nums": [1, 2, 3], "target": 7}
`

// TestPlayAnyDomain runs a domain the simulator has never heard of (the
// SDK's countdown example, in Go and in Python) end to end through a host:
// the simulator plays the scripts the test gives it, or explores the
// offered tools for a task without one; every reward is the simulator's
// decision and the tokens are exact.
func TestPlayAnyDomain(t *testing.T) {
	dir := t.TempDir()
	goPlugin := filepath.Join(dir, "countdown")
	if err := testbin.Build(dir, map[string]string{"countdown": M + "sdk/examples/countdown"}); err != nil {
		t.Fatal(err)
	}
	scripts := filepath.Join(dir, "scripts.jsonl")
	if err := os.WriteFile(scripts, []byte(countdownScripts), 0o644); err != nil {
		t.Fatal(err)
	}
	py := sdktest.Reference(t, "../scripts/ref.py", "pysdk")
	script, err := filepath.Abs("../sdk/python/examples/countdown.py")
	if err != nil {
		t.Fatal(err)
	}
	for lang, table := range map[string]string{
		"go":     fmt.Sprintf("path = %q\n", goPlugin),
		"python": fmt.Sprintf("path = %q\nargs = [%q]\n", py, script),
	} {
		t.Run(lang, func(t *testing.T) {
			e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "0.5", "--scripts", scripts},
				extraTOML: "[plugins.countdown]\nenabled = true\n" + table})
			e.startHost()
			e.addBackend()
			results, right, wrong := runExamples(t, e, "countdown", countdownTasks, 6, 5)
			// The unscripted task was played by exploring: calc with
			// arguments its schema accepts, then giving up.
			actions := map[string]int{}
			for _, en := range e.simEntries() {
				if en.Decision != nil {
					actions[en.Decision.Action]++
				}
			}
			if actions["explore:calc"] != 6 || actions["calc"] == 0 || actions["finish"] != len(results) {
				t.Errorf("simulator actions %v", actions)
			}
			t.Logf("%s: %d right, %d wrong of %d; simulator actions %v", lang, right, wrong, len(results), actions)
		})
	}

	// An admin enables the domain without writing a config: batch mode's
	// embedded host with --plugin, the simulator always right; the tasks
	// in JSONL, and in Parquet as pyarrow writes it.
	_, url := listening(t, filepath.Join(dir, "sim.addr"), "prorl-simllm", "--listen", "127.0.0.1:0", "--scripts", scripts, "--correct-rate", "1")
	for _, format := range []string{"jsonl", "parquet"} {
		t.Run("batch --plugin, "+format, func(t *testing.T) {
			tasks, out := filepath.Join(dir, "tasks."+format), filepath.Join(dir, "results-"+format+".jsonl")
			if format == "jsonl" {
				if err := os.WriteFile(tasks, []byte(countdownTasks), 0o644); err != nil {
					t.Fatal(err)
				}
			} else {
				py := sdktest.Reference(t, "../scripts/ref.py", "swebench")
				w := exec.Command(py, "-c", `import json, sys, pyarrow as pa, pyarrow.parquet as pq
pq.write_table(pa.Table.from_pylist([json.loads(l) for l in sys.stdin]), sys.argv[1])`, tasks)
				w.Stdin = strings.NewReader(countdownTasks)
				if b, err := w.CombinedOutput(); err != nil {
					t.Fatalf("pyarrow: %v\n%s", err, b)
				}
			}
			cmd := exec.Command(filepath.Join(binDir, "prorl-host"), "run", "--plugin", "countdown="+goPlugin, "--tasks", tasks,
				"--domain", "countdown", "--n", "2", "--backend", url, "--out", out)
			cmd.Dir = dir
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("prorl-host run: %v\n%s", err, b)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			rewards := map[float64]int{}
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				var r struct {
					Status string  `json:"status"`
					Reward float64 `json:"reward"`
				}
				if err := json.Unmarshal([]byte(line), &r); err != nil || r.Status != "completed" {
					t.Fatalf("result %s: %v", line, err)
				}
				rewards[r.Reward]++
			}
			if rewards[1] != 4 || rewards[0] != 2 {
				t.Fatalf("rewards %v; want 4 right (two scripted tasks) and 2 not (the unscripted one)", rewards)
			}
		})
	}
}

// TestPythonPluginCommand: a Python plugin's own command (Env.command)
// runs through `prorl-host plugins exec` as the host runs the plugin: its
// interpreter and script from the config, its config table passed and
// checked, stdin and exit status through.
func TestPythonPluginCommand(t *testing.T) {
	py := sdktest.Reference(t, "../scripts/ref.py", "pysdk")
	script, err := filepath.Abs("../sdk/python/examples/countdown.py")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "host.toml")
	table := func(turns int) string {
		return fmt.Sprintf("[plugins.countdown]\nenabled = true\npath = %q\nargs = [%q]\n[plugins.countdown.config]\nmax_turns = %d\n", py, script, turns)
	}
	run := func(stdin string, args ...string) (string, int) {
		cmd := exec.Command(filepath.Join(binDir, "prorl-host"), append([]string{"plugins", "exec", "--config", cfg, "countdown"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	if err := os.WriteFile(cfg, []byte(table(3)), 0o644); err != nil {
		t.Fatal(err)
	}
	rows := `{"nums": [1, 2], "target": 3}` + "\n" + `{"nums": [], "target": 3}` + "\n"
	if out, code := run(rows, "check-tasks"); code != 1 || !strings.Contains(out, "line 2: nums: no numbers") ||
		!strings.Contains(out, "1 of 2 tasks ok (episodes of at most 3 turns)") {
		t.Fatalf("check-tasks: exit %d\n%s", code, out)
	}
	if out, code := run(`{"nums": [1, 2], "target": 3}`+"\n", "check-tasks"); code != 0 || !strings.Contains(out, "1 of 1 tasks ok") {
		t.Fatalf("check-tasks, all good: exit %d\n%s", code, out)
	}
	if out, code := run("", "check-tasks", "extra"); code != 2 || !strings.Contains(out, "takes no arguments") {
		t.Fatalf("usage error: exit %d\n%s", code, out)
	}
	if out, code := run("", "nope"); code != 2 || !strings.Contains(out, "check-tasks < tasks.jsonl") {
		t.Fatalf("unknown command: exit %d\n%s", code, out)
	}
	// A config table the domain refuses is named, as at start.
	if err := os.WriteFile(cfg, []byte(table(0)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := run("", "check-tasks"); code != 1 || !strings.Contains(out, "max_turns") {
		t.Fatalf("bad config: exit %d\n%s", code, out)
	}
}
