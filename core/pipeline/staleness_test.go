package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/prorl/prorl/core/trajectory"
)

// waitGenerated waits until every rollout has generated under the policy.
func waitGenerated(t *testing.T, rs []*Rollout) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, r := range rs {
		for r.oldest.Load() == noToken {
			if time.Now().After(deadline) {
				t.Fatalf("rollout %s never generated", r.ID)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// spansWithin checks that no token span of res is more than bound
// versions behind the version it finished under, and returns that version.
func spansWithin(t *testing.T, res *trajectory.Result, bound int64) int64 {
	t.Helper()
	if res.Staleness == nil {
		t.Fatalf("%s: no staleness on a result with tokens", res.ID)
	}
	oldest := res.Turns[0].PolicyVersion
	finished := oldest + res.Staleness.InFlight
	for _, tu := range res.Turns {
		vs := []int64{tu.PolicyVersion}
		for _, s := range tu.PolicySpans {
			vs = append(vs, s.Version)
		}
		for _, v := range vs {
			if v < oldest {
				t.Errorf("%s: turn %d has a span of version %d, older than its first token's %d", res.ID, tu.Index, v, oldest)
			}
			if finished-v > bound && !res.Stale {
				t.Errorf("%s: a span of version %d returned under version %d, max_staleness %d, not marked stale", res.ID, v, finished, bound)
			}
		}
	}
	return finished
}

// TestMaxStalenessRestart: a sample whose first token the policy left
// more than max_staleness versions behind is run again as a new attempt
// (reason stale); under "mark" it runs on and is returned marked stale.
func TestMaxStalenessRestart(t *testing.T) {
	for _, mode := range []string{"restart", "mark"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, nil, sim(20*time.Millisecond))
			zero := int64(0)
			rs := f.submit(t, 3, func(rq *Request) { rq.MaxStaleness, rq.StaleMode = &zero, mode })
			waitGenerated(t, rs)
			f.p.SetPolicy(1)
			for _, r := range rs {
				res := f.result(t, r)
				if res.Status != trajectory.StatusCompleted {
					t.Fatalf("%s %+v", res.Status, res.Failure)
				}
				switch mode {
				case "restart":
					if len(res.Attempts) != 1 || res.Attempts[0].Reason != ReasonStale || res.Stale || res.Staleness.InFlight != 0 || res.Turns[0].PolicyVersion != 1 {
						t.Fatalf("attempts %+v stale %v staleness %+v first turn's version %d", res.Attempts, res.Stale, res.Staleness, res.Turns[0].PolicyVersion)
					}
				case "mark":
					if len(res.Attempts) != 0 || !res.Stale || res.Staleness.InFlight != 1 || res.Turns[0].PolicyVersion != 0 {
						t.Fatalf("attempts %+v stale %v staleness %+v", res.Attempts, res.Stale, res.Staleness)
					}
				}
			}
		})
	}
}

// TestMaxStalenessAcrossPauses: weight syncs as a trainer makes them
// (pause with abort, resume under the next version), four in a row while
// eight slow samples run with max_staleness 1: no returned token span is
// more than one version behind the policy the sample finished under.
func TestMaxStalenessAcrossPauses(t *testing.T) {
	f := newFixture(t, nil, sim(10*time.Millisecond))
	one := int64(1)
	rs := f.submit(t, 8, func(rq *Request) { rq.MaxStaleness = &one })
	waitGenerated(t, rs[:1])
	for v := int64(1); v <= 4; v++ {
		if _, err := f.p.Pause(context.Background(), true); err != nil {
			t.Fatal(err)
		}
		f.p.Resume(context.Background(), v)
		time.Sleep(150 * time.Millisecond)
	}
	restarted := 0
	for _, r := range rs {
		res := f.result(t, r)
		if res.Status != trajectory.StatusCompleted || res.Stale {
			t.Fatalf("%s %+v stale %v", res.Status, res.Failure, res.Stale)
		}
		spansWithin(t, res, 1)
		for _, a := range res.Attempts {
			if a.Reason == ReasonStale {
				restarted++
			}
		}
	}
	if restarted == 0 {
		t.Fatal("four versions passed over slow samples and none was run again")
	}
	t.Logf("%d restarts for staleness over 8 samples and 4 versions", restarted)
}
