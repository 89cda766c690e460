package pipeline

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/core/trajectory"
)

// sandboxless is a fixture whose math domain asks every task for a
// sandbox on a host with none: each attempt ends sandbox_failed at init,
// an infrastructure failure that never heals.
func sandboxless(t *testing.T) *fixture {
	t.Helper()
	f := newWithPlugin(t, map[string]any{"python": true}, nil, sim(0))
	f.p.Start()
	return f
}

// TestRetryWithinBudget: an infrastructure failure is run again as a new
// attempt of the same rollout until its reason's budget is spent; the
// result then says so, with every attempt's end, and is no sample.
func TestRetryWithinBudget(t *testing.T) {
	cases := []struct {
		name   string
		retry  *Retry
		tries  int // attempts made
		reason string
	}{
		{"no retry policy", nil, 1, trajectory.ReasonSandboxFailed},
		{"budget 0 for the reason", &Retry{Budget: map[string]int{"backend_unavailable": 3}, Deadline: time.Minute}, 1, ""},
		{"budget 2", &Retry{Budget: map[string]int{"sandbox_failed": 2}, Deadline: time.Minute}, 3, ""},
	}
	f := sandboxless(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs := f.submit(t, 1, func(rq *Request) { rq.Retry = c.retry })
			res := f.result(t, rs[0])
			if res.Status != trajectory.StatusFailed || res.Failure.Reason != trajectory.ReasonSandboxFailed || res.Sample != trajectory.SampleInfrastructure {
				t.Fatalf("result %s %+v %s", res.Status, res.Failure, res.Sample)
			}
			if res.Attempt != c.tries || len(res.Attempts) != c.tries-1 {
				t.Fatalf("attempt %d with %d earlier, want %d attempts", res.Attempt, len(res.Attempts), c.tries)
			}
			for i, a := range res.Attempts {
				if a.Attempt != i+1 || a.Reason != trajectory.ReasonSandboxFailed || a.Stage != trajectory.StageInit || a.StartedAt.IsZero() || a.EndedAt.Before(a.StartedAt) {
					t.Errorf("attempt %d: %+v", i+1, a)
				}
			}
			if res.ID != rs[0].ID || res.SampleIndex != 0 {
				t.Fatalf("a retry changed the sample's identity: %s %d", res.ID, res.SampleIndex)
			}
		})
	}
}

// TestRetryDeadline: no attempt starts after the sample's deadline, however
// much budget is left.
func TestRetryDeadline(t *testing.T) {
	f := sandboxless(t)
	rs := f.submit(t, 1, func(rq *Request) {
		rq.Retry = &Retry{Budget: map[string]int{"sandbox_failed": 10}, Deadline: time.Nanosecond}
	})
	if res := f.result(t, rs[0]); res.Attempt != 1 || len(res.Attempts) != 0 {
		t.Fatalf("attempt %d after the deadline (%d earlier)", res.Attempt, len(res.Attempts))
	}
}

// TestDropIncompleteGroup: with incomplete_group "drop", a sample that
// ends with no trainable result cancels the rest of its group (reason
// group_dropped); with "return" the others run on.
func TestDropIncompleteGroup(t *testing.T) {
	for _, drop := range []bool{false, true} {
		t.Run(map[bool]string{false: "return", true: "drop"}[drop], func(t *testing.T) {
			// The others generate slowly: still running when sample 0 is refused.
			f := newFixture(t, nil, sim(50*time.Millisecond))
			rs := f.submit(t, 4, func(rq *Request) {
				rq.DropIncomplete = drop
				rq.Retry = &Retry{Budget: map[string]int{}, Deadline: time.Minute}
				if rq.Index == 0 {
					rq.Task = []byte(`{"domain":"math","question":"no answer"}`) // the domain refuses it
				}
			})
			dropped := 0
			for _, r := range rs[1:] {
				res := f.result(t, r)
				if res.Status == trajectory.StatusCancelled && res.Failure.Reason == trajectory.ReasonGroupDropped {
					dropped++
					if !strings.Contains(res.Failure.Message, "sample 0") {
						t.Errorf("group_dropped without its cause: %q", res.Failure.Message)
					}
				}
			}
			if first := f.result(t, rs[0]); first.Sample != trajectory.SampleInvalidTask {
				t.Fatalf("sample 0: %s %+v", first.Sample, first.Failure)
			}
			if want := map[bool]int{false: 0, true: 3}[drop]; dropped != want {
				t.Fatalf("%d of 3 others cancelled as group_dropped, want %d", dropped, want)
			}
		})
	}
}

// TestAttemptsSurviveRestart: a sample's failed attempts are on record in
// the store; a host restarted before it finished reports them, adds the
// attempt its stop cut short (interrupted), and counts them against the
// budgets: with sandbox_failed's budget spent before the restart, the
// next failure is the result.
func TestAttemptsSurviveRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prorl.db")
	b, err := store.OpenBolt(path, 100)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	rq := Request{GroupID: "g", Domain: "math", Task: mathTask(), Timeout: time.Minute,
		Retry: &Retry{Budget: map[string]int{"sandbox_failed": 2, "interrupted": 2}, Deadline: time.Hour}}
	raw, _ := json.Marshal(rq)
	now := time.Now()
	earlier := []trajectory.Attempt{
		{Attempt: 1, Stage: "init", Reason: "sandbox_failed", StartedAt: now, EndedAt: now},
		{Attempt: 2, Stage: "init", Reason: "sandbox_failed", StartedAt: now, EndedAt: now},
	}
	if err := b.Submit([]store.Pending{{ID: "r-1", Attempt: 3, Request: raw, SubmittedAt: now, Attempts: earlier}}, nil); err != nil {
		t.Fatal(err)
	}
	f := newWithPlugin(t, map[string]any{"python": true}, nil, sim(0), func(d *Deps) { d.Store = b })
	if rerun, _, _, err := f.p.Recover("rerun"); err != nil || rerun != 1 {
		t.Fatalf("recover: %d %v", rerun, err)
	}
	f.p.Start()
	r, ok := f.p.Lookup("r-1")
	if !ok {
		t.Fatal("not running again")
	}
	<-r.Done()
	res, _ := b.Get("r-1")
	if res == nil || res.Failure == nil || res.Failure.Reason != trajectory.ReasonSandboxFailed || res.Attempt != 4 {
		t.Fatalf("after the restart: %+v", res)
	}
	var reasons []string
	for _, a := range res.Attempts {
		reasons = append(reasons, a.Reason)
	}
	if want := []string{"sandbox_failed", "sandbox_failed", "interrupted"}; !slices.Equal(reasons, want) {
		t.Fatalf("attempts %v, want %v", reasons, want)
	}
}
