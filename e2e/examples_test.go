package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/trajectory"
)

// exampleTasks reads a domain's bundled tasks (examples/DOMAIN/tasks.jsonl).
func exampleTasks(t *testing.T, domain string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", domain, "tasks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// runExamples submits every task of tasks to domain, n samples each, and
// checks each rollout: completed, tokens exact, and rewarded exactly when
// the simulator's scripted decision was to answer right. It returns the
// results and how many were right and wrong.
func runExamples(t *testing.T, e *env, domain, tasks string, n int, seed int64) (results []*trajectory.Result, right, wrong int) {
	t.Helper()
	var reqs []any
	for _, line := range strings.Split(strings.TrimSpace(tasks), "\n") {
		var task map[string]any
		if err := json.Unmarshal([]byte(line), &task); err != nil {
			t.Fatal(err)
		}
		task["domain"] = domain
		reqs = append(reqs, map[string]any{"task": task, "n": n, "sampling": map[string]any{"seed": seed}})
	}
	var batch struct {
		Groups []api.SubmitResponse `json:"groups"`
	}
	r := e.do("POST", "/v1/rollouts:batch", map[string]any{"requests": reqs})
	if r.code != 202 {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	r.json(t, &batch)
	for _, g := range batch.Groups {
		for _, id := range g.RolloutIDs {
			res := e.wait(t, id)
			if res.Status != trajectory.StatusCompleted {
				t.Fatalf("%s: %s %+v", id, res.Status, res.Failure)
			}
			correct := checkTokens(t, res, e.simEntries())
			if (res.Reward == 1) != correct {
				t.Fatalf("%s (%s): reward %v but the simulator answered correct=%v: %s", id, res.TaskID, res.Reward, correct, res.Info)
			}
			if correct {
				right++
			} else {
				wrong++
			}
			results = append(results, res)
		}
	}
	if right == 0 || wrong == 0 {
		t.Fatalf("right %d, wrong %d: the run did not exercise both outcomes", right, wrong)
	}
	return results, right, wrong
}
