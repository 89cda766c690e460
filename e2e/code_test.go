package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/trajectory"
)

// TestCodeDomain runs the bundled coding tasks through the host, the code
// plugin process and the simulator (a reference solution when it answers
// right, a broken one when not), judged in fresh bubblewrap sandboxes:
// every reward is the simulator's decision, tokens are exact, and
// /v1/evaluate judges a solution without a rollout.
func TestCodeDomain(t *testing.T) {
	tasks := exampleTasks(t, "code")
	plugin := filepath.Join(binDir, "plugins/prorl-code")
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "0.5"}, tasks: tasks,
		extraTOML: "[plugins.code]\nenabled = true\npath = \"" + plugin + "\"\n[sandbox]\nagent = \"" + filepath.Join(binDir, "prorl-sandbox-agent") + "\"\n"})
	e.startHost()
	e.addBackend()
	_, right, wrong := runExamples(t, e, "code", tasks, 4, 3)
	t.Logf("%d right, %d wrong", right, wrong)

	var ev struct {
		Reward  float64            `json:"reward"`
		Metrics map[string]float64 `json:"metrics"`
		Info    map[string]any     `json:"info"`
	}
	task := map[string]any{"question": "Print the input doubled.", "tests": []map[string]string{{"input": "2\n", "output": "4\n"}, {"input": "7\n", "output": "14\n"}}}
	e.do("POST", "/v1/evaluate", map[string]any{"domain": "code", "task": task, "response": "```python\nprint(2 * int(input()))\n```"}).json(t, &ev)
	if ev.Reward != 1 || ev.Metrics["tests_passed"] != 2 {
		t.Fatalf("evaluate right: %+v", ev)
	}
	e.do("POST", "/v1/evaluate", map[string]any{"domain": "code", "task": task, "response": "```python\nprint(4)\n```"}).json(t, &ev)
	if ev.Reward != 0 || ev.Metrics["tests_passed"] != 1 || ev.Info["verdict"] != "WA" {
		t.Fatalf("evaluate wrong: %+v", ev)
	}
}

// TestStatefulPluginCrash: the code domain keeps per-rollout state in its
// process (the editor's undo history), so a plugin crash fails the
// rollouts it had prepared with plugin_crashed, stage and message, rather
// than letting a new process serve them without their state.
func TestStatefulPluginCrash(t *testing.T) {
	tasks := exampleTasks(t, "code")
	plugin := filepath.Join(binDir, "plugins/prorl-code")
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1", "--think-turns", "2", "--token-latency", "15ms"}, tasks: tasks,
		extraTOML: "[plugins.code]\nenabled = true\npath = \"" + plugin + "\"\n[sandbox]\nagent = \"" + filepath.Join(binDir, "prorl-sandbox-agent") + "\"\n"})
	e.startHost()
	e.addBackend()
	var task map[string]any
	if err := json.Unmarshal([]byte(strings.SplitN(tasks, "\n", 2)[0]), &task); err != nil {
		t.Fatal(err)
	}
	task["domain"] = "code"
	var sub api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": task, "n": 6}).json(t, &sub)
	e.waitRunning(t, 3)
	var d struct {
		Domains []pluginhost.Status `json:"domains"`
	}
	e.do("GET", "/v1/domains", nil).json(t, &d)
	pid := 0
	for _, s := range d.Domains {
		if s.Name == "code" {
			pid = s.PID
		}
	}
	if pid == 0 || syscall.Kill(pid, syscall.SIGKILL) != nil {
		t.Fatalf("no code plugin to kill: %+v", d.Domains)
	}
	crashed := 0
	for _, id := range sub.RolloutIDs {
		res := e.wait(t, id)
		switch {
		case res.Status == trajectory.StatusFailed && res.Failure.Reason == trajectory.ReasonPluginCrashed:
			crashed++
			if res.Failure.Stage == "" || res.Failure.Message == "" {
				t.Errorf("crash failure lacks stage or message: %+v", res.Failure)
			}
		case res.Status == trajectory.StatusCompleted:
		default:
			t.Errorf("%s: unexpected %s %+v", id, res.Status, res.Failure)
		}
	}
	if crashed == 0 {
		t.Fatal("no rollout of a stateful domain reported plugin_crashed")
	}
	t.Logf("%d of 6 rollouts reported plugin_crashed; the rest completed", crashed)
}

// TestEvaluateTimeout: /v1/evaluate answers 504 at server.evaluate_timeout
// when a domain takes longer to score.
func TestEvaluateTimeout(t *testing.T) {
	plugin := filepath.Join(binDir, "plugins/prorl-code")
	e := newEnv(t, envOpts{serverTOML: `evaluate_timeout = "1s"`,
		extraTOML: "[plugins.code]\nenabled = true\npath = \"" + plugin + "\"\n[plugins.code.config]\ntime_limit = 5\n[sandbox]\nagent = \"" + filepath.Join(binDir, "prorl-sandbox-agent") + "\"\n"})
	e.startHost()
	task := map[string]any{"question": "Print 4.", "tests": []map[string]string{{"input": "", "output": "4\n"}}}
	t0 := time.Now()
	r := e.do("POST", "/v1/evaluate", map[string]any{"domain": "code", "task": task, "response": "```python\nimport time\ntime.sleep(4)\nprint(4)\n```"})
	if took := time.Since(t0); r.code != 504 || !strings.Contains(string(r.body), "evaluate_timeout") || took > 3*time.Second {
		t.Fatalf("after %v: %d %s", took, r.code, r.body)
	}
}
