package pipeline

import (
	"fmt"
	"testing"

	"github.com/prorl/prorl/core/store"
)

// TestEarlyStopTallyResumes: an early-stop group's usable count, stored
// as it grows under the group's own key, is what a restarted pipeline
// resumes; a later group reusing the group id does not inherit it.
func TestEarlyStopTallyResumes(t *testing.T) {
	for _, tc := range []struct {
		name           string
		min            int
		key            string // the restarted group's key
		usable         int
		reachedAtStart bool
	}{
		{name: "resumed", min: 2, key: "r-0", usable: 1},
		{name: "reached", min: 1, key: "r-0", usable: 1, reachedAtStart: true},
		{name: "the group id reused", min: 2, key: "r-9", usable: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := store.NewMemory(10)
			p := bareTallies(st)
			rollout := func(i int, key string) *Rollout {
				return &Rollout{ID: fmt.Sprint("r-", i), Req: Request{GroupID: "g", Index: i, EarlyStopMin: tc.min, EarlyKey: key}}
			}
			p.mu.Lock()
			for i := range 4 {
				p.track(rollout(i, "r-0"))
			}
			u := p.untrack(rollout(0, "r-0"), scored(1))
			p.mu.Unlock()
			if u.early == nil {
				t.Fatal("a usable result did not change the tally")
			}
			p.saveEarly(u.early)
			var unfinished []Request
			for i := 1; i < 4; i++ {
				unfinished = append(unfinished, rollout(i, tc.key).Req)
			}
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
			u = q.untrack(&Rollout{ID: "x1", Req: unfinished[0]}, scored(0))
			q.mu.Unlock()
			if u.stop != (tc.usable+1 >= tc.min) {
				t.Fatalf("after one more usable result stop = %v (usable %d of %d)", u.stop, u.usable, tc.min)
			}
		})
	}
}
