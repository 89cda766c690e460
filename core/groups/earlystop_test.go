package groups

import (
	"fmt"
	"testing"

	"github.com/hashicorp/go-hclog"

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
			st, path := openBolt(t)
			p := New(hclog.NewNullLogger())
			rollout := func(i int, key string) Member {
				return Member{ID: fmt.Sprint("r-", i), Group: "g", EarlyMin: tc.min, EarlyKey: key}
			}
			for i := range 4 {
				p.Track(rollout(i, "r-0"))
			}
			if tc.legacy {
				if err := st.Submit(nil, &store.Keyed{Key: earlyKey("r-0"), Sub: store.Submission{Note: []byte(`{"usable":1}`)}}); err != nil {
					t.Fatal(err)
				}
			} else {
				finishFor(t, p, st, rollout(0, "r-0"), scored(1))
				finishFor(t, p, st, rollout(1, "r-0"), &trajectory.Result{Status: trajectory.StatusFailed})
			}
			var unfinished []Member
			for i := 2; i < 4; i++ {
				unfinished = append(unfinished, rollout(i, tc.key))
			}
			st = reopen(t, st, path)
			q := New(hclog.NewNullLogger())
			reached := q.restoreEarly(st, unfinished)
			e := q.early["g"]
			if e.usable != tc.usable || (len(reached) == 1) != tc.reachedAtStart {
				t.Fatalf("resumed %d usable, reached %d; want %d, %v", e.usable, len(reached), tc.usable, tc.reachedAtStart)
			}
			if tc.reachedAtStart {
				return
			}
			for _, m := range unfinished {
				q.Track(m)
			}
			stop, usable := q.finishEarly(unfinished[0], scored(0))
			if stop != (tc.usable+1 >= tc.min) {
				t.Fatalf("after one more usable result stop = %v (usable %d of %d)", stop, usable, tc.min)
			}
		})
	}
}
