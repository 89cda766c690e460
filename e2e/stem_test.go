package e2e

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// TestSTEMDomain runs the bundled STEM tasks through the host, the stem
// plugin process and the simulator scripted to answer right half the time:
// every reward is the simulator's decision, tokens are exact, and
// /v1/evaluate scores a response of each kind.
func TestSTEMDomain(t *testing.T) {
	tasks := exampleTasks(t, "stem")
	plugin := filepath.Join(binDir, "plugins/prorl-stem")
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "0.5", "--think-turns", "1"}, tasks: tasks,
		extraTOML: "[plugins.stem]\nenabled = true\npath = \"" + plugin + "\"\n[plugins.stem.config]\npython = false\n"})
	e.startHost()
	e.addBackend()
	results, right, wrong := runExamples(t, e, "stem", tasks, 4, 5)
	kinds := map[string]int{}
	for _, res := range results {
		var info struct {
			Kind string `json:"kind"`
		}
		_ = json.Unmarshal(res.Info, &info)
		kinds[info.Kind]++
	}
	if kinds["choice"] == 0 || kinds["numeric"] == 0 || kinds["free"] == 0 {
		t.Fatalf("kinds %v: the run did not exercise every kind", kinds)
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
