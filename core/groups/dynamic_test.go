package groups

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/core/trajectory"
)

// dynRollout is rollout i of group g (of 4) in batch "d".
func dynRollout(g string, i, k int) Member {
	return Member{ID: fmt.Sprintf("%s-%d", g, i), Group: g, Size: 4, Batch: "d", K: k}
}

func scored(reward float64) *trajectory.Result {
	return &trajectory.Result{Status: trajectory.StatusCompleted, Reward: reward, Tokens: trajectory.Tokens{LossMask: []int8{0, 1}}}
}

// finishFor stores m's result as the pipeline does (with its marks), then
// counts it.
func finishFor(t *testing.T, r *Rules, st store.Store, m Member, res *trajectory.Result) []Cut {
	t.Helper()
	res.ID, res.GroupID = m.ID, m.Group
	res.Marks = append(res.Marks, Marks(m, res)...)
	if err := st.Finish(res); err != nil {
		t.Fatal(err)
	}
	return r.Finish(m, res)
}

// openBolt opens a durable store in a fresh file.
func openBolt(t *testing.T) (store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.db")
	b, err := store.OpenBolt(path, 100)
	if err != nil {
		t.Fatal(err)
	}
	return b, path
}

// reopen closes a durable store and opens its file again, as a restarted
// host does.
func reopen(t *testing.T, st store.Store, path string) store.Store {
	t.Helper()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := store.OpenBolt(path, 100)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestDynamicTallyResumes: a dynamic batch's tally, stored result by
// result with each result's mark in its transaction, is what a pipeline
// restarted on the same store file resumes from — groups finished
// informative before the crash count, and groups cut in half finish
// counting, the last result's reward included — so the batch stops at its
// k informative groups as if nothing had happened, and never before.
func TestDynamicTallyResumes(t *testing.T) {
	// Rewards of each group's finished rollouts before the crash (of 4).
	before := map[string][]float64{"A": {0, 1, 1, 0}, "B": {1, 1, 1, 1}, "C": {0, 1}, "D": {1}, "E": nil}
	for _, tc := range []struct {
		name string
		k    int
		// legacy: the host before marks stored this tally record instead.
		legacy         *dynRecord
		informative    int
		groups         map[string]groupTally
		reachedAtStart bool
		// the rewards of C's two last rollouts, and whether the batch then has its k
		rest    []float64
		reached bool
	}{
		{name: "resumed", k: 2, informative: 1,
			// D's one result is the last stored before the crash: its reward
			// counts (a tally written after it could have lost it).
			groups: map[string]groupTally{"C": {4, 2, 2, 0, 1}, "D": {4, 1, 1, 1, 1}, "E": {Size: 4}},
			rest:   []float64{1, 1}, reached: true},
		{name: "k already reached", k: 1, informative: 1, reachedAtStart: true,
			groups: map[string]groupTally{"C": {4, 2, 2, 0, 1}, "D": {4, 1, 1, 1, 1}, "E": {Size: 4}}},
		{name: "only an older host's record", k: 2, informative: 1,
			legacy: &dynRecord{Informative: 1, Groups: map[string]*groupTally{"C": {4, 2, 2, 0, 1}}},
			// D's result was stored after the record's last write: finished, reward unknown.
			groups: map[string]groupTally{"C": {4, 2, 2, 0, 1}, "D": {Size: 4, Done: 1}, "E": {Size: 4}},
			rest:   []float64{1, 1}, reached: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, path := openBolt(t)
			p := New(hclog.NewNullLogger())
			var unfinished []Member
			for _, g := range []string{"A", "B", "C", "D", "E"} {
				for i := range 4 {
					p.Track(dynRollout(g, i, tc.k))
				}
			}
			for _, g := range []string{"A", "B", "C", "D", "E"} {
				for i := range 4 {
					r := dynRollout(g, i, tc.k)
					if i >= len(before[g]) {
						unfinished = append(unfinished, r)
						continue
					}
					res := scored(before[g][i])
					if tc.legacy != nil {
						// Stored as an older host did: no marks.
						res.ID, res.GroupID = r.ID, g
						if err := st.Finish(res); err != nil {
							t.Fatal(err)
						}
						continue
					}
					finishFor(t, p, st, r, res)
				}
			}
			if tc.legacy != nil {
				note, _ := json.Marshal(tc.legacy)
				if err := st.Submit(nil, &store.Keyed{Key: dynKey("d"), Replace: true, Sub: store.Submission{Note: note}}); err != nil {
					t.Fatal(err)
				}
			}
			st = reopen(t, st, path)
			q := New(hclog.NewNullLogger())
			reached := q.restoreDynamic(st, unfinished)
			b := q.dynamic["d"]
			if (len(reached) == 1) != tc.reachedAtStart {
				t.Fatalf("reached at restart: %v, want %v", reached, tc.reachedAtStart)
			}
			got := map[string]groupTally{}
			for id, g := range b.groups {
				got[id] = *g
			}
			if b.informative != tc.informative || !reflect.DeepEqual(got, tc.groups) {
				t.Fatalf("resumed %d informative, groups %+v; want %d, %+v", b.informative, got, tc.informative, tc.groups)
			}
			if tc.reachedAtStart {
				return
			}
			for _, r := range unfinished {
				q.Track(r)
			}
			var done bool
			for i, reward := range tc.rest {
				done = q.finishDynamic(dynRollout("C", 2+i, tc.k), scored(reward))
			}
			if done != tc.reached {
				t.Fatalf("after C's last two rollouts the batch has its k: %v, want %v", done, tc.reached)
			}
		})
	}
}

// TestDynamicTallyDamagedMark: a mark that does not decode counts its
// result as finished and unusable; the others still count.
func TestDynamicTallyDamagedMark(t *testing.T) {
	st := store.NewMemory(10)
	p := New(hclog.NewNullLogger())
	for i := range 4 {
		p.Track(dynRollout("C", i, 2))
	}
	finishFor(t, p, st, dynRollout("C", 0, 2), scored(0))
	finishFor(t, p, st, dynRollout("C", 1, 2), scored(1))
	// Memory keeps a key's note as given: this one is not JSON.
	if err := st.Submit(nil, &store.Keyed{Key: dynKey("d") + "/C-1", Replace: true, Sub: store.Submission{Note: []byte(`{"group":`)}}); err != nil {
		t.Fatal(err)
	}
	q := New(hclog.NewNullLogger())
	q.restoreDynamic(st, []Member{dynRollout("C", 2, 2), dynRollout("C", 3, 2)})
	got := *q.dynamic["d"].groups["C"]
	if want := (groupTally{Size: 4, Done: 2, Usable: 1, Lo: 0, Hi: 0}); got != want {
		t.Fatalf("resumed %+v, want %+v", got, want)
	}
}
