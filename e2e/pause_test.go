package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

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
		time.Sleep(250 * time.Millisecond) // every rollout is generating its first turn (~0.5 s)
		r := e.do("POST", "/v1/policy:pause", map[string]any{"mode": mode})
		paused := time.Now()
		var rep pipeline.PauseReport
		r.json(t, &rep)
		if r.code != 200 || rep.InFlight == 0 || rep.Mode != mode {
			t.Fatalf("%s pause: %d %s", mode, r.code, r.body)
		}
		if (mode == "abort") != (rep.Aborted > 0) {
			t.Fatalf("%s pause aborted %d of %d", mode, rep.Aborted, rep.InFlight)
		}
		var pol map[string]any
		e.do("GET", "/v1/policy", nil).json(t, &pol)
		if pol["paused"] != true || pol["mode"] != mode {
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
	if r := e.do("POST", "/v1/backends", map[string]any{"url": e.sim, "protocol": "generate"}); r.code != 201 {
		t.Fatalf("add backend: %d %s", r.code, r.body)
	}
	waitHealthy(t, e, 1)
	task := map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}
	var sub api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": task, "n": 4}).json(t, &sub)
	time.Sleep(250 * time.Millisecond)
	var rep pipeline.PauseReport
	if r := e.do("POST", "/v1/policy:pause", map[string]any{"mode": "abort"}); r.code != 200 {
		t.Fatalf("pause: %d %s", r.code, r.body)
	} else {
		r.json(t, &rep)
	}
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
