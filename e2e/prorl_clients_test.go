package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// nemoRLResult is what NeMo RL's ProRL environment reads of a /process
// answer (its call pattern and field use, ANCHORS.md).
type nemoRLResult struct {
	Score       *float64 `json:"score"`
	Resolved    *bool    `json:"resolved"`
	Finish      *bool    `json:"finish"`
	Success     *bool    `json:"success"`
	Error       *string  `json:"error"`
	EndProperly *bool    `json:"end_properly"`
	Messages    []struct {
		Role     string    `json:"role"`
		TokenIDs []int     `json:"token_ids"`
		InputIDs []int     `json:"input_ids"`
		Logprobs []float64 `json:"logprobs"`
	} `json:"messages"`
}

// TestProRLClientReplay replays how the ProRL server's users drive it:
// NeMo Gym's lifecycle (clear, register the OpenAI base URL with /v1,
// start, start again) and NeMo RL's step (64 concurrent /process with no
// client timeout, a non-200 or a result without messages retried up to 3
// attempts, cancels arriving mid-job, /stop at the end), checking every
// field each reads.
func TestProRLClientReplay(t *testing.T) {
	e := newEnv(t, envOpts{simArgs: []string{"--think-turns", "3", "--token-latency", "3ms", "--correct-rate", "1"}, staticBackend: true})
	e.startHost()
	// NeMo Gym: lifecycle with the /v1 base URL.
	for _, c := range []struct {
		path string
		body any
		code int
	}{
		{"/clear_llm_server", nil, 200},
		{"/add_llm_server", map[string]string{"address": e.sim + "/v1"}, 200},
		{"/start", nil, 200},
		{"/start", nil, 400}, // "already running" is fine to both clients
	} {
		if r := e.do("POST", c.path, c.body); r.code != c.code {
			t.Fatalf("%s: %d %s", c.path, r.code, r.body)
		}
	}
	const jobs, cancelled = 64, 4
	type outcome struct {
		attempts int
		first    resp
		res      nemoRLResult
		err      error
	}
	outs := make([]outcome, jobs)
	var wg sync.WaitGroup
	run := func(i int) {
		defer wg.Done()
		body := map[string]any{
			"instance": map[string]any{"data_source": "deepscaler", "instance_id": fmt.Sprintf("inst-%d", i%8), "trajectory_id": i,
				"prompt": []any{map[string]string{"role": "user", "content": "What is 17 + 25?"}}, "reward_model": map[string]any{"ground_truth": "42"},
				"extra_info": map[string]any{"index": i, "split": "train"}},
			"sampling_params": map[string]any{"temperature": 1.0, "top_p": 1.0, "max_iterations": 6, "max_output_tokens": 512, "max_model_len": 16384, "token_level_generation": true},
		}
		if i < cancelled {
			body["job_id"] = fmt.Sprintf("cancel-me-%d", i)
		}
		o := &outs[i]
		for o.attempts < 3 {
			o.attempts++
			r, err := e.request("POST", "/process", body)
			if err != nil {
				o.err = err
				return
			}
			if o.attempts == 1 {
				o.first = r
			}
			var res nemoRLResult
			if r.code == 200 && json.Unmarshal(r.body, &res) == nil && len(res.Messages) > 0 {
				o.res, o.err = res, nil
				return
			}
			o.err = fmt.Errorf("attempt %d: %d %s", o.attempts, r.code, r.body)
			delete(body, "job_id") // the retry is a new job
		}
	}
	wg.Add(cancelled)
	for i := 0; i < cancelled; i++ {
		go run(i)
	}
	// Cancel those jobs mid-run, while the rest of the step is submitted.
	waitJobs(t, e, cancelled)
	wg.Add(jobs - cancelled)
	for i := cancelled; i < jobs; i++ {
		go run(i)
	}
	for i := 0; i < cancelled; i++ {
		if r := e.do("POST", "/cancel", map[string]string{"job_id": fmt.Sprintf("cancel-me-%d", i)}); r.code != 200 {
			t.Fatalf("/cancel: %d %s", r.code, r.body)
		}
	}
	var st map[string]any
	e.do("GET", "/status", nil).json(t, &st)
	for _, k := range []string{"status", "pending_jobs", "running", "jobs", "init", "run", "eval"} {
		if _, ok := st[k]; !ok {
			t.Errorf("/status lacks %q: %v", k, st)
		}
	}
	wg.Wait()
	for i, o := range outs {
		if o.err != nil {
			t.Fatalf("job %d after %d attempts: %v", i, o.attempts, o.err)
		}
		if want := 1; i < cancelled {
			want = 2
			if o.attempts != want {
				t.Errorf("cancelled job %d took %d attempts, want %d (the cancelled answer is retried once)", i, o.attempts, want)
			}
			// ProRL's answer to a cancelled job: 200 and only {"error"}.
			var only map[string]any
			if o.first.code != 200 || json.Unmarshal(o.first.body, &only) != nil || len(only) != 1 || only["error"] == nil {
				t.Errorf("cancelled job %d answered %d %s", i, o.first.code, o.first.body)
			}
		} else if o.attempts != want {
			t.Errorf("job %d took %d attempts", i, o.attempts)
		}
		r := o.res
		if r.Score == nil || r.Resolved == nil || r.Finish == nil || r.Success == nil || r.EndProperly == nil {
			t.Fatalf("job %d: a field NeMo RL reads is missing: %+v", i, r)
		}
		if !*r.Success || r.Error != nil || !*r.Finish || !*r.EndProperly || *r.Score != 1 {
			t.Errorf("job %d: success %v error %v finish %v end_properly %v score %v", i, *r.Success, r.Error, *r.Finish, *r.EndProperly, *r.Score)
		}
		// NeMo RL's prompt/response split: messages before the first
		// assistant are the prompt; token_ids concatenate to the sequence.
		var seq []int
		for k, m := range r.Messages {
			if m.Role == "assistant" && (!slices.Equal(m.InputIDs, seq) || len(m.Logprobs) != len(m.TokenIDs)) {
				t.Fatalf("job %d message %d: input_ids or logprobs do not match the sequence", i, k)
			}
			if len(m.TokenIDs) == 0 {
				t.Fatalf("job %d message %d (%s) has no token_ids", i, k, m.Role)
			}
			seq = append(seq, m.TokenIDs...)
		}
		if last := r.Messages[len(r.Messages)-1]; last.Role != "assistant" {
			t.Errorf("job %d ends on %s", i, last.Role)
		}
	}
	if r := e.do("POST", "/stop", nil); r.code != 200 || !strings.Contains(string(r.body), "Server stopped successfully") {
		t.Fatalf("/stop: %d %s", r.code, r.body)
	}
}

// waitJobs waits until the ProRL server holds n jobs.
func waitJobs(t *testing.T, e *env, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var st struct {
			Jobs int `json:"jobs"`
		}
		e.do("GET", "/status", nil).json(t, &st)
		if st.Jobs >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the host never held %d jobs", n)
}
