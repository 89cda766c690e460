package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/trajectory"
)

type completionLog struct {
	Prompt []int `json:"prompt"`
	Seed   int64 `json:"seed"`
}

type completionResp struct {
	Choices []struct {
		Logprobs struct {
			Tokens        []string  `json:"tokens"`
			TokenLogprobs []float64 `json:"token_logprobs"`
		} `json:"logprobs"`
	} `json:"choices"`
}

// ids reads the exact ids vLLM returns as "token_id:N" (return_tokens_as_token_ids).
func (c completionResp) ids() []int {
	out := []int{}
	for _, t := range c.Choices[0].Logprobs.Tokens {
		n, err := strconv.Atoi(strings.TrimPrefix(t, "token_id:"))
		if err != nil {
			return nil
		}
		out = append(out, n)
	}
	return out
}

// engineCall is one successful generation in a backend's request log.
type engineCall struct {
	prompt, ids []int
	logprobs    []float64
}

// call reads a logged generation: vLLM's /v1/completions or SGLang's
// native /generate (input_ids in, meta_info.output_token_logprobs out).
func (e simEntry) call() (engineCall, bool) {
	if e.Status != 200 {
		return engineCall{}, false
	}
	switch e.Path {
	case "/v1/completions":
		var req completionLog
		var cr completionResp
		if json.Unmarshal(e.Request, &req) != nil || json.Unmarshal(e.Response, &cr) != nil || len(cr.Choices) != 1 {
			return engineCall{}, false
		}
		return engineCall{prompt: req.Prompt, ids: cr.ids(), logprobs: cr.Choices[0].Logprobs.TokenLogprobs}, true
	case "/generate":
		var req struct {
			InputIDs []int `json:"input_ids"`
		}
		var resp struct {
			MetaInfo struct {
				OutputTokenLogprobs [][3]any `json:"output_token_logprobs"`
			} `json:"meta_info"`
		}
		if json.Unmarshal(e.Request, &req) != nil || json.Unmarshal(e.Response, &resp) != nil || req.InputIDs == nil {
			return engineCall{}, false
		}
		c := engineCall{prompt: req.InputIDs}
		for _, lp := range resp.MetaInfo.OutputTokenLogprobs {
			id, _ := lp[1].(float64)
			v, _ := lp[0].(float64)
			c.ids, c.logprobs = append(c.ids, int(id)), append(c.logprobs, v)
		}
		return c, true
	}
	return engineCall{}, false
}

// checkTokens proves the invariant: the sequence is exactly what the backend
// received and produced, turn by turn, with mask 1 exactly on generated ids.
func checkTokens(t *testing.T, res *trajectory.Result, sim []simEntry) (finalCorrect bool) {
	t.Helper()
	tk := res.Tokens
	if len(tk.IDs) != len(tk.LossMask) || len(tk.IDs) != len(tk.Logprobs) {
		t.Fatalf("%s: lengths ids=%d mask=%d logprobs=%d", res.ID, len(tk.IDs), len(tk.LossMask), len(tk.Logprobs))
	}
	pos := 0
	for k, turn := range res.Turns {
		pos += len(turn.PromptDeltaIDs)
		if k == 0 && pos != tk.PromptLen {
			t.Errorf("%s: prompt_len %d, first delta %d", res.ID, tk.PromptLen, pos)
		}
		prompt := tk.IDs[:pos]
		found := false
		for _, e := range sim {
			call, ok := e.call()
			if !ok || !slices.Equal(call.prompt, prompt) || !slices.Equal(call.ids, turn.ResponseIDs) || !slices.Equal(call.logprobs, turn.Logprobs) {
				continue
			}
			found = true
			if k == len(res.Turns)-1 && e.Decision != nil {
				finalCorrect = e.Decision.Correct
			}
			break
		}
		if !found {
			t.Fatalf("%s turn %d: no backend request had this prompt and returned these ids and logprobs", res.ID, k)
		}
		for i, id := range turn.ResponseIDs {
			if tk.IDs[pos+i] != id || tk.LossMask[pos+i] != 1 || tk.Logprobs[pos+i] != turn.Logprobs[i] {
				t.Fatalf("%s turn %d: generated token %d differs in the flattened sequence", res.ID, k, i)
			}
		}
		for i := pos - len(turn.PromptDeltaIDs); i < pos; i++ {
			if tk.LossMask[i] != 0 {
				t.Fatalf("%s: mask 1 on a prompt token at %d", res.ID, i)
			}
		}
		pos += len(turn.ResponseIDs)
	}
	if pos != len(tk.IDs) {
		t.Fatalf("%s: turns cover %d tokens of %d", res.ID, pos, len(tk.IDs))
	}
	return finalCorrect
}

func TestEndToEnd(t *testing.T) {
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "0.5", "--think-turns", "1"}})
	e.startHost()
	e.addBackend()

	if r := e.do("GET", "/v1/domains", nil); r.code != 200 || !strings.Contains(string(r.body), `"name":"math"`) {
		t.Fatalf("domains: %d %s", r.code, r.body)
	}
	var sub api.SubmitResponse
	r := e.do("POST", "/v1/rollouts", map[string]any{
		"task":     map[string]any{"domain": "math", "id": "t-add", "question": "What is 17 + 25?", "answer": "42"},
		"sampling": map[string]any{"temperature": 1.0, "seed": 100, "max_tokens_per_turn": 512},
		"n":        4, "idempotency_key": "e2e-1",
	})
	if r.code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	r.json(t, &sub)
	if len(sub.RolloutIDs) != 4 {
		t.Fatalf("ids %v", sub.RolloutIDs)
	}
	// The same idempotency key with the same request returns the same
	// group, submitting nothing; with another request (valid or not) 409.
	var again api.SubmitResponse
	e.do("POST", "/v1/rollouts", `{"idempotency_key": "e2e-1", "n": 4, "sampling": {"max_tokens_per_turn": 512, "seed": 100, "temperature": 1.0},
		"task": {"answer": "42", "domain": "math", "id": "t-add", "question": "What is 17 + 25?"}}`).json(t, &again)
	if again.GroupID != sub.GroupID || !slices.Equal(again.RolloutIDs, sub.RolloutIDs) {
		t.Fatalf("idempotency: %+v vs %+v", again, sub)
	}
	for _, other := range []any{
		map[string]any{"task": map[string]any{"domain": "math", "question": "x", "answer": "1"}, "idempotency_key": "e2e-1"},
		map[string]any{"task": map[string]any{"domain": "math"}, "n": -3, "idempotency_key": "e2e-1"},
	} {
		if r := e.do("POST", "/v1/rollouts", other); r.code != http.StatusConflict || !strings.Contains(string(r.body), `"field":"idempotency_key"`) {
			t.Fatalf("a reused key with another request: %d %s", r.code, r.body)
		}
	}
	var results []*trajectory.Result
	for _, id := range sub.RolloutIDs {
		var res trajectory.Result
		r := e.do("GET", "/v1/rollouts/"+id+"?wait=60s", nil)
		r.json(t, &res)
		if res.Status != trajectory.StatusCompleted {
			t.Fatalf("%s: %s %+v", id, res.Status, res.Failure)
		}
		results = append(results, &res)
	}
	sim := e.simEntries()
	seeds := map[int64]bool{}
	right := 0
	for _, res := range results {
		correct := checkTokens(t, res, sim)
		want := 0.0
		if correct {
			want, right = 1, right+1
		}
		if res.Reward != want {
			t.Errorf("%s: reward %v but the simulator answered correct=%v", res.ID, res.Reward, correct)
		}
		if len(res.Turns) != 2 || res.EndReason != "finish" || res.Turns[0].ToolCalls != 1 {
			t.Errorf("%s: want think then finish, got %d turns, end %q", res.ID, len(res.Turns), res.EndReason)
		}
		if res.GroupID != sub.GroupID || res.Tokens.PromptLen == 0 || res.Timing.TotalMS <= 0 {
			t.Errorf("%s: group %s prompt_len %d timing %+v", res.ID, res.GroupID, res.Tokens.PromptLen, res.Timing)
		}
		seeds[int64(res.SampleIndex)] = true
	}
	t.Logf("group of 4: %d right by the simulator's script", right)

	// Results listing, stream and ack.
	var page struct {
		Results   []*trajectory.Result `json:"results"`
		NextSince uint64               `json:"next_since"`
	}
	e.do("GET", "/v1/results?group_id="+sub.GroupID, nil).json(t, &page)
	if len(page.Results) != 4 || page.NextSince == 0 {
		t.Fatalf("results page: %d %d", len(page.Results), page.NextSince)
	}
	var ack map[string]int
	e.do("POST", "/v1/results/ack", map[string]any{"ids": sub.RolloutIDs[:2]}).json(t, &ack)
	if ack["acked"] != 2 {
		t.Fatalf("ack %v", ack)
	}
	if r := e.do("GET", "/v1/rollouts/"+sub.RolloutIDs[0], nil); r.code != 404 {
		t.Fatalf("acked result still served: %d", r.code)
	}

	// Batch submission with a verl-style row routed by data_source.
	var batch struct {
		Groups []api.SubmitResponse `json:"groups"`
	}
	r = e.do("POST", "/v1/rollouts:batch", map[string]any{"requests": []any{
		map[string]any{"task": map[string]any{"data_source": "deepscaler", "prompt": []any{map[string]string{"role": "user", "content": "How many positive divisors does 36 have?"}}, "reward_model": map[string]any{"ground_truth": "9"}}, "n": 2},
		map[string]any{"task": map[string]any{"domain": "math", "question": "Compute 1/2 + 1/3.", "answer": `\frac{5}{6}`}},
	}})
	if r.code != 202 {
		t.Fatalf("batch: %d %s", r.code, r.body)
	}
	r.json(t, &batch)
	if len(batch.Groups) != 2 || len(batch.Groups[0].RolloutIDs) != 2 {
		t.Fatalf("batch groups %+v", batch.Groups)
	}
	for _, g := range batch.Groups {
		for _, id := range g.RolloutIDs {
			var res trajectory.Result
			e.do("GET", "/v1/rollouts/"+id+"?wait=60s", nil).json(t, &res)
			if res.Status != trajectory.StatusCompleted {
				t.Fatalf("batch rollout %s: %s %+v", id, res.Status, res.Failure)
			}
			checkTokens(t, &res, e.simEntries())
		}
	}

	// POST /v1/evaluate scores without generation.
	var ev map[string]any
	e.do("POST", "/v1/evaluate", map[string]any{"domain": "math", "task": map[string]any{"question": "q", "answer": "0.5"}, "response": `\boxed{\frac{1}{2}}`}).json(t, &ev)
	if ev["reward"] != 1.0 {
		t.Fatalf("evaluate: %v", ev)
	}

	testProRLCompat(t, e)

	if r := e.do("GET", "/metrics", nil); r.code != 200 || !strings.Contains(string(r.body), "prorl_rollouts_finished_total") {
		t.Fatalf("metrics: %d", r.code)
	}
}

func testProRLCompat(t *testing.T, e *env) {
	// Like the ProRL server, the compatible endpoints start stopped unless
	// compat.start_on_boot is set; NeMo RL calls /start and accepts 400.
	if r := e.do("POST", "/process", map[string]any{"instance": map[string]any{"data_source": "deepscaler"}}); r.code != 503 {
		t.Fatalf("/process before /start: %d %s", r.code, r.body)
	}
	if r := e.do("POST", "/start", nil); r.code != 200 || !strings.Contains(string(r.body), "Server started successfully") {
		t.Fatalf("/start: %d %s", r.code, r.body)
	}
	if r := e.do("POST", "/start", nil); r.code != 400 || !strings.Contains(string(r.body), "already running") {
		t.Fatalf("/start while running: %d %s", r.code, r.body)
	}
	if r := e.do("POST", "/add_llm_server", map[string]string{"address": e.sim}); r.code != 200 || !strings.Contains(string(r.body), "already registered") {
		t.Fatalf("/add_llm_server duplicate: %d %s", r.code, r.body)
	}
	// NeMo Gym registers the OpenAI base URL, with /v1: the same server.
	for _, addr := range []string{e.sim + "/v1", e.sim + "/v1/"} {
		if r := e.do("POST", "/add_llm_server", map[string]string{"address": addr}); r.code != 200 || !strings.Contains(string(r.body), "already registered") {
			t.Fatalf("/add_llm_server %s: %d %s", addr, r.code, r.body)
		}
	}
	if r := e.do("POST", "/add_llm_server", map[string]string{"address": e.sim + "/v2"}); r.code != 422 || !strings.Contains(string(r.body), "address") {
		t.Fatalf("/add_llm_server with another path: %d %s", r.code, r.body)
	}
	var st map[string]any
	e.do("GET", "/status", nil).json(t, &st)
	for _, k := range []string{"status", "pending_jobs", "init_queue", "run_queue", "eval_queue", "active_init", "active_run", "active_eval", "total"} {
		if _, ok := st[k]; !ok {
			t.Errorf("/status lacks %q: %v", k, st)
		}
	}
	r := e.do("POST", "/process", map[string]any{
		"instance":        map[string]any{"data_source": "deepscaler", "instance_id": "i-7", "trajectory_id": 3, "prompt": []any{map[string]string{"role": "user", "content": "What is 17 + 25?"}}, "reward_model": map[string]any{"ground_truth": "42"}, "extra_info": map[string]any{}},
		"sampling_params": map[string]any{"temperature": 1.0, "top_p": 1.0, "max_iterations": 4, "max_output_tokens": 512, "max_model_len": 8192, "token_level_generation": true, "seed": 5},
		"job_id":          nil,
	})
	if r.code != 200 {
		t.Fatalf("/process: %d %s", r.code, r.body)
	}
	var raw map[string]json.RawMessage
	r.json(t, &raw)
	for _, k := range []string{"instance_id", "trajectory_id", "score", "git_patch", "success", "finish", "messages", "tools", "end_properly", "resolved", "critical_error", "filter", "error", "timing"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("/process result lacks %q", k)
		}
	}
	if string(raw["git_patch"]) != "null" {
		t.Errorf("git_patch of a math job: %s, want null as ProRL gives", raw["git_patch"])
	}
	var pr api.ProRLResult
	r.json(t, &pr)
	if pr.InstanceID != "i-7" || pr.TrajectoryID != 3.0 || !pr.Finish || !pr.EndProperly || pr.CriticalError != nil || pr.Filter {
		t.Fatalf("/process result: %+v", pr)
	}
	// Concatenated token_ids are the whole sequence; each assistant message's
	// input_ids are everything before it, and it has one logprob per token.
	var seq []int
	for i, m := range pr.Messages {
		if m.Role == "assistant" {
			if !slices.Equal(m.InputIDs, seq) || len(m.Logprobs) != len(m.TokenIDs) || len(m.TokenIDs) == 0 {
				t.Fatalf("message %d: input_ids/logprobs inconsistent", i)
			}
		} else if len(m.InputIDs) != 0 {
			t.Fatalf("message %d (%s) has input_ids", i, m.Role)
		}
		if m.Role != "assistant" && i < 2 && len(m.TokenIDs) == 0 {
			t.Fatalf("message %d (%s) has no token_ids", i, m.Role)
		}
		seq = append(seq, m.TokenIDs...)
	}
	// The last assistant turn's prompt is exactly what the simulator received.
	last := pr.Messages[len(pr.Messages)-1]
	found := false
	for _, en := range e.simEntries() {
		var req completionLog
		if en.Path == "/v1/completions" && json.Unmarshal(en.Request, &req) == nil && req.Seed == 5 && slices.Equal(req.Prompt, last.InputIDs) {
			var cr completionResp
			_ = json.Unmarshal(en.Response, &cr)
			if !slices.Equal(cr.ids(), last.TokenIDs) {
				continue
			}
			found = true
			if en.Decision != nil && en.Decision.Correct != (pr.Score == 1) {
				t.Errorf("score %v but simulator correct=%v", pr.Score, en.Decision.Correct)
			}
			break
		}
	}
	if !found {
		t.Fatal("the /process trajectory is not what the simulator saw")
	}
	// ProRL acknowledges a cancel of a job it does not know.
	if r := e.do("POST", "/cancel", map[string]string{"job_id": "nope"}); r.code != 200 || !strings.Contains(string(r.body), "Cancel requested for job nope") {
		t.Errorf("/cancel unknown job: %d %s", r.code, r.body)
	}
	if r := e.do("POST", "/process", map[string]any{"instance": map[string]any{"data_source": "nosuch"}, "sampling_params": map[string]any{}}); r.code != 400 {
		t.Errorf("unknown data_source: %d %s", r.code, r.body)
	}
	// A row without data_source is a SWE-bench row to ProRL: here the SWE
	// domain is not enabled, so it is ProRL's unknown data_source.
	if r := e.do("POST", "/process", map[string]any{"instance": map[string]any{"instance_id": "x"}, "sampling_params": map[string]any{}}); r.code != 400 || !strings.Contains(string(r.body), "swebench") {
		t.Errorf("row without data_source: %d %s", r.code, r.body)
	}
	if r := e.do("POST", "/stop", nil); r.code != 200 {
		t.Fatalf("/stop: %d", r.code)
	}
	if r := e.do("POST", "/process", map[string]any{"instance": map[string]any{"data_source": "deepscaler"}}); r.code != 503 || !strings.Contains(string(r.body), "Server is not running") {
		t.Errorf("/process when stopped: %d %s", r.code, r.body)
	}
	// While stopped, ProRL answers 503 to all but /start.
	for _, c := range []struct{ method, path string }{{"GET", "/status"}, {"POST", "/stop"}, {"POST", "/cancel"}} {
		var body any
		if c.path == "/cancel" {
			body = map[string]string{"job_id": "x"}
		}
		if r := e.do(c.method, c.path, body); r.code != 503 || !strings.Contains(string(r.body), "Server is not running") {
			t.Errorf("%s while stopped: %d %s", c.path, r.code, r.body)
		}
	}
	if r := e.do("POST", "/start", nil); r.code != 200 {
		t.Fatalf("/start: %d", r.code)
	}
	if r := e.do("POST", "/clear_llm_server", nil); r.code != 200 {
		t.Fatalf("/clear_llm_server: %d", r.code)
	}
	if r := e.do("POST", "/process", map[string]any{"instance": map[string]any{"data_source": "deepscaler"}}); r.code != 503 || !strings.Contains(string(r.body), "No LLM server") {
		t.Errorf("/process without servers: %d %s", r.code, r.body)
	}
	if r := e.do("POST", "/add_llm_server", map[string]string{"address": e.sim}); r.code != 200 {
		t.Fatalf("/add_llm_server: %d", r.code)
	}
}

// slowJob is a /process job the simulator (slowSim) keeps thinking on for
// seconds.
var (
	slowSim = []string{"--think-turns", "30", "--token-latency", "20ms"}
	slowJob = map[string]any{
		"instance":        map[string]any{"data_source": "deepscaler", "instance_id": "slow", "trajectory_id": 0, "prompt": []any{map[string]string{"role": "user", "content": "What is 17 + 25?"}}, "reward_model": map[string]any{"ground_truth": "42"}},
		"sampling_params": map[string]any{"max_iterations": 40, "max_output_tokens": 256, "max_model_len": 16384},
	}
)

// TestProRLTimeout: a /process job that reaches the rollout timeout is a
// 200 with critical_error "timeout", timing.timeout_triggered and the
// partial messages, as ProRL answers, not a 504 that drops them.
func TestProRLTimeout(t *testing.T) {
	e := newEnv(t, envOpts{simArgs: slowSim, pipelineTOML: `rollout_timeout = "2s"`, staticBackend: true})
	e.startHost()
	if r := e.do("POST", "/start", nil); r.code != 200 {
		t.Fatalf("/start: %d %s", r.code, r.body)
	}
	t0 := time.Now()
	r := e.do("POST", "/process", slowJob)
	took := time.Since(t0)
	if r.code != 200 {
		t.Fatalf("/process at the timeout: %d %s", r.code, r.body)
	}
	var pr api.ProRLResult
	r.json(t, &pr)
	if pr.CriticalError == nil || *pr.CriticalError != "timeout" || !pr.Timing.TimeoutTriggered || pr.Success || pr.EndProperly {
		t.Fatalf("timed-out job: critical_error %v timing %+v success %v", pr.CriticalError, pr.Timing, pr.Success)
	}
	roles := []string{}
	for _, m := range pr.Messages {
		roles = append(roles, m.Role)
	}
	if len(pr.Messages) < 3 || roles[len(roles)-1] != "assistant" {
		t.Fatalf("partial messages lost: %v", roles)
	}
	if took > 10*time.Second {
		t.Fatalf("answered after %v", took)
	}
	t.Logf("timed out after %v with %d messages", took.Round(time.Millisecond), len(pr.Messages))
}

// TestProRLStopMidJob: /stop while a /process job runs answers that job
// with ProRL's 500 "Server is stopping; job cancelled", never a success
// holding only [system, user].
func TestProRLStopMidJob(t *testing.T) {
	e := newEnv(t, envOpts{simArgs: slowSim, staticBackend: true})
	e.startHost()
	if r := e.do("POST", "/start", nil); r.code != 200 {
		t.Fatalf("/start: %d %s", r.code, r.body)
	}
	done := make(chan resp, 1)
	go func() {
		done <- e.do("POST", "/process", slowJob)
	}()
	e.waitRunning(t, 1)
	if r := e.do("POST", "/stop", nil); r.code != 200 {
		t.Fatalf("/stop: %d %s", r.code, r.body)
	}
	select {
	case r := <-done:
		if r.code != 500 || !strings.Contains(string(r.body), "Server is stopping; job cancelled") {
			t.Fatalf("/process stopped mid-job: %d %s", r.code, r.body)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("/process did not answer after /stop")
	}
}
