package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prorl/prorl/core/trajectory"
)

// Dynamic sampling (DAPO) on the server: a pool of 16 groups whose tasks
// the simulated policy always, never, or half the time solves; with room
// for two groups at a time, the host stops once 2 groups are informative
// and cancels the rest — every rollout is reported once, the cancelled
// ones as early_stopped, and groups never started cost no generation.
func TestDynamicSampling(t *testing.T) {
	scripts := filepath.Join(t.TempDir(), "scripts.jsonl")
	var lines []string
	for i := 0; i < 16; i++ {
		rate := []float64{0, 1, 0.5, 0.5}[i%4]
		b, _ := json.Marshal(map[string]any{"key": questionOf(i), "final": fmt.Sprintf("\\boxed{%d}", i+25),
			"wrong": map[string]any{"final": "\\boxed{0}"}, "correct_rate": rate})
		lines = append(lines, string(b))
	}
	if err := os.WriteFile(scripts, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpts{simArgs: []string{"--scripts", scripts, "--token-latency", "2ms"}, pipelineTOML: "run_workers = 8\ninit_workers = 8\n"})
	e.startHost()
	e.addBackend()
	waitHealthy(t, e, 1)
	reqs := make([]any, 16)
	for i := range reqs {
		reqs[i] = map[string]any{"task": map[string]any{"domain": "math", "question": questionOf(i), "answer": fmt.Sprint(i + 25)},
			"n": 4, "sampling": map[string]any{"seed": 1000 * i}}
	}
	for _, bad := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"requests": reqs, "informative_groups": 0}, "informative_groups"},
		{map[string]any{"requests": reqs, "informative_groups": 17}, "informative_groups"},
		{map[string]any{"requests": []any{map[string]any{"task": map[string]any{"domain": "math", "question": "q", "answer": "1"}}}, "informative_groups": 1}, "requests[0].n"},
	} {
		if r := e.do("POST", "/v1/rollouts:batch", bad.body); r.code != 422 || !strings.Contains(string(r.body), `"field":"`+bad.field+`"`) {
			t.Fatalf("%v: %d %s", bad.field, r.code, r.body)
		}
	}
	var sub struct {
		Groups []struct {
			GroupID    string   `json:"group_id"`
			RolloutIDs []string `json:"rollout_ids"`
		} `json:"groups"`
		DynamicID string `json:"dynamic_id"`
	}
	if r := e.do("POST", "/v1/rollouts:batch", map[string]any{"requests": reqs, "informative_groups": 2}); r.code != 202 {
		t.Fatalf("submit: %d %s", r.code, r.body)
	} else {
		r.json(t, &sub)
	}
	if !strings.HasPrefix(sub.DynamicID, "d-") {
		t.Fatalf("no dynamic id: %+v", sub)
	}
	informative, untouched, cancelled := 0, 0, 0
	for _, g := range sub.Groups {
		rewards, done, generated := map[float64]bool{}, 0, 0
		for _, id := range g.RolloutIDs {
			res := e.wait(t, id)
			switch {
			case res.Status == trajectory.StatusCompleted:
				rewards[res.Reward] = true
				done++
			case res.Status == trajectory.StatusCancelled && res.Failure.Reason == trajectory.ReasonEarlyStopped && strings.Contains(res.Failure.Message, "dynamic sampling"):
				cancelled++
			default:
				t.Fatalf("%s: %s %+v", id, res.Status, res.Failure)
			}
			for _, m := range res.Tokens.LossMask {
				generated += int(m)
			}
		}
		if done == len(g.RolloutIDs) && len(rewards) > 1 {
			informative++
		}
		if generated == 0 {
			untouched++
		}
	}
	if informative < 2 || untouched == 0 || cancelled == 0 {
		t.Fatalf("informative groups %d (want ≥ 2), groups never generated %d, cancelled rollouts %d", informative, untouched, cancelled)
	}
	t.Logf("%d informative groups; %d of 16 groups never generated; %d rollouts cancelled", informative, untouched, cancelled)
}

// TestDynamicSamplingCrash: a host killed (SIGKILL) in the middle of a
// dynamic batch resumes its tally when it restarts. With K = 4 and two or
// three informative groups finished (and acknowledged) before the kill,
// the restarted host stops at the fourth, as one that never crashed would;
// counting from zero again, it runs on to four more (6 or more in all).
// Two groups run at a time, so the count seen at the kill is 2 or 3, never
// K: both groups can finish in the same moment.
func TestDynamicSamplingCrash(t *testing.T) {
	const groups, n, k = 16, 4, 4
	scripts := filepath.Join(t.TempDir(), "scripts.jsonl")
	var lines []string
	for i := 0; i < groups; i++ {
		b, _ := json.Marshal(map[string]any{"key": questionOf(i), "final": fmt.Sprintf("\\boxed{%d}", i+25),
			"wrong": map[string]any{"final": "\\boxed{0}"}, "correct_rate": 0.5})
		lines = append(lines, string(b))
	}
	if err := os.WriteFile(scripts, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Two groups at a time, each rollout a second or more: the kill lands
	// well inside the batch.
	e := newEnv(t, envOpts{staticBackend: true, simArgs: []string{"--scripts", scripts, "--token-latency", "100ms"},
		pipelineTOML: "run_workers = 8\ninit_workers = 8\n"})
	e.startHost()
	reqs := make([]any, groups)
	for i := range reqs {
		reqs[i] = map[string]any{"task": map[string]any{"domain": "math", "question": questionOf(i), "answer": fmt.Sprint(i + 25)},
			"n": n, "sampling": map[string]any{"seed": 1000 * i}}
	}
	var sub struct {
		Groups []struct {
			GroupID    string   `json:"group_id"`
			RolloutIDs []string `json:"rollout_ids"`
		} `json:"groups"`
	}
	if r := e.do("POST", "/v1/rollouts:batch", map[string]any{"requests": reqs, "informative_groups": k}); r.code != 202 {
		t.Fatalf("submit: %d %s", r.code, r.body)
	} else {
		r.json(t, &sub)
	}
	pages := e.resultPages()
	seen := pages.seen
	informative := func() (done int) {
		for _, g := range sub.Groups {
			rewards := map[float64]bool{}
			for _, id := range g.RolloutIDs {
				if r := seen[id]; r != nil && r.Status == trajectory.StatusCompleted {
					rewards[r.Reward] = true
				} else {
					rewards = nil
					break
				}
			}
			if len(rewards) > 1 {
				done++
			}
		}
		return done
	}
	at, before := pages.crashAt(t, "informative groups", informative, k-2, k, groups*n)
	cancelled := 0
	for _, r := range seen {
		switch {
		case r.Status == trajectory.StatusCompleted:
		case r.Status == trajectory.StatusCancelled && r.Failure.Reason == trajectory.ReasonEarlyStopped:
			cancelled++
		default:
			t.Fatalf("%s: %s %+v", r.ID, r.Status, r.Failure)
		}
	}
	// The third informative group stops the batch; the one beside it may
	// finish in the same moment.
	if got := informative(); got < k || got > k+1 || cancelled == 0 {
		t.Fatalf("%d informative groups in all (want %d, or %d), %d rollouts cancelled", got, k, k+1, cancelled)
	}
	t.Logf("%d informative groups and %d rollouts reported before the kill, %d rollouts after; %d informative groups in all, %d rollouts cancelled",
		at, before, len(seen)-before, informative(), cancelled)
}

func questionOf(i int) string { return fmt.Sprintf("What is %d + 25?", i) }
