package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/harnessplay"

	"github.com/prorl/prorl/sdk/sdktest"
)

// mathQuestion is asked of the harnesses that answer in their last reply:
// the math domain's grader scores it; the domain has no sandbox, so the
// harness runs in the image the request names (the Debian default image).
const mathQuestion = "What is 17 + 25?"

// imagesDir is where make image and make swe-fixtures built the sandbox
// images: /var/cache/prorl/images as root, else under the home.
func imagesDir() string {
	if os.Geteuid() == 0 {
		return "/var/cache/prorl/images"
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "prorl", "images")
}

// harnessDir is where make harnesses installed a preset (as root, like the images).
func harnessDir(name string) string {
	if os.Geteuid() == 0 {
		return filepath.Join("/var/cache/prorl/harnesses", name)
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "prorl", "harnesses", name)
}

// TestHarnessRollouts runs real agent harnesses, unmodified, in bwrap
// sandboxes on an SWE fixture, through the gateway: the simulator plays
// each harness's own tool calls that fix the bug (or, drawn wrong, gives
// up). Checked: the harness ran to its end, the reward is what the
// simulator decided, every trace is exactly what the backend saw and
// returned, and code in the sandbox reaches neither the host's API nor
// anything of the gateway but its routes.
func TestHarnessRollouts(t *testing.T) {
	imageDir := imagesDir()
	if _, err := os.Stat(filepath.Join(imageDir, "swe-prorl__calc-1", "rootfs")); err != nil {
		sdktest.Missing(t, "SWE fixtures (make swe-fixtures)", err)
	}
	// Two fixtures: calc-1, fixed or given up on; srcpkg-90003, fixed or
	// "fixed" with its plausible wrong patch (a change the tests reject).
	rows := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(exampleTasks(t, "swe")), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if id, _ := r["instance_id"].(string); id == "prorl__calc-1" || id == "prorl__srcpkg-90003" {
			rows[id] = r
		}
	}
	row, row2 := rows["prorl__calc-1"], rows["prorl__srcpkg-90003"]
	if row == nil || row2 == nil {
		t.Fatal("the SWE examples lack prorl__calc-1 or prorl__srcpkg-90003")
	}
	solution := func(r map[string]any) string { return strings.SplitN(r["solution"].(string), "\n", 2)[1] } // "bash:\n<command>"
	fix := solution(row)
	wrongFix := "cd /testbed && git apply <<'PRORL_PATCH'\n" + row2["wrong_patch"].(string) + "PRORL_PATCH"
	// Code run in the sandbox tries the host's API directly and through
	// the gateway's relay: only the gateway's own routes answer.
	probe := `python3 -c "
import os, urllib.request as u
sid = os.environ.get('PRORL_SESSION_ID', 'r-0')
for url, body in [('http://127.0.0.1:8642/v1/backends', None), ('http://127.0.0.1:8642/healthz', None),
                  ('http://127.0.0.1:8642/gateway/v1/models', None), ('http://HOSTADDR/healthz', None),
                  ('http://127.0.0.1:8642/v1/sessions/' + sid + ':close', b'{\\\"reward\\\": 1}')]:
    try:
        print('PROBE', url.replace(sid, 'SID'), u.urlopen(u.Request(url, data=body), timeout=3).status)
    except Exception as e:
        print('PROBE', url.replace(sid, 'SID'), type(e).__name__, getattr(e, 'code', ''))
"`
	var scripts []string
	var run []harnessplay.Harness
	for _, h := range harnessplay.Harnesses {
		if _, err := os.Stat(filepath.Join(harnessDir(h.Name), ".prorl-installed")); err != nil {
			if sdktest.RefsRequired() {
				t.Fatalf("harness %s is not installed (make harnesses): %v", h.Name, err)
			}
			t.Logf("skipping %s: not installed (make harnesses)", h.Name)
			continue
		}
		run = append(run, h)
		scripts = append(scripts, h.Script(row["problem_statement"].(string), []string{probe, fix}, nil),
			h.Script(row2["problem_statement"].(string), []string{solution(row2)}, []string{wrongFix}))
		if len(h.Finish) == 0 { // it ends on its last reply, which the math grader scores
			scripts = append(scripts, h.Answer(mathQuestion, "The answer is \\boxed{42}.", "The answer is \\boxed{41}."))
		}
	}
	if len(run) == 0 {
		t.Skip("no harness installed (make harnesses)")
	}
	// A listener on the host's loopback stands for everything of the host's
	// (its API included): the sandbox must not reach it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	hostAddr := ln.Addr().String()
	for i := range scripts {
		scripts[i] = strings.ReplaceAll(scripts[i], "HOSTADDR", hostAddr)
	}
	dir := t.TempDir()
	scriptFile := filepath.Join(dir, "scripts.jsonl")
	if err := os.WriteFile(scriptFile, []byte(strings.Join(scripts, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(binDir, "plugins/prorl-swe")
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "0.5", "--max-model-len", "1000000", "--scripts", scriptFile},
		extraTOML: "[plugins.swe]\nenabled = true\npath = \"" + plugin + "\"\n[plugins.swe.config]\nmax_turns = 4\nimage_dir = \"" + imageDir +
			"\"\nimage_template = \"{image_dir}/swe-{instance_id}/rootfs\"\n[sandbox]\nagent_binary = \"" + filepath.Join(binDir, "prorl-sandbox-agent") + "\"\n"})
	e.startHost()
	e.addBackend()

	const n = 6
	ids := map[string][]string{}
	for _, h := range run {
		if len(h.Finish) == 0 {
			var sub struct {
				RolloutIDs []string `json:"rollout_ids"`
			}
			r := e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": mathQuestion, "answer": "42"},
				"n": n, "sampling": map[string]any{"seed": 1, "max_total_tokens": 1000000},
				"harness": map[string]any{"name": h.Name, "instruction": h.Instruction(mathQuestion), "image": "default"}})
			if r.code != 202 {
				t.Fatalf("%s: submit math: %d %s", h.Name, r.code, r.body)
			}
			r.json(t, &sub)
			ids[h.Name] = append(ids[h.Name], sub.RolloutIDs...)
		}
		for _, rw := range []map[string]any{row, row2} {
			task := maps(rw)
			task["domain"] = "swe"
			var sub struct {
				RolloutIDs []string `json:"rollout_ids"`
			}
			r := e.do("POST", "/v1/rollouts", map[string]any{"task": task, "n": n, "max_turns": 30,
				"sampling": map[string]any{"seed": 1, "max_total_tokens": 1000000},
				"harness":  map[string]any{"name": h.Name, "instruction": h.Instruction(rw["problem_statement"].(string)), "workdir": "/testbed"}})
			if r.code != 202 {
				t.Fatalf("%s: submit: %d %s", h.Name, r.code, r.body)
			}
			r.json(t, &sub)
			ids[h.Name] = append(ids[h.Name], sub.RolloutIDs...)
		}
	}
	for _, h := range run {
		right, wrong, probed := 0, 0, 0
		var merge []float64
		for _, id := range ids[h.Name] {
			res := e.wait(t, id)
			if res.Status != trajectory.StatusCompleted {
				t.Fatalf("%s %s: %s %+v", h.Name, id, res.Status, res.Failure)
			}
			if res.Metrics["harness_exit_code"] != 0 || res.Metrics["harness_timed_out"] != 0 {
				t.Fatalf("%s %s: the harness did not finish cleanly: %v", h.Name, id, res.Metrics)
			}
			correct, scripted := checkTraces(t, res, e.simEntries())
			if !scripted {
				t.Fatalf("%s %s: the simulator never played the task's script", h.Name, id)
			}
			if want := map[bool]float64{true: 1, false: 0}[correct]; res.Reward != want {
				t.Fatalf("%s %s: reward %v, the simulator played it %v: %s", h.Name, id, res.Reward, correct, res.Info)
			}
			var info struct {
				Patch string `json:"git_patch"`
			}
			_ = json.Unmarshal(res.Info, &info)
			switch {
			case correct:
				right++
				if res.TaskID == "prorl__calc-1" {
					checkProbe(t, h.Name, res, hostAddr)
					probed++
				}
			case res.Domain == "math" && !strings.Contains(res.FinalResponse, "boxed{41}"):
				t.Fatalf("%s %s: graded %q as wrong", h.Name, id, res.FinalResponse)
			case res.TaskID == "prorl__srcpkg-90003" && info.Patch == "":
				t.Fatalf("%s %s: the wrong patch was not applied, yet it is what the harness ran", h.Name, id)
			default:
				wrong++
			}
			merge = append(merge, res.Metrics["gateway_merge_rate"])
		}
		if right == 0 || wrong == 0 || probed == 0 {
			t.Fatalf("%s: %d right, %d wrong, %d probed: the seeds should draw both", h.Name, right, wrong, probed)
		}
		t.Logf("%s: %d resolved, %d not; merge rates %v", h.Name, right, wrong, merge)
	}
	// Polar's task API names the harness in agent.harness (its spelling).
	if slices.ContainsFunc(run, func(h harnessplay.Harness) bool { return h.Name == "mini-swe-agent" }) {
		h := harnessplay.Harnesses[0]
		r := e.do("POST", "/rollout/task/submit", polarTask("harness-1", 2, map[string]any{
			"instruction": h.Instruction(row["problem_statement"].(string)),
			"agent":       map[string]any{"harness": "mini-swe-agent", "model_name": "policy", "settings": map[string]any{"seed": 1, "max_turns": 30, "max_total_tokens": 1000000}},
			"evaluator":   map[string]any{"strategy": "swe", "config": row},
		}))
		if r.code != 200 {
			t.Fatalf("Polar submit: %d %s", r.code, r.body)
		}
		st := e.waitTask(t, "harness-1")
		if st.Status != "completed" || len(st.Results) != 2 {
			t.Fatalf("Polar task: %+v", st)
		}
		for _, sess := range st.Results {
			tr := sess.Trajectory.Traces
			if sess.Status != "COMPLETED" || len(tr) == 0 || tr[len(tr)-1].Reward == nil || len(tr[0].ResponseIDs) == 0 {
				t.Fatalf("Polar session: %+v", sess)
			}
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("code in a sandbox connected to the host's loopback %d times", n)
	}
}

func maps(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// checkTraces checks every generated span of every trace against the
// backend's log: its prompt is exactly the trace's tokens before it, its
// ids and logprobs are what the backend returned. It reports whether the
// simulator's scripted play was right.
func checkTraces(t *testing.T, res *trajectory.Result, sim []simEntry) (correct, scripted bool) {
	t.Helper()
	if len(res.Traces) == 0 {
		t.Fatalf("%s: no traces", res.ID)
	}
	calls := 0
	for ti, tr := range res.Traces {
		if len(tr.ResponseIDs) != len(tr.LossMask) || len(tr.ResponseIDs) != len(tr.ResponseLogprobs) {
			t.Fatalf("%s trace %d: lengths differ", res.ID, ti)
		}
		ids := append(slices.Clone(tr.PromptIDs), tr.ResponseIDs...)
		mask := append(make([]int8, len(tr.PromptIDs)), tr.LossMask...)
		lps := append(make([]float64, len(tr.PromptIDs)), tr.ResponseLogprobs...)
		spans := 0
		for i := 0; i < len(ids); {
			if mask[i] != 1 {
				i++
				continue
			}
			j := i
			for j < len(ids) && mask[j] == 1 {
				j++
			}
			found := false
			for _, e := range sim {
				c, ok := e.call()
				if !ok || !slices.Equal(c.prompt, ids[:i]) || !slices.Equal(c.ids, ids[i:j]) || !slices.Equal(c.logprobs, lps[i:j]) {
					continue
				}
				found = true
				if e.Decision != nil && e.Decision.Scripted {
					correct, scripted = e.Decision.Correct, true
				}
				break
			}
			if !found {
				t.Fatalf("%s trace %d: the span at %d is not what the backend generated for the tokens before it", res.ID, ti, i)
			}
			spans++
			i = j
		}
		if spans != tr.Calls {
			t.Fatalf("%s trace %d: %d generated spans, %d calls", res.ID, ti, spans, tr.Calls)
		}
		calls += spans
	}
	if calls != len(res.Turns) || float64(calls) != res.Metrics["gateway_calls"] {
		t.Fatalf("%s: %d spans, %d turns, metrics %v", res.ID, calls, len(res.Turns), res.Metrics)
	}
	return correct, scripted
}

// checkProbe reads what the sandbox's probe printed (the harness sent it
// back to the policy as the tool's output): the host's API is unreachable,
// the relay serves only the gateway, and the gateway wants a session key.
func checkProbe(t *testing.T, harness string, res *trajectory.Result, hostAddr string) {
	t.Helper()
	var out string
	for _, tr := range res.Traces {
		for _, m := range tr.ResponseMessages {
			if strings.Contains(m.Content, "PROBE ") {
				out = m.Content
			}
		}
	}
	if out == "" {
		t.Fatalf("%s %s: the probe's output is in no message", harness, res.ID)
	}
	want := []string{
		"PROBE http://127.0.0.1:8642/v1/backends HTTPError 404",
		"PROBE http://127.0.0.1:8642/healthz HTTPError 404",
		"PROBE http://127.0.0.1:8642/gateway/v1/models HTTPError 404",
		fmt.Sprintf("PROBE http://%s/healthz URLError", hostAddr),
		// Closing its own session with a reward of its choosing: no such route in the sandbox.
		"PROBE http://127.0.0.1:8642/v1/sessions/SID:close HTTPError 404",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("%s %s: the sandbox reached what it must not (want %q):\n%s", harness, res.ID, w, out)
		}
	}
}
