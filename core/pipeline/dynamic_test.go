package pipeline

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/core/trajectory"
)

// bareTallies is the part of a pipeline that keeps the groups' tallies.
func bareTallies(st store.Store) *Pipeline {
	return &Pipeline{d: Deps{Store: st, Log: hclog.NewNullLogger()}, dynamic: map[string]*dynBatch{}, early: map[string]*earlyStop{}, active: map[string]*Rollout{}}
}

// dynRollout is rollout i of group g (of 4) in batch "d".
func dynRollout(g string, i, k int) *Rollout {
	return &Rollout{ID: fmt.Sprintf("%s-%d", g, i), Req: Request{GroupID: g, Index: i, GroupSize: 4, Dynamic: "d", DynamicK: k}}
}

func scored(reward float64) *trajectory.Result {
	return &trajectory.Result{Status: trajectory.StatusCompleted, Reward: reward, Tokens: trajectory.Tokens{LossMask: []int8{0, 1}}}
}

// TestDynamicTallyResumes: a dynamic batch's tally, stored as it changes,
// is what a pipeline restarted after a crash resumes from — groups
// finished informative before it count, and groups cut in half finish
// counting — so the batch stops at its k informative groups as if nothing
// had happened, and never before.
func TestDynamicTallyResumes(t *testing.T) {
	// Rewards of each group's finished rollouts before the crash (of 4).
	before := map[string][]float64{"A": {0, 1, 1, 0}, "B": {1, 1, 1, 1}, "C": {0, 1}, "D": {1}, "E": nil}
	for _, tc := range []struct {
		name string
		k    int
		// unsaved drops the tally's last write: the crash came between a
		// result and its tally.
		unsaved, damaged bool
		informative      int
		groups           map[string]groupTally
		reachedAtStart   bool
		// the rewards of C's two last rollouts, and whether the batch then has its k
		rest    []float64
		reached bool
	}{
		{name: "resumed", k: 2, informative: 1,
			groups: map[string]groupTally{"C": {4, 2, 2, 0, 1}, "D": {4, 1, 1, 1, 1}, "E": {Size: 4}},
			rest:   []float64{1, 1}, reached: true},
		{name: "k already reached", k: 1, informative: 1, reachedAtStart: true,
			groups: map[string]groupTally{"C": {4, 2, 2, 0, 1}, "D": {4, 1, 1, 1, 1}, "E": {Size: 4}}},
		{name: "the last result's tally lost", k: 2, unsaved: true, informative: 1,
			// D's one result counts as finished, its reward unknown.
			groups: map[string]groupTally{"C": {4, 2, 2, 0, 1}, "D": {Size: 4, Done: 1}, "E": {Size: 4}},
			rest:   []float64{1, 1}, reached: true},
		{name: "damaged tally", k: 2, damaged: true, informative: 0,
			groups: map[string]groupTally{"C": {Size: 4, Done: 2}, "D": {Size: 4, Done: 1}, "E": {Size: 4}},
			rest:   []float64{0, 1}, reached: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := store.NewMemory(10)
			p := bareTallies(st)
			var unfinished []Request
			var lost *store.Submission // the tally before D's result
			p.mu.Lock()
			for _, g := range []string{"A", "B", "C", "D", "E"} {
				for i := range 4 {
					p.trackDynamic(dynRollout(g, i, tc.k))
				}
			}
			p.mu.Unlock()
			for _, g := range []string{"A", "B", "C", "D", "E"} {
				for i := range 4 {
					r := dynRollout(g, i, tc.k)
					if i >= len(before[g]) {
						unfinished = append(unfinished, r.Req)
						continue
					}
					if tc.unsaved && g == "D" {
						prev, _ := st.Idempotent(dynKey("d"))
						lost = &prev
					}
					p.mu.Lock()
					b, _ := p.untrackDynamic(r, scored(before[g][i]))
					p.mu.Unlock()
					p.saveDynamic(b)
				}
			}
			if lost != nil {
				if err := st.Submit(nil, &store.Keyed{Key: dynKey("d"), Replace: true, Sub: *lost}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.damaged {
				if err := st.Submit(nil, &store.Keyed{Key: dynKey("d"), Replace: true, Sub: store.Submission{Note: []byte(`{"k":`)}}); err != nil {
					t.Fatal(err)
				}
			}
			q := bareTallies(st)
			q.mu.Lock()
			reached := q.restoreDynamic(unfinished)
			b := q.dynamic["d"]
			q.mu.Unlock()
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
			q.mu.Lock()
			for _, r := range unfinished {
				q.trackDynamic(&Rollout{Req: r})
			}
			var done bool
			for i, reward := range tc.rest {
				_, done = q.untrackDynamic(dynRollout("C", 2+i, tc.k), scored(reward))
			}
			q.mu.Unlock()
			if done != tc.reached {
				t.Fatalf("after C's last two rollouts the batch has its k: %v, want %v", done, tc.reached)
			}
		})
	}
}

// slowKeys is a store whose key writes take a while, so tally writes
// overlap.
type slowKeys struct{ *store.Memory }

func (s slowKeys) Submit(ps []store.Pending, key *store.Keyed) error {
	time.Sleep(time.Millisecond)
	return s.Memory.Submit(ps, key)
}

// TestDynamicTallyLastWriteWins: tally writes from many finishing
// rollouts coalesce, and what is stored at the end is the final tally,
// not one a slower writer overtook.
func TestDynamicTallyLastWriteWins(t *testing.T) {
	st := slowKeys{store.NewMemory(10)}
	p := bareTallies(st)
	const groups = 16
	p.mu.Lock()
	for g := range groups {
		for i := range 4 {
			p.trackDynamic(dynRollout(fmt.Sprint(g), i, groups+1))
		}
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for g := range groups {
		for i := range 3 { // each group keeps one rollout unfinished
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.mu.Lock()
				b, _ := p.untrackDynamic(dynRollout(fmt.Sprint(g), i, groups+1), scored(float64(i%2)))
				p.mu.Unlock()
				p.saveDynamic(b)
			}()
		}
	}
	wg.Wait()
	sub, ok := st.Idempotent(dynKey("d"))
	if !ok {
		t.Fatal("no tally stored")
	}
	var rec dynRecord
	if err := json.Unmarshal(sub.Note, &rec); err != nil {
		t.Fatal(err)
	}
	want := groupTally{Size: 4, Done: 3, Usable: 3, Lo: 0, Hi: 1}
	if len(rec.Groups) != groups {
		t.Fatalf("stored %d groups under way, want %d: %s", len(rec.Groups), groups, sub.Note)
	}
	for id, g := range rec.Groups {
		if *g != want {
			t.Fatalf("group %s stored as %+v, want %+v", id, *g, want)
		}
	}
}
