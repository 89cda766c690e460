package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prorl/prorl/core/trajectory"
	bolt "go.etcd.io/bbolt"
)

func TestStores(t *testing.T) {
	for _, name := range []string{"memory", "bolt"} {
		t.Run(name, func(t *testing.T) {
			var m Store = NewMemory(3)
			if name == "bolt" {
				b, err := OpenBolt(filepath.Join(t.TempDir(), "s.db"), 3)
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				m = b
			}
			contract(t, m)
		})
	}
}

func contract(t *testing.T, m Store) {
	base := m.Stats().LastSeq // a fresh store's (FreshSeq)
	if base == 0 {
		t.Fatal("a fresh store's sequence starts at 0, where a cursor from an earlier store would skip its results")
	}
	for i := 0; i < 4; i++ {
		g := "g1"
		if i%2 == 1 {
			g = "g2"
		}
		if err := m.Finish(&trajectory.Result{ID: fmt.Sprint("r", i), GroupID: g}); err != nil {
			t.Fatal(err)
		}
	}
	if st := m.Stats(); st.Finished != 3 || st.Dropped != 1 || st.LastSeq != base+4 {
		t.Fatalf("retention: %+v", st)
	}
	rs, next := m.Finished(Filter{})
	if len(rs) != 3 || rs[0].ID != "r1" || next != base+4 {
		t.Fatalf("finished %v next %d", rs, next)
	}
	rs, _ = m.Finished(Filter{GroupID: "g2"})
	if len(rs) != 2 {
		t.Fatalf("group filter %v", rs)
	}
	rs, next = m.Finished(Filter{Since: base + 2, Limit: 1})
	if len(rs) != 1 || rs[0].ID != "r2" || next != base+3 {
		t.Fatalf("since/limit %v %d", rs, next)
	}
	if n, _ := m.Ack([]string{"r1", "r1", "zz"}); n != 1 {
		t.Fatalf("ack %d", n)
	}
	if _, ok := m.Get("r1"); ok {
		t.Fatal("acked result still served")
	}
	if err := m.Submit(nil, &Keyed{Key: "k", Sub: Submission{GroupID: "a"}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Submit(nil, &Keyed{Key: "k", Sub: Submission{GroupID: "b"}}); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("a key used again: %v", err)
	}
	if s, ok := m.Idempotent("k"); !ok || s.GroupID != "a" {
		t.Fatal("idempotency key overwritten")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() { time.Sleep(10 * time.Millisecond); _ = m.Finish(&trajectory.Result{ID: "late"}) }()
	rs, _ = Wait(ctx, m, Filter{Since: base + 4})
	if len(rs) != 1 || rs[0].ID != "late" {
		t.Fatalf("wait %v", rs)
	}
}

// A key is written with its submission or not at all: after a close (a
// crash, to the file) right after Submit, both are there; a second
// submission under the key writes nothing and is no fault of the store.
func TestSubmitKeyed(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T, path string) Store
	}{
		{"bolt", func(t *testing.T, path string) Store {
			b := openBolt(t, path, 100)
			return b
		}},
		{"memory", func(*testing.T, string) Store { return NewMemory(100) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			st := tc.open(t, path)
			key := &Keyed{Key: "k", Sub: Submission{GroupID: "g", RolloutIDs: []string{"a", "b"}, BodySHA256: "x"}}
			if err := st.Submit([]Pending{{ID: "a", Attempt: 1, Request: []byte(`{}`)}, {ID: "b", Attempt: 1, Request: []byte(`{}`)}}, key); err != nil {
				t.Fatal(err)
			}
			if tc.name == "bolt" {
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
				st = tc.open(t, path)
			}
			defer st.Close()
			if s, ok := st.Idempotent("k"); !ok || s.GroupID != "g" || len(s.RolloutIDs) != 2 || s.BodySHA256 != "x" {
				t.Fatalf("key after submit: %+v %v", s, ok)
			}
			again := &Keyed{Key: "k", Sub: Submission{GroupID: "g2", RolloutIDs: []string{"c"}}}
			if err := st.Submit([]Pending{{ID: "c", Attempt: 1, Request: []byte(`{}`)}}, again); !errors.Is(err, ErrKeyExists) {
				t.Fatalf("second submit under the key: %v", err)
			}
			if s, _ := st.Idempotent("k"); s.GroupID != "g" {
				t.Fatalf("key overwritten: %+v", s)
			}
			if err := st.Healthy(); err != nil {
				t.Fatalf("a refused key faulted the store: %v", err)
			}
			if tc.name == "bolt" {
				un, err := st.Unfinished()
				if err != nil || len(un) != 2 || un[0].ID == "c" || un[1].ID == "c" {
					t.Fatalf("unfinished %+v %v", un, err)
				}
			}
		})
	}
}

// A submission, its result and an idempotency key survive a close and
// reopen (a crash, to the file), and the file passes its integrity check.
func TestBoltDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	b := openBolt(t, path, 100)
	ps := []Pending{{ID: "a", Attempt: 1, Request: []byte(`{"k":1}`)}, {ID: "b", Attempt: 1, Request: []byte(`{"k":2}`)}}
	if err := b.Submit(ps, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(&trajectory.Result{ID: "a", GroupID: "g"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Retry("b", 2, &trajectory.Attempt{Attempt: 1, Stage: "init", Reason: "sandbox_failed"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Submit(nil, &Keyed{Key: "key", Sub: Submission{GroupID: "g", RolloutIDs: []string{"a", "b"}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBolt(t, path, 100)
	defer b.Close()
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	un, err := b.Unfinished()
	if err != nil || len(un) != 1 || un[0].ID != "b" || un[0].Attempt != 2 || string(un[0].Request) != `{"k":2}` ||
		len(un[0].Attempts) != 1 || un[0].Attempts[0].Reason != "sandbox_failed" {
		t.Fatalf("unfinished %+v %v", un, err)
	}
	first := b.Stats().LastSeq
	if r, ok := b.Get("a"); !ok || r.GroupID != "g" || r.Seq != first {
		t.Fatalf("result after reopen: %+v %v", r, ok)
	}
	if s, ok := b.Idempotent("key"); !ok || s.GroupID != "g" {
		t.Fatal("idempotency key lost")
	}
	if st := b.Stats(); st.Finished != 1 || st.LastSeq != first {
		t.Fatalf("stats %+v", st)
	}
	if err := b.Finish(&trajectory.Result{ID: "b"}); err != nil {
		t.Fatal(err)
	}
	if r, _ := b.Get("b"); r.Seq != first+1 {
		t.Fatalf("sequence continues after reopen: %d", r.Seq)
	}
	if _, err := OpenBolt(path, 100); err == nil {
		t.Fatal("a second host opened the same store")
	}
}

// TestBoltResultsShareCommits: results finishing together share a commit,
// each is durable when Finish returns, and Close commits what is in flight.
func TestBoltResultsShareCommits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	b := openBolt(t, path, 1000)
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.Finish(&trajectory.Result{ID: fmt.Sprintf("r%d", i)}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// Goroutines start within microseconds, the batch waits 25 ms: a
	// loaded machine may split them, not into one commit each.
	if c := b.batches.Load(); c >= n/4 {
		t.Fatalf("%d results took %d commits", n, c)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBolt(t, path, 1000)
	defer b.Close()
	if st := b.Stats(); st.Finished != n {
		t.Fatalf("%d results durable, want %d", st.Finished, n)
	}
}

// Results committed out of order are published in order: a reader paging
// with since= never steps over a result that shows up later.
func TestBoltPublishesInOrder(t *testing.T) {
	b, err := OpenBolt(filepath.Join(t.TempDir(), "s.db"), 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const n = 400
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprint("r", i)
				_ = b.Finish(&trajectory.Result{ID: id})
				if _, ok := b.Get(id); !ok {
					t.Errorf("%s not visible when Finish returned", id)
				}
			}()
		}
		wg.Wait()
	}()
	seen := map[string]bool{}
	var since uint64
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(seen) < n {
		rs, next := Wait(ctx, b, Filter{Since: since})
		if ctx.Err() != nil {
			t.Fatalf("saw %d of %d results: a reader stepped over some", len(seen), n)
		}
		for _, r := range rs {
			if seen[r.ID] {
				t.Fatalf("%s twice", r.ID)
			}
			seen[r.ID] = true
		}
		since = next
	}
	<-done
}

// A result held by a fault is written by Close (not run again after a
// restart), and no healer outlives Close, even for a Finish after it.
func TestBoltCloseWritesHeldResults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	b := openBolt(t, path, 1000)
	b.faultMu.Lock()
	b.fault = errors.New("injected: the file refuses writes")
	b.faultMu.Unlock()
	if err := b.Finish(&trajectory.Result{ID: "held"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// After Close: held in memory, its healer gives up at once.
	if err := b.Finish(&trajectory.Result{ID: "late"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { b.healers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a healer still runs after Close")
	}
	b = openBolt(t, path, 1000)
	defer b.Close()
	if st := b.Stats(); st.Finished != 1 {
		t.Fatalf("%d results durable, want the held one", st.Finished)
	}
}

// TestBoltDamagedValue: a value damaged on disk (cut short like `{"\`,
// on which goccy's decoder panics now and then: FuzzFastDecode in
// core/backend) makes opening the store fail with an error that names
// it, never a panic.
func TestBoltDamagedValue(t *testing.T) {
	for _, bucket := range []string{"results", "pending"} {
		t.Run(bucket, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			b := openBolt(t, path, 100)
			if err := b.Submit([]Pending{{ID: "a", Attempt: 1, Request: []byte(`{}`)}, {ID: "b", Attempt: 1, Request: []byte(`{}`)}}, nil); err != nil {
				t.Fatal(err)
			}
			if err := b.Finish(&trajectory.Result{ID: "a"}); err != nil {
				t.Fatal(err)
			}
			b.Close()
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			_ = db.Update(func(tx *bolt.Tx) error {
				c := tx.Bucket([]byte(bucket)).Cursor()
				k, _ := c.First()
				return tx.Bucket([]byte(bucket)).Put(k, []byte(`{"\`))
			})
			db.Close()
			for range 50 { // the panic depended on the memory around the value
				b, err = OpenBolt(path, 100)
				if err == nil {
					_, err = b.Unfinished()
					b.Close()
				}
				if err == nil || !strings.Contains(err.Error(), "not JSON") {
					t.Fatalf("a damaged %s value: %v", bucket, err)
				}
			}
		})
	}
}

// TestDecodeContainsPanics: goccy's decoder panics on `{"\` depending on
// the bytes around it; decode answers an error each time.
func TestDecodeContainsPanics(t *testing.T) {
	for i := range 20000 {
		full := make([]byte, 64)
		copy(full, `{"\`)
		for j := 3; j < 64; j++ {
			full[j] = byte(i*7 + j)
		}
		var p Pending
		var r trajectory.Result
		if decode(full[:3:3], &p) == nil || decode(full[:3:3], &r) == nil {
			t.Fatal("a cut value decoded")
		}
	}
}

// A store that starts empty (a memory store after a restart, a bbolt file
// deleted) numbers its results past every number an earlier one gave, so
// a trainer's cursor from before skips none of them.
func TestFreshStoreSeqPastEarlier(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) Store
	}{
		{"memory", func(*testing.T) Store { return NewMemory(100) }},
		{"bolt, file deleted", func(t *testing.T) Store {
			path := filepath.Join(dir, "s.db")
			_ = os.Remove(path)
			b := openBolt(t, path, 100)
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := tc.open(t)
			for i := range 50 {
				if err := old.Finish(&trajectory.Result{ID: fmt.Sprint("old", i)}); err != nil {
					t.Fatal(err)
				}
			}
			cursor := old.Stats().LastSeq
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond) // the clock FreshSeq reads moves on
			fresh := tc.open(t)
			defer fresh.Close()
			if err := fresh.Finish(&trajectory.Result{ID: "new"}); err != nil {
				t.Fatal(err)
			}
			if rs, _ := fresh.Finished(Filter{Since: cursor}); len(rs) != 1 || rs[0].ID != "new" {
				t.Fatalf("after the earlier store's cursor %d the fresh store serves %v", cursor, rs)
			}
		})
	}
}

// Keys recorded before a time expire; those after stay, and so does a
// key replaced after it (a Polar task resubmitted). A bbolt record from
// before keys had a time gets one at the first sweep, and goes a
// lifetime later, not never.
func TestExpireKeys(t *testing.T) {
	for _, name := range []string{"memory", "bolt"} {
		t.Run(name, func(t *testing.T) {
			var st Store = NewMemory(10)
			if name == "bolt" {
				b, err := OpenBolt(filepath.Join(t.TempDir(), "s.db"), 10)
				if err != nil {
					t.Fatal(err)
				}
				st = b
			}
			defer st.Close()
			if err := st.Submit(nil, &Keyed{Key: "old", Sub: Submission{GroupID: "g1"}}); err != nil {
				t.Fatal(err)
			}
			if err := st.Submit(nil, &Keyed{Key: "task", Sub: Submission{GroupID: "g0"}}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond)
			cutoff := time.Now()
			time.Sleep(2 * time.Millisecond)
			if err := st.Submit(nil, &Keyed{Key: "new", Sub: Submission{GroupID: "g2"}}); err != nil {
				t.Fatal(err)
			}
			if err := st.Submit(nil, &Keyed{Key: "task", Sub: Submission{GroupID: "g0b"}}); !errors.Is(err, ErrKeyExists) {
				t.Fatalf("a second submission under a key: %v, want ErrKeyExists", err)
			}
			if err := st.Submit(nil, &Keyed{Key: "task", Sub: Submission{GroupID: "g0b"}, Replace: true}); err != nil {
				t.Fatalf("a replacing submission: %v", err)
			}
			if n, err := st.ExpireKeys(cutoff); err != nil || n != 1 {
				t.Fatalf("expired %d %v, want 1", n, err)
			}
			if s, ok := st.Idempotent("task"); !ok || s.GroupID != "g0b" {
				t.Fatalf("a key replaced after the cutoff: %+v %v, want the replacement kept", s, ok)
			}
			if _, ok := st.Idempotent("old"); ok {
				t.Fatal("a key older than the cutoff is still there")
			}
			if s, ok := st.Idempotent("new"); !ok || s.GroupID != "g2" {
				t.Fatal("a key newer than the cutoff went")
			}
			// The key is free again: a new submission may take it.
			if err := st.Submit(nil, &Keyed{Key: "old", Sub: Submission{GroupID: "g3"}}); err != nil {
				t.Fatal(err)
			}
			b, ok := st.(*Bolt)
			if !ok {
				return
			}
			if err := b.db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket(bIdem).Put([]byte("undated"), []byte(`{"group_id":"g0","rollout_ids":["r"]}`))
			}); err != nil {
				t.Fatal(err)
			}
			later := time.Now().Add(time.Hour)
			if n, err := b.ExpireKeys(later); err != nil || n != 3 {
				t.Fatalf("expired %d %v, want the 3 dated keys", n, err)
			}
			if s, ok := b.Idempotent("undated"); !ok || s.At.IsZero() {
				t.Fatalf("an undated key after a sweep: %+v %v, want kept and dated", s, ok)
			}
			if n, err := b.ExpireKeys(later); err != nil || n != 1 {
				t.Fatalf("the dated key's next sweep: %d %v", n, err)
			}
		})
	}
}

// The host's own values survive a reopen of the file, never expire with
// the keys, and do not disturb the result numbering kept beside them.
func TestState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	b := openBolt(t, path, 10)
	for _, st := range []Store{NewMemory(10), b} {
		if _, ok := st.State("policy"); ok {
			t.Fatal("a value before any was set")
		}
		for _, v := range []string{`{"version":6}`, `{"version":7,"paused":true}`} {
			if err := st.SetState("policy", []byte(v)); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Finish(&trajectory.Result{ID: "r"}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.ExpireKeys(time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if v, ok := st.State("policy"); !ok || string(v) != `{"version":7,"paused":true}` {
			t.Fatalf("%T: %q %v", st, v, ok)
		}
	}
	seq := b.Stats().LastSeq
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBolt(t, path, 10)
	defer b.Close()
	if v, ok := b.State("policy"); !ok || string(v) != `{"version":7,"paused":true}` {
		t.Fatalf("after a reopen: %q %v", v, ok)
	}
	if got := b.Stats().LastSeq; got != seq {
		t.Fatalf("last seq %d after a reopen, want %d", got, seq)
	}
}

// A cancellation is kept with the rollout's pending record across a
// reopen; a rollout finished before it is skipped, and a second
// cancellation does not replace the first.
func TestCancelPending(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	b := openBolt(t, path, 10)
	ps := []Pending{{ID: "a", Attempt: 1, Request: []byte(`{}`)}, {ID: "b", Attempt: 1, Request: []byte(`{}`)}, {ID: "c", Attempt: 1, Request: []byte(`{}`)}}
	if err := b.Submit(ps, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(&trajectory.Result{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	first := trajectory.Failure{Reason: trajectory.ReasonCancelled, Message: "first"}
	if err := b.Cancel([]string{"a", "c"}, first); err != nil {
		t.Fatal(err)
	}
	if err := b.Cancel([]string{"a", "gone"}, trajectory.Failure{Reason: trajectory.ReasonCancelled, Message: "second"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBolt(t, path, 10)
	defer b.Close()
	un, err := b.Unfinished()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*trajectory.Failure{}
	for _, p := range un {
		got[p.ID] = p.Cancelled
	}
	if len(got) != 2 || got["a"] == nil || *got["a"] != first || got["b"] != nil {
		t.Fatalf("pending after a reopen: %v", got)
	}
}

// openBolt opens the store at path or fails the test.
func openBolt(t *testing.T, path string, retention int) *Bolt {
	t.Helper()
	b, err := OpenBolt(path, retention)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMarks: a result's marks are written with it, in its transaction —
// on disk both or neither, across a reopen and a fault that holds the
// result — listed by prefix, kept after the result is acknowledged, and
// expired with the keys.
func TestMarks(t *testing.T) {
	for _, name := range []string{"memory", "bolt"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			var st Store = NewMemory(10)
			if name == "bolt" {
				st = openBolt(t, path, 10)
			}
			defer func() { st.Close() }()
			if err := st.Submit([]Pending{{ID: "a", Attempt: 1}, {ID: "b", Attempt: 1}, {ID: "c", Attempt: 1}}, nil); err != nil {
				t.Fatal(err)
			}
			mark := func(k, v string) trajectory.Mark { return trajectory.Mark{Key: k, Value: []byte(v)} }
			if err := st.Finish(&trajectory.Result{ID: "a", Marks: []trajectory.Mark{mark("m:x/a", `{"v":1}`), mark("m:y/a", `{}`)}}); err != nil {
				t.Fatal(err)
			}
			if err := st.Finish(&trajectory.Result{ID: "b", Marks: []trajectory.Mark{mark("m:x/b", `{"v":2}`)}}); err != nil {
				t.Fatal(err)
			}
			if err := st.Submit(nil, &Keyed{Key: "m:xz", Sub: Submission{Note: []byte(`{}`)}}); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"m:x/a": `{"v":1}`, "m:x/b": `{"v":2}`}
			check := func(when string) {
				t.Helper()
				got := map[string]string{}
				for k, v := range st.Marks("m:x/") {
					got[k] = string(v)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s: marks %v, want %v", when, got, want)
				}
			}
			check("written")
			if _, err := st.Ack([]string{"a", "b"}); err != nil {
				t.Fatal(err)
			}
			check("the results acknowledged")
			b, ok := st.(*Bolt)
			if !ok {
				return
			}
			// A result the file refuses is held with its marks: neither is
			// on disk, its pending record stays, until the file takes it.
			b.faultMu.Lock()
			b.fault = errors.New("injected: the file refuses writes")
			b.healing = true // no healer: the fault lasts until Close
			b.faultMu.Unlock()
			if err := b.Finish(&trajectory.Result{ID: "c", Marks: []trajectory.Mark{mark("m:x/c", `{"v":3}`), mark("m:x/bad", `{"v":`)}}); err != nil {
				t.Fatal(err)
			}
			check("while c is held")
			if un, err := b.Unfinished(); err != nil || len(un) != 1 || un[0].ID != "c" {
				t.Fatalf("unfinished while c is held: %+v %v", un, err)
			}
			if err := b.Close(); err != nil { // its last attempt writes what is held
				t.Fatal(err)
			}
			st = openBolt(t, path, 10)
			// A mark that is not JSON (a host bug) is left out; its result is not.
			want["m:x/c"] = `{"v":3}`
			check("reopened")
			if _, ok := st.Get("c"); !ok {
				t.Fatal("the held result was not written")
			}
			if un, err := st.Unfinished(); err != nil || len(un) != 0 {
				t.Fatalf("unfinished after c was written: %+v %v", un, err)
			}
			if n, err := st.ExpireKeys(time.Now().Add(time.Hour)); err != nil || n != 5 {
				t.Fatalf("expired %d %v, want the 4 marks and the key", n, err)
			}
			want = map[string]string{}
			check("expired")
		})
	}
}

// TestBoltHoldsCancelsAndState: a cancellation and a host value the file
// refuses are held (ErrHeld) — the value reads back meanwhile — and
// written with the held results, after them: a cancellation of a rollout
// whose result is written finds no record, as it would have.
func TestBoltHoldsCancelsAndState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	b := openBolt(t, path, 100)
	if err := b.Submit([]Pending{{ID: "a", Attempt: 1}, {ID: "b", Attempt: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.SetState("policy", []byte(`{"version":1}`)); err != nil {
		t.Fatal(err)
	}
	b.faultMu.Lock()
	b.fault = errors.New("injected: the file refuses writes")
	b.healing = true // no healer: the fault lasts until Close
	b.faultMu.Unlock()
	why := trajectory.Failure{Reason: trajectory.ReasonCancelled, Message: "during the fault"}
	if err := b.Cancel([]string{"a", "b"}, why); !errors.Is(err, ErrHeld) {
		t.Fatalf("a cancellation during a fault: %v, want ErrHeld", err)
	}
	if err := b.Finish(&trajectory.Result{ID: "a", Status: trajectory.StatusCancelled}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetState("policy", []byte(`{"version":2}`)); !errors.Is(err, ErrHeld) {
		t.Fatalf("a value during a fault: %v, want ErrHeld", err)
	}
	if v, _ := b.State("policy"); string(v) != `{"version":2}` {
		t.Fatalf("the held value reads %s", v)
	}
	if err := b.Healthy(); err == nil || !strings.Contains(err.Error(), "1 results, 1 cancellations and 1 host values held") {
		t.Fatalf("healthy during the fault: %v", err)
	}
	if err := b.Close(); err != nil { // its last attempt writes what is held
		t.Fatal(err)
	}
	b = openBolt(t, path, 100)
	defer b.Close()
	if v, _ := b.State("policy"); string(v) != `{"version":2}` {
		t.Fatalf("after a reopen the value is %s", v)
	}
	un, err := b.Unfinished()
	if err != nil || len(un) != 1 || un[0].ID != "b" || un[0].Cancelled == nil || un[0].Cancelled.Message != why.Message {
		t.Fatalf("unfinished after a reopen: %+v %v, want b cancelled", un, err)
	}
	if _, ok := b.Get("a"); !ok {
		t.Fatal("the held result was not written")
	}
}

// TestBoltHeldCancelSkipsDamagedRecord: a held cancellation naming a
// rollout whose pending record does not decode skips it; it does not fail
// the held write, which would keep the results written with it in memory
// and the store in fault for good.
func TestBoltHeldCancelSkipsDamagedRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	b := openBolt(t, path, 100)
	if err := b.Submit([]Pending{{ID: "a", Attempt: 1}, {ID: "x", Attempt: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bPending).Put([]byte("d"), []byte(`{"id":`)) }); err != nil {
		t.Fatal(err)
	}
	b.faultMu.Lock()
	b.fault = errors.New("injected: the file refuses writes")
	b.healing = true // no healer: the fault lasts until Close
	b.faultMu.Unlock()
	if err := b.Cancel([]string{"d", "a"}, trajectory.Failure{Reason: trajectory.ReasonCancelled}); !errors.Is(err, ErrHeld) {
		t.Fatalf("a cancellation during a fault: %v, want ErrHeld", err)
	}
	if err := b.Finish(&trajectory.Result{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close with a held cancellation naming a damaged record: %v", err)
	}
	b = openBolt(t, path, 100)
	defer b.Close()
	if _, ok := b.Get("x"); !ok {
		t.Fatal("the held result was not written")
	}
	var p Pending
	if err := b.db.View(func(tx *bolt.Tx) error { return decode(tx.Bucket(bPending).Get([]byte("a")), &p) }); err != nil || p.Cancelled == nil {
		t.Fatalf("a after the held cancellation: %+v %v", p, err)
	}
}
