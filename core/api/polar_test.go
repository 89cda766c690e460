package api

import (
	"path/filepath"
	"testing"

	"github.com/prorl/prorl/core/store"
)

// A Polar task's record is one key, replaced by a resubmission; a store
// written with the earlier numbered slots still answers, from its last
// slot, and an id that only looks like a slot's suffix is a task of its own.
func TestPolarRecord(t *testing.T) {
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "s.db"), 10)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := &Server{Deps: Deps{Store: st}}
	put := func(key, group string, replace bool) {
		t.Helper()
		if err := st.Submit(nil, &store.Keyed{Key: key, Sub: store.Submission{GroupID: group}, Replace: replace}); err != nil {
			t.Fatal(err)
		}
	}
	put(polarSlotKey("legacy", 1), "g1", false)
	put(polarSlotKey("legacy", 2), "g2", false)
	put(polarKey("t"), "a", true)
	put(polarKey("t"), "b", true)
	put(polarKey("1:legacy"), "c", true)
	for _, c := range []struct{ id, group string }{
		{"legacy", "g2"}, // the last slot
		{"t", "b"},       // the replacement
		{"1:legacy", "c"},
		{"missing", ""},
	} {
		sub, ok := s.polarRecord(c.id)
		if ok != (c.group != "") || sub.GroupID != c.group {
			t.Errorf("task %q: %q %v, want %q", c.id, sub.GroupID, ok, c.group)
		}
	}
}
