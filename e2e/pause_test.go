package e2e

import (
	"net/http"
	"path/filepath"

	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prorl/prorl/internal/testmodels"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/trajectory"
)

// A weight-sync pause on the real path (host, vLLM protocol, simulator
// with vLLM's /pause): abort ends the generations in flight keeping their
// tokens, nothing reaches the backend while paused, :resume continues the
// same rollouts under the new version, each span stamped with its version,
// and the tokens are exactly those of a rollout that was never paused.
// Drain lets the in-flight ones finish and aborts none.
func TestPolicyPauseResume(t *testing.T) {
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1", "--think-turns", "2", "--token-latency", "15ms"}})
	e.startHost()
	e.addBackend()
	waitHealthy(t, e, 1)
	task := map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}

	for _, bad := range []struct {
		path string
		body any
		code int
		want string
	}{
		{"/v1/policy:pause", map[string]any{"mode": "halt"}, 422, `"field":"mode"`},
		{"/v1/policy:pause", map[string]any{"mode": "drain", "timeout_s": 0}, 422, `"field":"timeout_s"`},
		{"/v1/policy:pause", map[string]any{"mode": "drain", "wait": true}, 400, "wait"},
		{"/v1/policy:resume", map[string]any{"version": -1}, 422, `"field":"version"`},
	} {
		if r := e.do("POST", bad.path, bad.body); r.code != bad.code || !strings.Contains(string(r.body), bad.want) {
			t.Fatalf("%s %v: %d %s", bad.path, bad.body, r.code, r.body)
		}
	}

	for round, mode := range []string{"abort", "drain"} {
		version := int64(round + 1)
		var sub api.SubmitResponse
		e.do("POST", "/v1/rollouts", map[string]any{"task": task, "n": 8}).json(t, &sub)
		waitGenerating(t, e, 8)
		rep := pause(t, e, mode)
		paused := time.Now()
		if rep.InFlight == 0 || rep.Mode != mode {
			t.Fatalf("%s pause: %+v", mode, rep)
		}
		if (mode == "abort") != (rep.Aborted > 0) {
			t.Fatalf("%s pause aborted %d of %d", mode, rep.Aborted, rep.InFlight)
		}
		var pol pipeline.PolicyState
		e.do("GET", "/v1/policy", nil).json(t, &pol)
		if !pol.Paused || pol.Mode != mode || pol.Generating != 0 {
			t.Fatalf("policy while paused: %v", pol)
		}
		time.Sleep(300 * time.Millisecond) // tools and plugins run on; generation waits
		resumed := time.Now()
		var rr pipeline.ResumeReport
		if r := e.do("POST", "/v1/policy:resume", map[string]any{"version": version}); r.code != 200 {
			t.Fatalf("resume: %d %s", r.code, r.body)
		} else {
			r.json(t, &rr)
		}
		if !rr.WasPaused || rr.Version != version || len(rr.Errors) > 0 {
			t.Fatalf("resume: %+v", rr)
		}
		// A rollout never paused, for the tokens a paused one must equal.
		var ref api.SubmitResponse
		e.do("POST", "/v1/rollouts", map[string]any{"task": task}).json(t, &ref)
		want := e.wait(t, ref.RolloutIDs[0])
		sim := e.simEntries()
		spanned := 0
		for _, id := range sub.RolloutIDs {
			res := e.wait(t, id)
			if res.Status != trajectory.StatusCompleted || res.Reward != 1 {
				t.Fatalf("%s: %s %+v", id, res.Status, res.Failure)
			}
			checkTokens(t, res, sim)
			if !slices.Equal(res.Tokens.IDs, want.Tokens.IDs) || !slices.Equal(res.Tokens.Logprobs, want.Tokens.Logprobs) {
				t.Fatalf("%s (%s): tokens differ from a rollout never paused", id, mode)
			}
			for _, turn := range res.Turns {
				if turn.PolicySpans != nil {
					spanned++
					first, last := turn.PolicySpans[0], turn.PolicySpans[len(turn.PolicySpans)-1]
					if mode != "abort" || first.Version != version-1 || last.Version != version || first.End == 0 {
						t.Fatalf("%s turn %d spans %+v", id, turn.Index, turn.PolicySpans)
					}
				}
			}
		}
		if (mode == "abort") != (spanned > 0) {
			t.Fatalf("%s: %d turns span two versions", mode, spanned)
		}
		// Nothing reached the backend while paused.
		aborts := 0
		for _, en := range sim {
			if en.Path != "/v1/completions" {
				continue
			}
			if en.Time.After(paused) && en.Time.Before(resumed) {
				t.Fatalf("%s: a generation answered at %v, between the pause (%v) and the resume (%v)", mode, en.Time, paused, resumed)
			}
			var cr struct {
				Choices []struct {
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			if json.Unmarshal(en.Response, &cr) == nil && len(cr.Choices) == 1 && cr.Choices[0].FinishReason == "abort" && en.Time.After(paused.Add(-time.Second)) {
				aborts++
			}
		}
		if (mode == "abort") != (aborts > 0) {
			t.Fatalf("%s: %d aborted generations in the backend's log", mode, aborts)
		}
		t.Logf("%s: %d in flight at the pause, %d aborted, waited %.1f ms; %d turns continued across versions", mode, rep.InFlight, rep.Aborted, rep.WaitedMS, spanned)
	}
}

// A backend protocol without a pause API (NeMo RL's /generate): abort
// cancels its requests, and their turns generate again after :resume,
// with the same tokens as a rollout never paused.
func TestPolicyPauseCutsWithoutPauseAPI(t *testing.T) {
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1", "--think-turns", "1", "--token-latency", "15ms"}})
	e.startHost()
	e.register(map[string]any{"url": e.sim, "protocol": "generate"})
	waitHealthy(t, e, 1)
	task := map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}
	var sub api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": task, "n": 4}).json(t, &sub)
	waitGenerating(t, e, 4)
	rep := pause(t, e, "abort")
	if rep.InFlight == 0 || rep.Aborted != rep.InFlight {
		t.Fatalf("pause: %+v", rep)
	}
	if r := e.do("POST", "/v1/policy:resume", map[string]any{"version": 1}); r.code != 200 {
		t.Fatalf("resume: %d %s", r.code, r.body)
	}
	var ref api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": task}).json(t, &ref)
	want := e.wait(t, ref.RolloutIDs[0])
	for _, id := range sub.RolloutIDs {
		res := e.wait(t, id)
		if res.Status != trajectory.StatusCompleted || !slices.Equal(res.Tokens.IDs, want.Tokens.IDs) {
			t.Fatalf("%s: %s %+v, or tokens differ from a rollout never paused", id, res.Status, res.Failure)
		}
		for _, turn := range res.Turns {
			if turn.PolicySpans != nil || turn.PolicyVersion != 1 { // every turn ran after the resume
				t.Fatalf("%s turn %d: version %d spans %+v", id, turn.Index, turn.PolicyVersion, turn.PolicySpans)
			}
		}
	}
}

// The same pause against a real inference engine (llama.cpp through
// scripts/llamacpp/server.mjs, which implements vLLM's /pause and SGLang's
// /pause_generation), spoken to as vLLM and as SGLang: aborted generations
// come back with their tokens so far, the turns continue from them under
// the new version, and every span's ids and logprobs are exactly what the
// engine returned for that span's request. The host pauses and resumes
// the engine through each protocol's own endpoints.
func TestPolicyPauseLlamaCpp(t *testing.T) {
	modelDir := filepath.Join(testmodels.Dir(t), "tiny-gpt2-llama")
	url, logPath := startLlamaCppWith(t, modelDir, false, "--token-delay-ms", "10")
	for i, c := range []struct{ protocol, pause, resume string }{
		{"vllm", "/pause", "/resume"},
		{"sglang", "/pause_generation", "/continue_generation"},
	} {
		t.Run(c.protocol, func(t *testing.T) {
			e := newEnv(t, envOpts{extraTOML: "[tokenizer]\nmodel_dir = \"" + modelDir + "\"\n"})
			e.startHost()
			e.register(map[string]any{"url": url, "protocol": c.protocol})
			waitHealthy(t, e, 1)
			before := len(readEntries(t, logPath))
			var sub api.SubmitResponse
			e.do("POST", "/v1/rollouts", map[string]any{
				"task":     map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"},
				"sampling": map[string]any{"temperature": 1.0, "max_tokens_per_turn": 80, "seed": 5 + i},
				"n":        2, "max_turns": 2,
			}).json(t, &sub)
			waitGenerating(t, e, 2)
			rep, spanned := abortAndContinue(t, e, url, logPath, sub.RolloutIDs, func(res *trajectory.Result) {
				if res.Status != trajectory.StatusCompleted && res.Status != trajectory.StatusTruncated {
					t.Fatalf("%s: %s %+v", res.ID, res.Status, res.Failure)
				}
			})
			calls := map[string]int{}
			for _, en := range readEntries(t, logPath)[before:] {
				calls[en.Path]++
			}
			if calls[c.pause] != 1 || calls[c.resume] != 1 {
				t.Fatalf("the host called the engine's %s %d times and %s %d times, want once each: %v", c.pause, calls[c.pause], c.resume, calls[c.resume], calls)
			}
			t.Logf("llama.cpp as %s: %d in flight, %d aborted; %d turns continued under version 4, every span exactly the engine's", c.protocol, rep.InFlight, rep.Aborted, spanned)
		})
	}
}

// abortAndContinue pauses generation in abort mode (at least one
// generation aborted), checks that the engine at engineURL says it is
// paused, resumes under version 4, and waits for the rollouts ids, each
// checked by check and its tokens against the engine's log. At least one
// turn must have continued across the pause, its spans from version 0 to
// 4; it returns the pause's report and the turns continued.
func abortAndContinue(t *testing.T, e *env, engineURL, logPath string, ids []string, check func(*trajectory.Result)) (pipeline.PauseReport, int) {
	t.Helper()
	rep := pause(t, e, "abort")
	if rep.Aborted == 0 {
		t.Fatalf("nothing aborted: %+v", rep)
	}
	var paused struct {
		IsPaused bool `json:"is_paused"`
	}
	if r, err := http.Get(engineURL + "/is_paused"); err != nil {
		t.Fatal(err)
	} else {
		_ = json.NewDecoder(r.Body).Decode(&paused)
		r.Body.Close()
	}
	if !paused.IsPaused {
		t.Fatal("the engine was not paused")
	}
	if r := e.do("POST", "/v1/policy:resume", map[string]any{"version": 4}); r.code != 200 {
		t.Fatalf("resume: %d %s", r.code, r.body)
	}
	spanned := 0
	for _, id := range ids {
		res := e.wait(t, id)
		check(res)
		checkTokens(t, res, readEntries(t, logPath))
		for _, turn := range res.Turns {
			if s := turn.PolicySpans; s != nil {
				spanned++
				if s[0].Version != 0 || s[len(s)-1].Version != 4 || s[len(s)-1].End != len(turn.ResponseIDs) {
					t.Fatalf("%s turn %d: spans %+v of %d tokens", id, turn.Index, s, len(turn.ResponseIDs))
				}
			}
		}
	}
	if spanned == 0 {
		t.Fatal("no turn was continued across the pause")
	}
	return rep, spanned
}

// waitGenerating waits until n generation requests are in flight, then a
// little longer, so that each has generated some tokens.
func waitGenerating(t *testing.T, e *env, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st pipeline.PolicyState
		e.do("GET", "/v1/policy", nil).json(t, &st)
		if st.Generating >= n {
			time.Sleep(100 * time.Millisecond)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d generations in flight after 30 s, want %d", st.Generating, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pause pauses generation in mode and returns the host's report.
func pause(t *testing.T, e *env, mode string) pipeline.PauseReport {
	t.Helper()
	r := e.do("POST", "/v1/policy:pause", map[string]any{"mode": mode})
	if r.code != 200 {
		t.Fatalf("%s pause: %d %s", mode, r.code, r.body)
	}
	var rep pipeline.PauseReport
	r.json(t, &rep)
	return rep
}

// TestPolicyAfterCrash: the policy version and a weight-sync pause survive
// a host killed (SIGKILL). The restarted host stamps tokens with the
// version the trainer last set, not 0; killed while paused, it stays
// paused — the rollouts it takes up generate nothing while the weights may
// be loading — until :resume, which also resumes the backend the host had
// paused through vLLM's API before the kill.
func TestPolicyAfterCrash(t *testing.T) {
	e := newEnv(t, envOpts{staticBackend: true, simArgs: []string{"--correct-rate", "1", "--think-turns", "2", "--token-latency", "15ms"}})
	e.startHost()
	task := map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}
	if r := e.do("PUT", "/v1/policy", map[string]any{"version": 7}); r.code != 200 {
		t.Fatalf("set policy: %d %s", r.code, r.body)
	}
	e.killHost()
	e.startHost()
	var pol pipeline.PolicyState
	e.do("GET", "/v1/policy", nil).json(t, &pol)
	if pol.Version != 7 || pol.Paused {
		t.Fatalf("after a kill: %+v, want version 7, not paused", pol)
	}
	var sub api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": task}).json(t, &sub)
	if res := e.wait(t, sub.RolloutIDs[0]); res.Status != trajectory.StatusCompleted || res.PolicyVersion != 7 || res.Turns[0].PolicyVersion != 7 {
		t.Fatalf("a rollout after the kill: %s, policy %d, first turn's %d; want 7", res.Status, res.PolicyVersion, res.Turns[0].PolicyVersion)
	}

	e.do("POST", "/v1/rollouts", map[string]any{"task": task, "n": 4}).json(t, &sub)
	waitGenerating(t, e, 4)
	if rep := pause(t, e, "abort"); rep.Aborted == 0 {
		t.Fatalf("abort pause: %+v", rep)
	}
	e.killHost()
	e.startHost()
	restarted := time.Now()
	e.do("GET", "/v1/policy", nil).json(t, &pol)
	if pol.Version != 7 || !pol.Paused || pol.Mode != "abort" {
		t.Fatalf("killed while paused, after the restart: %+v, want version 7 paused (abort)", pol)
	}
	time.Sleep(time.Second) // the taken-up rollouts run their tools; nothing generates
	for _, en := range e.simEntries() {
		if en.Path == "/v1/completions" && en.Time.After(restarted) {
			t.Fatalf("a generation was sent at %v, after the restart (%v), while paused", en.Time, restarted)
		}
	}
	var rr pipeline.ResumeReport
	if r := e.do("POST", "/v1/policy:resume", map[string]any{"version": 8}); r.code != 200 {
		t.Fatalf("resume: %d %s", r.code, r.body)
	} else {
		r.json(t, &rr)
	}
	if !rr.WasPaused || rr.Version != 8 || len(rr.Errors) > 0 {
		t.Fatalf("resume: %+v", rr)
	}
	for _, id := range sub.RolloutIDs {
		res := e.wait(t, id)
		// The rollout's version is the one it (re)started under; its turns
		// were all generated after the resume.
		if res.Status != trajectory.StatusCompleted || res.Attempt != 2 || res.PolicyVersion != 7 {
			t.Fatalf("%s: %s %+v, attempt %d, policy %d; want completed, attempt 2, policy 7", id, res.Status, res.Failure, res.Attempt, res.PolicyVersion)
		}
		for _, turn := range res.Turns {
			if turn.PolicyVersion != 8 {
				t.Fatalf("%s turn %d stamped %d, want 8", id, turn.Index, turn.PolicyVersion)
			}
		}
	}
	e.do("GET", "/v1/policy", nil).json(t, &pol)
	if pol.Version != 8 || pol.Paused {
		t.Fatalf("after the resume: %+v", pol)
	}
}
