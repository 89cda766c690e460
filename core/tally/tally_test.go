package tally

import (
	"testing"

	"github.com/prorl/prorl/core/trajectory"
)

func TestTally(t *testing.T) {
	var ta Tally
	results := []*trajectory.Result{
		{ID: "a", Domain: "math", Status: trajectory.StatusCompleted, Reward: 1},
		{ID: "b", Domain: "math", Status: trajectory.StatusCompleted, Reward: 0.25, Metrics: map[string]float64{"health_loop": 1, "template_mismatch_turns": 2}},
		{ID: "c", Domain: "swe", Status: trajectory.StatusFailed, Failure: &trajectory.Failure{Reason: "sandbox_failed"}, Timing: trajectory.Timing{InitMS: 61000}},
		{ID: "d", Domain: "swe", Status: trajectory.StatusTruncated, Reward: -1, Failure: &trajectory.Failure{Reason: "max_turns"}, Metrics: map[string]float64{"health_runaway_generation": 1}},
	}
	for _, r := range results {
		ta.Add(r)
	}
	s := ta.Snapshot()
	if s.Finished != 4 || s.ByReason["completed"] != 2 || s.ByReason["failed/sandbox_failed"] != 1 || s.ByReason["truncated/max_turns"] != 1 {
		t.Fatalf("by reason %+v", s.ByReason)
	}
	if h := s.Rewards["math"]; h[1+9] != 1 || h[1+2] != 1 {
		t.Fatalf("math rewards %v", h)
	}
	if h := s.Rewards["swe"]; h[0] != 1 {
		t.Fatalf("swe rewards %v (a failed rollout has no reward; -1 is below 0)", h)
	}
	want := map[string]uint64{"loop": 1, "template_mismatch": 1, "slow_init": 1, "runaway_generation": 1}
	for k, v := range want {
		if s.Health[k] != v {
			t.Errorf("health %s = %d, want %d", k, s.Health[k], v)
		}
	}
	completed := uint64(0) // the adds may straddle a bucket boundary
	for _, b := range s.Timeline {
		completed += b.Counts["completed"]
	}
	if len(s.Timeline) == 0 || len(s.Timeline) > 2 || completed != 2 {
		t.Fatalf("timeline %+v", s.Timeline)
	}
	if r := ta.Recent(); len(r) != 4 || r[0].ID != "d" || len(r[1].Health) != 1 || r[1].Health[0] != "slow_init" {
		t.Fatalf("recent %+v", r)
	}
}
