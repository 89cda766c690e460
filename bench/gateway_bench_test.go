package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/harnessplay"
)

// BenchmarkGateway: the gateway's own cost per call against the
// zero-latency simulator, and how often each real harness's calls merge
// into one trace on the SWE fixtures.
func BenchmarkGateway(b *testing.B) {
	dir := binDir(b)
	simArgs := []string{"--listen", "127.0.0.1:0"}
	cfg := hostConfig(b, dir)
	tokenizer := "the simulator's /tokenize"
	if q := qwen3Dir(); q != "" {
		// Rendered by the host's Go tokenizer, as a deployment with
		// [tokenizer] model_dir does; the simulator speaks the same template.
		simArgs = append(simArgs, "--model-dir", q)
		appendTOML(b, cfg, fmt.Sprintf("[tokenizer]\nmodel_dir = %q\n", q))
		tokenizer = "the Go tokenizer (Qwen3)"
	}
	sim := spawn(b, dir, "prorl-simllm", simArgs...)
	host := spawn(b, dir, "prorl-host", "serve", "--config", cfg)
	call(b, "POST", host.addr+"/v1/backends", map[string]any{"url": sim.addr, "protocol": "vllm", "max_concurrency": 1024}, nil)

	const sessions, concurrent = 64, 8
	tools := []any{}
	for _, n := range []string{"calc", "lookup", "note"} {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": n, "description": "a tool",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []string{"q"}}}})
	}
	var mu sync.Mutex
	var over, inSession, backend []float64
	var merged, calls float64
	work := make(chan int, sessions)
	for i := range sessions {
		work <- i
	}
	close(work)
	var wg sync.WaitGroup
	errs := make(chan error, concurrent)
	for range concurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := runSessions(host.addr, work, tools, func(res *trajectory.Result, wall []float64) {
				mu.Lock()
				defer mu.Unlock()
				for k, t := range res.Turns {
					over = append(over, wall[k]-t.GenerateMS)
					inSession = append(inSession, t.OverheadMS)
					backend = append(backend, t.GenerateMS)
				}
				merged += res.Metrics["gateway_merged_calls"]
				calls += res.Metrics["gateway_calls"]
			}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	rate := merged / (calls - sessions)
	b.ReportMetric(pct(over, 0.5), "gateway-overhead-p50-ms")
	b.ReportMetric(pct(over, 0.99), "gateway-overhead-p99-ms")
	rows := []row{
		{"calls (OpenAI Chat, tools, multi-turn sessions)", fmt.Sprintf("%.0f in %d sessions, %d at once", calls, sessions, concurrent), "", true},
		{"backend generate per call, p50 (baseline, same run)", fmt.Sprintf("%.2f ms", pct(backend, 0.5)), "", true},
		{"gateway overhead per call, p50 (client wall - backend)", fmt.Sprintf("%.2f ms", pct(over, 0.5)), "", true},
		{"gateway overhead per call, p99", fmt.Sprintf("%.2f ms", pct(over, 0.99)), "", true},
		{"  of it render + splice + parse + capture, p50 / p99", fmt.Sprintf("%.2f / %.2f ms", pct(inSession, 0.5), pct(inSession, 0.99)), "", true},
		{"merge rate (calls after the first that extend a trace)", fmt.Sprintf("%.3f", rate), "1.0", rate == 1},
	}
	rows = append(rows, harnessMergeRates(b, dir)...)
	printTable("The LLM gateway (zero-latency simulator; tokens by "+tokenizer+")", rows)
}

// runSessions runs the sessions it takes from work, each a conversation as
// a harness keeps it (each reply sent back as it came, each tool call
// answered), and reports each closed session's result with its calls'
// wall times.
func runSessions(host string, work <-chan int, tools []any, report func(*trajectory.Result, []float64)) error {
	for i := range work {
		var s struct {
			ID  string `json:"session_id"`
			Key string `json:"api_key"`
			URL string `json:"openai_base_url"`
		}
		if err := post(host+"/v1/sessions", "", map[string]any{"max_turns": 16}, &s); err != nil {
			return err
		}
		msgs := []any{map[string]any{"role": "system", "content": "You are an agent."}, map[string]any{"role": "user", "content": fmt.Sprintf("Task %d: find the answer.", i)}}
		var wall []float64
		for range 8 {
			var out struct {
				Choices []struct {
					Message map[string]any `json:"message"`
				} `json:"choices"`
			}
			t0 := time.Now()
			if err := post(s.URL+"/chat/completions", s.Key, map[string]any{"model": "policy", "messages": msgs, "tools": tools}, &out); err != nil {
				return err
			}
			wall = append(wall, ms(time.Since(t0)))
			if len(out.Choices) != 1 {
				return fmt.Errorf("%d choices", len(out.Choices))
			}
			reply := out.Choices[0].Message
			msgs = append(msgs, reply)
			tcs, _ := reply["tool_calls"].([]any)
			if len(tcs) == 0 {
				break
			}
			for _, tc := range tcs {
				id, _ := tc.(map[string]any)["id"].(string)
				msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": id, "content": "nothing found"})
			}
		}
		var res trajectory.Result
		if err := post(host+"/v1/sessions/"+s.ID+":close", "", map[string]any{"reward": 0}, &res); err != nil {
			return err
		}
		if len(res.Turns) != len(wall) {
			return fmt.Errorf("%s: %d turns for %d calls", s.ID, len(res.Turns), len(wall))
		}
		report(&res, wall)
	}
	return nil
}

// post is a JSON POST with an optional bearer key, safe in any goroutine.
func post(url, key string, body, out any) error {
	j, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(j))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, data)
	}
	return json.Unmarshal(data, out)
}

func appendTOML(b *testing.B, path, text string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("\n" + text); err != nil {
		b.Fatal(err)
	}
}

// harnessMergeRates runs each installed harness preset, unmodified, in
// bwrap on the prorl__calc-1 SWE fixture, the simulator playing its tool
// calls that fix the bug, and reports its merge rate.
func harnessMergeRates(b *testing.B, dir string) []row {
	image := "/var/cache/prorl/images"
	harnesses := "/var/cache/prorl/harnesses"
	if os.Geteuid() != 0 {
		home, _ := os.UserHomeDir()
		image, harnesses = filepath.Join(home, ".cache/prorl/images"), filepath.Join(home, ".cache/prorl/harnesses")
	}
	tasks, err := os.ReadFile("../examples/swe/tasks.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	var task map[string]any
	if err := json.Unmarshal([]byte(strings.SplitN(string(tasks), "\n", 2)[0]), &task); err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(image, "swe-prorl__calc-1", "rootfs")); err != nil {
		return []row{{"merge rate per harness", "skipped: no SWE fixtures (make swe-fixtures)", "", true}}
	}
	fix := strings.SplitN(task["solution"].(string), "\n", 2)[1]
	statement := task["problem_statement"].(string)
	// Each harness plays the fix twice: with every command starting "cd
	// /testbed && " (its working directory), and without. Claude Code
	// rewrites the first kind in its history (it drops a cd to its cwd), so
	// those calls cannot merge: what the model sees next is not what it wrote.
	variants := []struct {
		label, statement string
		cmds             []string
	}{
		{"cd /testbed && cmd", statement, []string{"cd /testbed && ls", fix}},
		{"cmd (in the workdir)", statement + "\n(in the working directory)", []string{"ls", strings.TrimPrefix(fix, "cd /testbed && ")}},
	}
	var scripts []string
	var run []harnessplay.Harness
	for _, h := range harnessplay.Harnesses {
		if _, err := os.Stat(filepath.Join(harnesses, h.Name, ".prorl-installed")); err == nil {
			run = append(run, h)
			for _, v := range variants {
				scripts = append(scripts, h.Script(v.statement, v.cmds, nil))
			}
		}
	}
	if len(run) == 0 {
		return []row{{"merge rate per harness", "skipped: no harness installed (make harnesses)", "", true}}
	}
	scriptFile := filepath.Join(b.TempDir(), "scripts.jsonl")
	if err := os.WriteFile(scriptFile, []byte(strings.Join(scripts, "\n")+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	sim := spawn(b, dir, "prorl-simllm", "--listen", "127.0.0.1:0", "--scripts", scriptFile, "--correct-rate", "1", "--max-model-len", "1000000")
	cfg := hostConfig(b, dir)
	appendTOML(b, cfg, fmt.Sprintf("[plugins.swe]\nenabled = true\npath = %q\n[plugins.swe.config]\nmax_turns = 4\nimage_dir = %q\nimage_template = \"{image_dir}/swe-{instance_id}/rootfs\"\n[sandbox]\nagent_binary = %q\n",
		filepath.Join(dir, "plugins/prorl-swe"), image, filepath.Join(dir, "prorl-sandbox-agent")))
	host := spawn(b, dir, "prorl-host", "serve", "--config", cfg)
	call(b, "POST", host.addr+"/v1/backends", map[string]any{"url": sim.addr, "protocol": "vllm"}, nil)
	task["domain"] = "swe"
	var rows []row
	for _, h := range run {
		for _, v := range variants {
			rows = append(rows, harnessMergeRate(b, host.addr, task, h, v.label, v.statement))
		}
	}
	return rows
}

// harnessMergeRate runs 4 rollouts of the harness on the task and reports
// its merge rate.
func harnessMergeRate(b *testing.B, host string, task map[string]any, h harnessplay.Harness, label, statement string) row {
	var sub struct {
		RolloutIDs []string `json:"rollout_ids"`
	}
	call(b, "POST", host+"/v1/rollouts", map[string]any{"task": task, "n": 4, "max_turns": 30,
		"sampling": map[string]any{"seed": 1, "max_total_tokens": 1000000},
		"harness":  map[string]any{"name": h.Name, "instruction": h.Instruction(statement), "workdir": "/testbed"}}, &sub)
	var merged, calls, traces, resolved float64
	for _, id := range sub.RolloutIDs {
		var res trajectory.Result
		call(b, "GET", host+"/v1/rollouts/"+id+"?wait=120s", nil, &res)
		if res.Status != trajectory.StatusCompleted {
			b.Fatalf("%s %s: %s %+v", h.Name, id, res.Status, res.Failure)
		}
		merged += res.Metrics["gateway_merged_calls"]
		calls += res.Metrics["gateway_calls"]
		traces += res.Metrics["gateway_traces"]
		resolved += res.Reward
	}
	n := float64(len(sub.RolloutIDs))
	return row{fmt.Sprintf("merge rate, %s, %s", h.Name, label),
		fmt.Sprintf("%.3f (%d rollouts, %.0f calls, %.1f traces each, %.0f resolved)", merged/(calls-n), len(sub.RolloutIDs), calls, traces/n, resolved), "", true}
}
