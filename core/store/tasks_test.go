package store

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prorl/prorl/core/trajectory"
	bolt "go.etcd.io/bbolt"
)

// TestTaskStoredOnce: a group's task is written once however many samples
// name it, given back on recovery (one copy for all), and deleted with the
// last pending record naming it; store check agrees at every step.
func TestTaskStoredOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	b := openBolt(t, path, 100)
	task := json.RawMessage(`{"domain":"math","question":"` + strings.Repeat("q", 64<<10) + `"}`)
	other := json.RawMessage(`{"domain":"math","question":"other"}`)
	var ps []Pending
	for _, id := range []string{"a", "b", "c"} {
		ps = append(ps, Pending{ID: id, Attempt: 1, Request: []byte(`{"index":0}`), Task: task})
	}
	// A copy of the same bytes (a node's decoded request) is the same task.
	ps = append(ps, Pending{ID: "d", Attempt: 1, Request: []byte(`{}`), Task: bytes.Clone(task)}, Pending{ID: "e", Attempt: 1, Request: []byte(`{}`), Task: other})
	before := b.Size()
	if err := b.Submit(ps, nil); err != nil {
		t.Fatal(err)
	}
	if grew := b.Size() - before; grew > 3*int64(len(task)) {
		t.Fatalf("five records of a %d-byte task grew the file by %d", len(task), grew)
	}
	counts := func() (tasks int, refs map[string]uint64) {
		refs = map[string]uint64{}
		_ = b.db.View(func(tx *bolt.Tx) error {
			tasks = tx.Bucket(bTasks).Stats().KeyN
			return tx.Bucket(bTaskRC).ForEach(func(k, v []byte) error { refs[string(k)] = uint64(v[7]); return nil })
		})
		return tasks, refs
	}
	if n, refs := counts(); n != 2 || refs[TaskRefOf(task)] != 4 || refs[TaskRefOf(other)] != 1 {
		t.Fatalf("tasks %d, counts %v", n, refs)
	}
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	un, err := b.Unfinished()
	if err != nil || len(un) != 5 {
		t.Fatalf("unfinished %d %v", len(un), err)
	}
	for _, p := range un {
		want := task
		if p.ID == "e" {
			want = other
		}
		if !bytes.Equal(p.Task, want) {
			t.Fatalf("%s: task %.40s", p.ID, p.Task)
		}
	}
	if &un[0].Task[0] != &un[1].Task[0] {
		t.Error("recovered records of one task hold copies of it")
	}
	for _, id := range []string{"a", "b", "c"} {
		if err := b.Finish(&trajectory.Result{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if n, refs := counts(); n != 2 || refs[TaskRefOf(task)] != 1 {
		t.Fatalf("after three results: tasks %d, counts %v", n, refs)
	}
	for _, id := range []string{"d", "e"} {
		if err := b.Finish(&trajectory.Result{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if n, refs := counts(); n != 0 || len(refs) != 0 {
		t.Fatalf("all finished: tasks %d, counts %v", n, refs)
	}
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOldPendingRecordsRead: a record of a host before tasks were stored
// apart (its task inside the request, no task_ref) is still read, checked
// and deleted; a record whose task is missing comes back without it and
// store check names it.
func TestOldPendingRecordsRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	b := openBolt(t, path, 100)
	old := []byte(`{"id":"old","attempt":1,"request":{"group_id":"g","task":{"domain":"math","question":"q"}},"submitted_at":"2026-01-01T00:00:00Z"}`)
	if err := b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bPending).Put([]byte("old"), old) }); err != nil {
		t.Fatal(err)
	}
	if err := b.Check(); err != nil {
		t.Fatalf("an old record: %v", err)
	}
	un, err := b.Unfinished()
	if err != nil || len(un) != 1 || un[0].TaskRef != "" || un[0].Task != nil || !strings.Contains(string(un[0].Request), `"question":"q"`) {
		t.Fatalf("old record read as %+v %v", un, err)
	}
	if err := b.Finish(&trajectory.Result{ID: "old"}); err != nil {
		t.Fatal(err)
	}
	// A record naming a task the file lost.
	if err := b.Submit([]Pending{{ID: "x", Attempt: 1, Request: []byte(`{}`), Task: []byte(`{"a":1}`)}}, nil); err != nil {
		t.Fatal(err)
	}
	ref := TaskRefOf([]byte(`{"a":1}`))
	if err := b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bTasks).Delete([]byte(ref)) }); err != nil {
		t.Fatal(err)
	}
	if err := b.Check(); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("check of a lost task: %v", err)
	}
	un, err = b.Unfinished()
	if err != nil || len(un) != 1 || un[0].TaskRef != ref || un[0].Task != nil {
		t.Fatalf("a record whose task is lost: %+v %v", un, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestTaskRefOf: the ref is read from the first bytes of a record as
// Submit writes it; other records name none.
func TestTaskRefOf(t *testing.T) {
	ref := TaskRefOf([]byte("x"))
	v, _ := json.Marshal(Pending{ID: "a", TaskRef: ref, Request: []byte(`{}`)})
	if got := taskRefOf(v); got != ref {
		t.Fatalf("taskRefOf(%s) = %q, want %q", v, got, ref)
	}
	for _, v := range []string{`{"id":"a","request":{"task":{}}}`, `{"task_ref":"sha256:12"}`, `{"task_ref":"md5:` + strings.Repeat("0", 64) + `"}`, ``, `{`} {
		if got := taskRefOf([]byte(v)); got != "" {
			t.Errorf("taskRefOf(%s) = %q", v, got)
		}
	}
}
