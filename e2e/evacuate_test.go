package e2e

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/testmodels"
)

// Evacuation on the real path (host, pool, failover, vLLM protocol, two
// simulators with vLLM's /pause): rollouts generate on a slow backend; a
// backend twice as fast joins and, once nothing waits, the slow one's
// generations are aborted with their tokens kept and continue on the fast
// one. Every token is one a simulator generated, and each rollout's tokens
// equal those of a rollout never moved.
func TestEvacuationEndToEnd(t *testing.T) {
	args := []string{"--correct-rate", "1", "--think-turns", "2"}
	e := newEnv(t, envOpts{simArgs: append(args, "--token-latency", "200ms")})
	fastLog := filepath.Join(e.dir, "fast.jsonl")
	_, fast := listening(t, filepath.Join(e.dir, "fast.addr"), "prorl-simllm",
		append([]string{"--listen", "127.0.0.1:0", "--answers", e.tasks, "--log", fastLog, "--token-latency", "2ms"}, args...)...)
	e.startHost()
	e.register(map[string]any{"url": e.sim, "weight": 1, "slots": 8})
	waitHealthy(t, e, 1)
	task := map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}
	var sub api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": task, "n": 4}).json(t, &sub)
	waitGenerating(t, e, 4)
	e.register(map[string]any{"url": fast, "weight": 2, "slots": 8})
	waitHealthy(t, e, 2)
	// A rollout on the fast backend ends a request: the pool looks, finds
	// nothing waiting and room for the slow backend's generations.
	var ref api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": task}).json(t, &ref)
	want := e.wait(t, ref.RolloutIDs[0])
	if want.Status != trajectory.StatusCompleted {
		t.Fatalf("%s: %s %+v", want.ID, want.Status, want.Failure)
	}
	moved := 0
	for _, id := range sub.RolloutIDs {
		res := e.wait(t, id)
		if res.Status != trajectory.StatusCompleted || res.Reward != 1 {
			t.Fatalf("%s: %s %+v", id, res.Status, res.Failure)
		}
		checkTokens(t, res, append(e.simEntries(), readEntries(t, fastLog)...))
		if !slices.Equal(res.Tokens.IDs, want.Tokens.IDs) || !slices.Equal(res.Tokens.Logprobs, want.Tokens.Logprobs) {
			t.Fatalf("%s: tokens differ from a rollout never moved", id)
		}
		for _, turn := range res.Turns {
			if len(turn.Backends) > 1 {
				moved++
			}
		}
	}
	var bs struct {
		Backends []backend.Status `json:"backends"`
	}
	e.do("GET", "/v1/backends", nil).json(t, &bs)
	var evacuations int64
	for _, b := range bs.Backends {
		evacuations += b.Evacuations
	}
	if evacuations == 0 || moved == 0 {
		t.Fatalf("%d evacuations, %d turns continued on another backend", evacuations, moved)
	}
	t.Logf("%d evacuations; %d turns continued on the fast backend", evacuations, moved)
}

// The same evacuation against a real inference engine spoken to as SGLang
// (llama.cpp behind scripts/llamacpp/server.mjs, two servers, one slowed):
// the slow backend's generations are aborted through SGLang's
// /abort_request {"abort_all": true} with their tokens kept and continue
// on the fast one; every span's ids and logprobs are exactly what one of
// the engines returned for that span's request.
func TestEvacuationSGLangLlamaCpp(t *testing.T) {
	modelDir := filepath.Join(testmodels.Dir(t), "tiny-gpt2-llama")
	slow, slowLog := startLlamaCppWith(t, modelDir, false, "--token-delay-ms", "100", "--slots", "4")
	fast, fastLog := startLlamaCppWith(t, modelDir, false, "--slots", "4")
	e := newEnv(t, envOpts{extraTOML: "[tokenizer]\nmodel_dir = \"" + modelDir + "\"\n"})
	e.startHost()
	e.register(map[string]any{"url": slow, "protocol": "sglang", "weight": 1, "slots": 4})
	waitHealthy(t, e, 1)
	task := map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}
	sampling := map[string]any{"temperature": 1.0, "max_tokens_per_turn": 80, "seed": 11}
	var sub api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": task, "sampling": sampling, "n": 4, "max_turns": 1}).json(t, &sub)
	waitGenerating(t, e, 4)
	e.register(map[string]any{"url": fast, "protocol": "sglang", "weight": 2, "slots": 4})
	waitHealthy(t, e, 2)
	// A request ending on the fast backend makes the pool look: nothing
	// waits, and it has room for the slow one's generations.
	var ref api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{"task": task, "sampling": sampling, "max_turns": 1}).json(t, &ref)
	e.wait(t, ref.RolloutIDs[0])
	var results []*trajectory.Result
	for _, id := range sub.RolloutIDs {
		results = append(results, e.wait(t, id))
	}
	log := append(readEntries(t, slowLog), readEntries(t, fastLog)...)
	moved := 0
	for _, res := range results {
		id := res.ID
		if res.Status != trajectory.StatusCompleted && res.Status != trajectory.StatusTruncated {
			t.Fatalf("%s: %s %+v", id, res.Status, res.Failure)
		}
		checkTokens(t, res, log)
		for _, turn := range res.Turns {
			if len(turn.Backends) > 1 {
				moved++
			}
		}
	}
	aborts := 0
	for _, en := range readEntries(t, slowLog) {
		if en.Path == "/abort_request" {
			aborts++
		}
	}
	if aborts == 0 || moved == 0 {
		t.Fatalf("%d aborts through /abort_request, %d turns continued on another backend", aborts, moved)
	}
	t.Logf("%d aborts through SGLang's /abort_request; %d turns continued on the fast backend", aborts, moved)
}
