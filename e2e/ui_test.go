package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/sdk/sdktest"
)

// TestDashboard drives /ui in headless Chromium (Debian's, through
// playwright-core from npm) against a host with tokens running real
// rollouts on the simulator: the overview updates live, filtering works,
// rollouts held in a stage (generation paused) are flagged stuck, cancel
// needs the admin token, the viewer shows a known trajectory's tokens and
// loss mask, an unknown id shows a not-found page. Screenshots of each
// page are kept in $PRORL_UI_SHOTS (default: the test's temp dir).
func TestDashboard(t *testing.T) {
	// The install script prints the node_modules directory.
	nodeModules := sdktest.Reference(t, "../scripts/ref.py", "playwright")
	const user, admin = "ui-user-token", "ui-admin-token"
	e := newEnv(t, envOpts{staticBackend: true, serverTOML: `token = "` + user + `"` + "\n" + `admin_token = "` + admin + `"` + "\n",
		pipelineTOML: "stuck_after = \"1s\"\n"})
	e.startHost()
	do := func(method, path, tok string, body any) resp {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = strings.NewReader(string(b))
		}
		req, _ := http.NewRequest(method, e.host+path, rd)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return resp{res.StatusCode, b}
	}
	task := map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}
	r := do("POST", "/v1/rollouts", user, map[string]any{"task": task, "n": 4, "group_id": "g-done"})
	if r.code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	var sr struct {
		RolloutIDs []string `json:"rollout_ids"`
	}
	r.json(t, &sr)
	// Every rollout of the first group finishes before generation pauses
	// (a pause would hold one still between turns).
	var known trajectory.Result
	for _, id := range sr.RolloutIDs {
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			var res trajectory.Result
			r := do("GET", "/v1/rollouts/"+id, user, nil)
			if r.code == http.StatusOK {
				r.json(t, &res)
				if res.Status != "" && res.FinishedAt != nil {
					if id == sr.RolloutIDs[0] {
						known = res
					}
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("rollout %s did not finish: %d %s", id, r.code, r.body)
			}
		}
	}
	// Generation paused: the next group's rollouts wait in their stage.
	if r := do("POST", "/v1/policy:pause", admin, map[string]any{"mode": "drain", "timeout_s": 30}); r.code != http.StatusOK {
		t.Fatalf("pause: %d %s", r.code, r.body)
	}
	r = do("POST", "/v1/rollouts", user, map[string]any{"task": task, "n": 2, "group_id": "g-stuck"})
	var stuck struct {
		RolloutIDs []string `json:"rollout_ids"`
	}
	r.json(t, &stuck)
	time.Sleep(1500 * time.Millisecond) // past the test's stuck_after (1s)
	// Every rollout of the first group finished before the browser looks.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var ov struct {
			Tally struct {
				Finished int `json:"finished"`
			} `json:"tally"`
		}
		do("GET", "/v1/ui/overview", user, nil).json(t, &ov)
		if ov.Tally.Finished >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first group did not finish")
		}
	}
	shots := os.Getenv("PRORL_UI_SHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	mask := make([]int, len(known.Tokens.LossMask))
	for i, m := range known.Tokens.LossMask {
		mask[i] = int(m)
	}
	in, _ := json.Marshal(map[string]any{"base": e.host, "token": user, "admin": admin, "shots": shots, "group": "g-done",
		"stuck": stuck.RolloutIDs, "finishedAtLeast": 4, "backend": e.sim,
		"known": map[string]any{"id": known.ID, "ids": known.Tokens.IDs, "mask": mask, "turns": len(known.Turns)}})
	out, err := browserScript(t, nodeModules, "dashboard.test.mjs", in).Output()
	var rep struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Name string `json:"name"`
			OK   bool   `json:"ok"`
		} `json:"checks"`
		Error string `json:"error"`
	}
	if jerr := json.Unmarshal(out, &rep); jerr != nil || err != nil || !rep.OK {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("browser test: %v %v\n%s\n%s", err, rep.Error, out, tail(stderr, 2000))
	}
	for _, c := range rep.Checks {
		t.Logf("ok: %s", c.Name)
	}
	do("POST", "/v1/policy:resume", admin, map[string]any{})
	t.Logf("screenshots in %s", shots)
}

// browserScript is the command running one of scripts/ui's browser tests
// with argument arg, with nodeModules (the playwright reference's) on its path.
func browserScript(t *testing.T, nodeModules, script string, arg []byte) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("node", script, string(arg))
	cmd.Dir = "../scripts/ui"
	cmd.Env = append(os.Environ(), "NODE_PATH="+nodeModules)
	// An ES module resolves packages from its own directory up: link them.
	link := filepath.Join("../scripts/ui", "node_modules")
	if _, err := os.Lstat(link); err != nil {
		if err := os.Symlink(nodeModules, link); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(link) })
	}
	return cmd
}
