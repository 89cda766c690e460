package groups

import (
	"testing"

	"github.com/prorl/prorl/core/trajectory"
)

// TestUsable: only a finished rollout with a token to train on counts
// towards early stop, so a policy cannot end its group's sampling with
// rollouts that give the trainer nothing (failed, cancelled, or finished
// without a generated token).
func TestUsable(t *testing.T) {
	gen := trajectory.Tokens{IDs: []int{1, 2, 3}, LossMask: []int8{0, 0, 1}, Logprobs: []float64{0, 0, -1}, PromptLen: 2}
	none := trajectory.Tokens{IDs: []int{1, 2}, LossMask: []int8{0, 0}, Logprobs: []float64{0, 0}, PromptLen: 2}
	for _, c := range []struct {
		name   string
		status trajectory.Status
		tokens trajectory.Tokens
		want   bool
	}{
		{"completed with a generated token", trajectory.StatusCompleted, gen, true},
		{"truncated with a generated token", trajectory.StatusTruncated, gen, true},
		{"completed, nothing generated", trajectory.StatusCompleted, none, false},
		{"truncated, nothing generated", trajectory.StatusTruncated, none, false},
		{"completed, no tokens at all", trajectory.StatusCompleted, trajectory.Tokens{}, false},
		{"failed with tokens", trajectory.StatusFailed, gen, false},
		{"cancelled with tokens", trajectory.StatusCancelled, gen, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Usable(&trajectory.Result{Status: c.status, Tokens: c.tokens}); got != c.want {
				t.Fatalf("Usable = %v, want %v", got, c.want)
			}
		})
	}
}
