package pipeline

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/core/trajectory"
)

// TestEarlyStopTallyResumes: an early-stop group's usable count, stored
// result by result as marks under the group's own key, is what a pipeline
// restarted on the same store file resumes; an unusable result does not
// count; a later group reusing the group id does not inherit it; a group
// under way when an older host (a tally record, no marks) stopped resumes
// from that record.
func TestEarlyStopTallyResumes(t *testing.T) {
	for _, tc := range []struct {
		name           string
		min            int
		key            string // the restarted group's key
		legacy         bool
		usable         int
		reachedAtStart bool
	}{
		{name: "resumed", min: 2, key: "r-0", usable: 1},
		{name: "reached", min: 1, key: "r-0", usable: 1, reachedAtStart: true},
		{name: "the group id reused", min: 2, key: "r-9", usable: 0},
		{name: "only an older host's record", min: 2, key: "r-0", legacy: true, usable: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store.db")
			var st store.Store
			st, err := store.OpenBolt(path, 100)
			if err != nil {
				t.Fatal(err)
			}
			p := bareTallies(st)
			rollout := func(i int, key string) *Rollout {
				return &Rollout{ID: fmt.Sprint("r-", i), Req: Request{GroupID: "g", Index: i, EarlyStopMin: tc.min, EarlyKey: key}}
			}
			p.mu.Lock()
			for i := range 4 {
				p.track(rollout(i, "r-0"))
			}
			p.mu.Unlock()
			if tc.legacy {
				if err := st.Submit(nil, &store.Keyed{Key: earlyKey("r-0"), Sub: store.Submission{Note: []byte(`{"usable":1}`)}}); err != nil {
					t.Fatal(err)
				}
			} else {
				finishFor(p, rollout(0, "r-0"), scored(1))
				finishFor(p, rollout(1, "r-0"), &trajectory.Result{Status: trajectory.StatusFailed})
			}
			var unfinished []Request
			for i := 2; i < 4; i++ {
				unfinished = append(unfinished, rollout(i, tc.key).Req)
			}
			st = reopen(t, st, path)
			q := bareTallies(st)
			q.mu.Lock()
			reached := q.restoreEarly(unfinished)
			e := q.early["g"]
			q.mu.Unlock()
			if e.usable != tc.usable || (len(reached) == 1) != tc.reachedAtStart {
				t.Fatalf("resumed %d usable, reached %d; want %d, %v", e.usable, len(reached), tc.usable, tc.reachedAtStart)
			}
			if tc.reachedAtStart {
				return
			}
			q.mu.Lock()
			for _, rq := range unfinished {
				q.track(&Rollout{ID: fmt.Sprint("x", rq.Index), Req: rq})
			}
			u := q.untrack(&Rollout{ID: fmt.Sprint("x", unfinished[0].Index), Req: unfinished[0]}, scored(0))
			q.mu.Unlock()
			if u.stop != (tc.usable+1 >= tc.min) {
				t.Fatalf("after one more usable result stop = %v (usable %d of %d)", u.stop, u.usable, tc.min)
			}
		})
	}
}
