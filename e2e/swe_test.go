package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSWEDomain runs the SWE fixtures (make swe-fixtures) through the host,
// the swe plugin process and the simulator, in bubblewrap sandboxes from
// the per-instance images: the simulator applies the right patch with one
// bash call for some rollouts and changes nothing for others; every
// reward equals its decision, the git_patch is the agent's change, and
// /v1/evaluate grades a patch on its own.
func TestSWEDomain(t *testing.T) {
	imageDir := "/var/cache/prorl/images" // make swe-fixtures, as root
	if os.Geteuid() != 0 {
		home, _ := os.UserHomeDir()
		imageDir = filepath.Join(home, ".cache", "prorl", "images")
	}
	if _, err := os.Stat(filepath.Join(imageDir, "swe-prorl__calc-1", "rootfs", "testbed")); err != nil {
		if os.Getenv("PRORL_REQUIRE_IMAGE") == "1" {
			t.Fatalf("SWE fixtures missing (make swe-fixtures): %v", err)
		}
		t.Skip("SWE fixtures missing (make swe-fixtures)")
	}
	tasks := exampleTasks(t, "swe")
	plugin := filepath.Join(binDir, "plugins/prorl-swe")
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "0.5"}, tasks: tasks,
		extraTOML: "[plugins.swe]\nenabled = true\npath = \"" + plugin + "\"\n[plugins.swe.config]\nmax_turns = 4\nimage_dir = \"" + imageDir + "\"\n" +
			"[sandbox]\nagent = \"" + filepath.Join(binDir, "prorl-sandbox-agent") + "\"\n"})
	e.startHost()
	e.addBackend()
	results, right, wrong := runExamples(t, e, "swe", tasks, 2, 11)
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
	t.Logf("%d resolved, %d not", right, wrong)

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
}
