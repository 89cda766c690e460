package agent

import (
	"testing"

	"github.com/prorl/prorl/core/engine"
	"github.com/prorl/prorl/core/trajectory"
)

// TestTurnKeepsWhatTheBackendGave: a generation's tokens go into the
// sequence scored, its logprobs with them (zeros where a backend gave
// none, so the arrays stay aligned), while the turn's record keeps the
// logprobs as given, so the result can say the sample is not the policy's
// numbers (mask_sample) instead of passing zeros off as them.
func TestTurnKeepsWhatTheBackendGave(t *testing.T) {
	for _, tc := range []struct {
		name     string
		g        engine.GenerateResult
		aligned  bool
		logprobs []float64
	}{
		{"with logprobs", engine.GenerateResult{IDs: []int{7, 8}, Logprobs: []float64{-0.5, -1}, FinishReason: "stop"}, true, []float64{0, -0.5, -1}},
		{"without", engine.GenerateResult{IDs: []int{7, 8}, FinishReason: "stop"}, false, []float64{0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk := trajectory.Tokens{}
			AppendUnscored(&tk, []int{1})
			span := AppendGenerated(&tk, &tc.g)
			if *span != [2]int{1, 3} || len(tk.IDs) != 3 || len(tk.LossMask) != 3 || len(tk.Logprobs) != 3 || tk.LossMask[0] != 0 || tk.LossMask[2] != 1 {
				t.Fatalf("span %v, tokens %+v", *span, tk)
			}
			for i, lp := range tc.logprobs {
				if tk.Logprobs[i] != lp {
					t.Fatalf("logprobs %v, want %v", tk.Logprobs, tc.logprobs)
				}
			}
			var turn trajectory.Turn
			Record(&turn, &tc.g, []string{"b1", "b2"}, 3)
			if got := len(turn.Logprobs) == len(turn.ResponseIDs); got != tc.aligned {
				t.Fatalf("turn logprobs %v for %d tokens", turn.Logprobs, len(turn.ResponseIDs))
			}
			if turn.Backend != "b2" || len(turn.Backends) != 2 || turn.PolicyVersion != 3 {
				t.Fatalf("turn %+v", turn)
			}
		})
	}
}
