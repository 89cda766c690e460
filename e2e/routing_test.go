package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/trajectory"
)

// The routing is the host's config choice, on the real path (pipeline,
// failover, pool): group-aware keeps each group on one backend; round-robin
// sends one rollout's turns to both; either way the tokens are exact.
func TestRoutingsEndToEnd(t *testing.T) {
	for _, routing := range []string{"group-aware", "round-robin"} {
		t.Run(routing, func(t *testing.T) {
			e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1", "--think-turns", "2", "--token-latency", "3ms"}, backendsTOML: fmt.Sprintf("routing = %q\n", routing)})
			log2 := filepath.Join(e.dir, "sim2.jsonl")
			_, url2 := listening(t, filepath.Join(e.dir, "sim2.addr"), "prorl-simllm", "--listen", "127.0.0.1:0", "--answers", e.tasks,
				"--correct-rate", "1", "--think-turns", "2", "--token-latency", "3ms", "--log", log2)
			e.startHost()
			e.addBackend()
			e.register(map[string]any{"url": url2})
			waitHealthy(t, e, 2)
			var subs []api.SubmitResponse
			for g := 0; g < 3; g++ {
				var sub api.SubmitResponse
				e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}, "n": 4}).json(t, &sub)
				subs = append(subs, sub)
			}
			mixed, used := 0, map[string]bool{}
			for _, sub := range subs {
				group := map[string]bool{}
				for _, id := range sub.RolloutIDs {
					res := e.wait(t, id)
					if res.Status != trajectory.StatusCompleted || res.Reward != 1 {
						t.Fatalf("%s: %s %+v", id, res.Status, res.Failure)
					}
					checkTokens(t, res, append(e.simEntries(), readEntries(t, log2)...))
					own := map[string]bool{}
					for _, turn := range res.Turns {
						own[turn.Backend], group[turn.Backend], used[turn.Backend] = true, true, true
					}
					if len(own) > 1 {
						mixed++
					}
				}
				if routing == "group-aware" && len(group) != 1 {
					t.Fatalf("group %s spread over %v", sub.GroupID, group)
				}
			}
			switch {
			case len(used) != 2:
				t.Fatalf("%s used backends %v: want both", routing, used)
			case routing == "round-robin" && mixed == 0:
				t.Fatal("round-robin: no rollout's turns went to both backends")
			case routing == "group-aware" && mixed != 0:
				t.Fatalf("group-aware: %d rollouts moved between backends with no queue", mixed)
			}
		})
	}
}

// waitHealthy waits until n backends passed their first health check.
func waitHealthy(t *testing.T, e *env, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var bs struct{ Backends []backend.Status }
		e.do("GET", "/v1/backends", nil).json(t, &bs)
		ok := 0
		for _, b := range bs.Backends {
			if b.Healthy {
				ok++
			}
		}
		if ok >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%d backends never became healthy", n)
}

// TestAdmissionEndToEnd: two backends of one slot each and a KV budget of
// about one rollout, registered through the API (negative values refused,
// naming the field): twelve multi-turn rollouts queue in the host, all
// complete with the simulators' exact tokens, and afterwards no request,
// context or lease is still counted.
func TestAdmissionEndToEnd(t *testing.T) {
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1", "--think-turns", "2", "--token-latency", "2ms"}, backendsTOML: "routing = \"group-aware\"\n"})
	log2 := filepath.Join(e.dir, "sim2.jsonl")
	_, url2 := listening(t, filepath.Join(e.dir, "sim2.addr"), "prorl-simllm", "--listen", "127.0.0.1:0", "--answers", e.tasks,
		"--correct-rate", "1", "--think-turns", "2", "--token-latency", "2ms", "--log", log2)
	e.startHost()
	for _, bad := range []struct {
		field string
		body  map[string]any
	}{{"slots", map[string]any{"url": url2, "slots": -1}}, {"cache_tokens", map[string]any{"url": url2, "cache_tokens": -1}}} {
		if r := e.do("POST", "/v1/backends", bad.body); r.code != 422 || !strings.Contains(string(r.body), `"field":"`+bad.field+`"`) {
			t.Fatalf("%s < 0: %d %s", bad.field, r.code, r.body)
		}
	}
	for _, u := range []string{e.sim, url2} {
		e.register(map[string]any{"url": u, "slots": 1, "cache_tokens": 600})
	}
	waitHealthy(t, e, 2)
	var subs []api.SubmitResponse
	for range 3 {
		var sub api.SubmitResponse
		e.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}, "n": 4}).json(t, &sub)
		subs = append(subs, sub)
	}
	for _, sub := range subs {
		for _, id := range sub.RolloutIDs {
			res := e.wait(t, id)
			if res.Status != trajectory.StatusCompleted || res.Reward != 1 || len(res.Turns) < 2 {
				t.Fatalf("%s: %s %d turns %+v", id, res.Status, len(res.Turns), res.Failure)
			}
			checkTokens(t, res, append(e.simEntries(), readEntries(t, log2)...))
		}
	}
	var bs struct{ Backends []backend.Status }
	e.do("GET", "/v1/backends", nil).json(t, &bs)
	for _, b := range bs.Backends {
		if b.Slots != 1 || b.CacheTokens != 600 || b.Requests != 0 || b.ContextTokens != 0 || b.InFlight != 0 {
			t.Fatalf("after the step: %+v", b)
		}
	}
}
