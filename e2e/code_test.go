package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/trajectory"
)

// TestCodeDomain runs the bundled coding tasks through the host, the code
// plugin process and the simulator (a reference solution when it answers
// right, a broken one when not), judged in fresh bubblewrap sandboxes:
// every reward is the simulator's decision, tokens are exact, and
// /v1/evaluate judges a solution without a rollout.
func TestCodeDomain(t *testing.T) {
	tasks, err := os.ReadFile(filepath.Join("..", "examples", "code", "tasks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(binDir, "plugins/prorl-code")
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "0.5"}, tasks: string(tasks),
		extraTOML: "[plugins.code]\nenabled = true\npath = \"" + plugin + "\"\n[sandbox]\nagent = \"" + filepath.Join(binDir, "prorl-sandbox-agent") + "\"\n"})
	e.startHost()
	e.addBackend()
	var reqs []any
	for _, line := range strings.Split(strings.TrimSpace(string(tasks)), "\n") {
		var task map[string]any
		if err := json.Unmarshal([]byte(line), &task); err != nil {
			t.Fatal(err)
		}
		task["domain"] = "code"
		reqs = append(reqs, map[string]any{"task": task, "n": 4, "sampling": map[string]any{"seed": 3}})
	}
	var batch struct {
		Groups []api.SubmitResponse `json:"groups"`
	}
	r := e.do("POST", "/v1/rollouts:batch", map[string]any{"requests": reqs})
	if r.code != 202 {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	r.json(t, &batch)
	right, wrong := 0, 0
	for _, g := range batch.Groups {
		for _, id := range g.RolloutIDs {
			res := e.wait(t, id)
			if res.Status != trajectory.StatusCompleted {
				t.Fatalf("%s: %s %+v", id, res.Status, res.Failure)
			}
			correct := checkTokens(t, res, e.simEntries())
			if (res.Reward == 1) != correct {
				t.Fatalf("%s (%s): reward %v but the simulator answered correct=%v: %s", id, res.TaskID, res.Reward, correct, res.Info)
			}
			if correct {
				right++
			} else {
				wrong++
			}
		}
	}
	if right == 0 || wrong == 0 {
		t.Fatalf("right %d, wrong %d: the run did not exercise both outcomes", right, wrong)
	}
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
