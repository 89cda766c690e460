package polar

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/apitest"
)

// newBareServer is the task API over a host with no plugins or backends.
func newBareServer(t *testing.T, st store.Store) *server {
	t.Helper()
	svc, _ := apitest.NewServer(t, st)
	return newServer(svc)
}

// TestRoutesDocumented: each Polar route is documented; only /health is
// public.
func TestRoutesDocumented(t *testing.T) {
	apitest.CheckRoutes(t, Routes(newBareServer(t, store.NewMemory(10)).svc), 8, "polar_", func(rt api.Route) api.Level {
		if rt.Path == "/health" {
			return api.PublicLevel
		}
		return api.UserLevel
	})
}

// A Polar task's record is one key, replaced by a resubmission; a store
// written with the earlier numbered slots still answers, from its last
// slot, and an id that only looks like a slot's suffix is a task of its own.
func TestPolarRecord(t *testing.T) {
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "s.db"), 10)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := newBareServer(t, st)
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

// A task rebuilt from the store after a restart has its stored results;
// one none of whose results or rollouts is left (acknowledged, as past
// polarKeep) is not found, as Polar answers for an evicted task, rather
// than "completed" with none of its sessions.
func TestPolarLookupFromStore(t *testing.T) {
	st := store.NewMemory(10)
	s := newBareServer(t, st)
	for id, rollouts := range map[string][]string{"done": {"r-1", "r-2"}, "gone": {"r-3"}} {
		if err := st.Submit(nil, &store.Keyed{Key: polarKey(id), Sub: store.Submission{GroupID: "g-" + id, RolloutIDs: rollouts}, Replace: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"r-1", "r-2", "r-3"} {
		if err := st.Finish(&trajectory.Result{ID: id, Status: trajectory.StatusCompleted}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Ack([]string{"r-2", "r-3"}); err != nil {
		t.Fatal(err)
	}
	if task := s.lookup("done"); task == nil || task.status != "completed" || len(task.results) != 1 || len(task.rollouts) != 2 {
		t.Fatalf("a task with one result left: %+v", task)
	}
	if task := s.lookup("gone"); task != nil {
		t.Fatalf("a task with nothing left: %+v, want not found", task)
	}
}

// TestEventsEndAtShutdown: GET /events, begun before the host stops
// waiting or after, ends with a whole body rather than holding the
// server's grace period.
func TestEventsEndAtShutdown(t *testing.T) {
	s, h := apitest.NewServer(t, store.NewMemory(10), Routes)
	ts := httptest.NewServer(h)
	defer ts.Close()
	defer ts.CloseClientConnections()
	get := func() chan error {
		ch := make(chan error, 1)
		go func() {
			res, err := http.Get(ts.URL + "/events")
			if err == nil {
				defer res.Body.Close()
				var b []byte
				if b, err = io.ReadAll(res.Body); err == nil && (res.StatusCode != http.StatusOK || !strings.HasPrefix(string(b), ": connected")) {
					err = fmt.Errorf("%d %q", res.StatusCode, b)
				}
			}
			ch <- err
		}()
		return ch
	}
	before := get()
	time.Sleep(200 * time.Millisecond)
	s.EndWaits()
	for when, ch := range map[string]chan error{"before": before, "after": get()} {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("begun %s EndWaits: %v", when, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("begun %s EndWaits: still streaming", when)
		}
	}
}
