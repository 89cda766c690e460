package e2e

import (
	"path/filepath"
	"testing"
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
