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

// TestSTEMDomain runs the bundled STEM tasks through the host, the stem
// plugin process and the simulator scripted to answer right half the time:
// every reward is the simulator's decision, tokens are exact, and
// /v1/evaluate scores a response of each kind.
func TestSTEMDomain(t *testing.T) {
	tasks, err := os.ReadFile(filepath.Join("..", "examples", "stem", "tasks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(binDir, "plugins/prorl-stem")
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "0.5", "--think-turns", "1"}, tasks: string(tasks),
		extraTOML: "[plugins.stem]\nenabled = true\npath = \"" + plugin + "\"\n[plugins.stem.config]\npython = false\n"})
	e.startHost()
	e.addBackend()
	var reqs []any
	for _, line := range strings.Split(strings.TrimSpace(string(tasks)), "\n") {
		var task map[string]any
		if err := json.Unmarshal([]byte(line), &task); err != nil {
			t.Fatal(err)
		}
		task["domain"] = "stem"
		reqs = append(reqs, map[string]any{"task": task, "n": 4, "sampling": map[string]any{"seed": 5}})
	}
	var batch struct {
		Groups []api.SubmitResponse `json:"groups"`
	}
	r := e.do("POST", "/v1/rollouts:batch", map[string]any{"requests": reqs})
	if r.code != 202 {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	r.json(t, &batch)
	sim := e.simEntries
	right, wrong := 0, 0
	kinds := map[string]int{}
	for _, g := range batch.Groups {
		for _, id := range g.RolloutIDs {
			res := e.wait(t, id)
			if res.Status != trajectory.StatusCompleted {
				t.Fatalf("%s: %s %+v", id, res.Status, res.Failure)
			}
			correct := checkTokens(t, res, sim())
			if (res.Reward == 1) != correct {
				t.Fatalf("%s (%s): reward %v but the simulator answered correct=%v: %s", id, res.TaskID, res.Reward, correct, res.Info)
			}
			if correct {
				right++
			} else {
				wrong++
			}
			var info struct {
				Kind string `json:"kind"`
			}
			_ = json.Unmarshal(res.Info, &info)
			kinds[info.Kind]++
		}
	}
	if right == 0 || wrong == 0 || kinds["choice"] == 0 || kinds["numeric"] == 0 || kinds["free"] == 0 {
		t.Fatalf("right %d, wrong %d, kinds %v: the run did not exercise both outcomes of every kind", right, wrong, kinds)
	}
	t.Logf("%d right, %d wrong, kinds %v", right, wrong, kinds)

	for _, c := range []struct {
		task     map[string]any
		response string
		reward   float64
	}{
		{map[string]any{"question": "q", "options": []string{"x", "y"}, "answer": "B"}, "Answer: (B)", 1},
		{map[string]any{"question": "q", "options": []string{"x", "y"}, "answer": "B"}, "Answer: (A)", 0},
		{map[string]any{"question": "q", "answer": "9.81", "unit": "m/s^2"}, `\boxed{981 cm/s^2}`, 1},
		{map[string]any{"question": "q", "answer": "9.81", "unit": "m/s^2"}, `\boxed{9.81 m/s}`, 0},
		{map[string]any{"question": "q", "answer": "oxygen", "kind": "free"}, `\boxed{Oxygen}`, 1},
	} {
		var ev map[string]any
		e.do("POST", "/v1/evaluate", map[string]any{"domain": "stem", "task": c.task, "response": c.response}).json(t, &ev)
		if ev["reward"] != c.reward {
			t.Fatalf("evaluate %v %q: %v", c.task, c.response, ev)
		}
	}
}
