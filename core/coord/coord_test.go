package coord

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/store"
)

func newTest(t *testing.T, deadAfter time.Duration) *Coordinator {
	c := New(Options{Version: "v1", Plugins: []string{"math", "swe"}, DeadAfter: deadAfter, Store: store.NewMemory(100)})
	t.Cleanup(c.Close)
	return c
}

func TestRegister(t *testing.T) {
	c := newTest(t, time.Hour)
	if err := c.Register(NodeInfo{ID: "a", URL: "http://127.0.0.1:1", Version: "v1", Plugins: []string{"swe", "math"}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		in    NodeInfo
		field string
		msg   string
	}{
		{"no id", NodeInfo{URL: "http://h:1", Version: "v1", Plugins: []string{"math", "swe"}}, "id", "node id"},
		{"bad url", NodeInfo{ID: "b", URL: "h:1", Version: "v1", Plugins: []string{"math", "swe"}}, "url", "http(s)://"},
		{"version", NodeInfo{ID: "b", URL: "http://h:1", Version: "v2", Plugins: []string{"math", "swe"}}, "version", `runs version "v2", the coordinator "v1"`},
		{"plugins", NodeInfo{ID: "b", URL: "http://h:1", Version: "v1", Plugins: []string{"math"}}, "plugins", "serves domains [math], the coordinator [math, swe]"},
		{"taken id", NodeInfo{ID: "a", URL: "http://127.0.0.1:2", Version: "v1", Plugins: []string{"math", "swe"}}, "id", "taken by a live node at http://127.0.0.1:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var re *RegisterError
			err := c.Register(tt.in)
			if !errors.As(err, &re) || re.Field != tt.field || !strings.Contains(re.Msg, tt.msg) {
				t.Fatalf("err = %v, want field %s and %q", err, tt.field, tt.msg)
			}
		})
	}
	// The same node again (a restart) is taken.
	if err := c.Register(NodeInfo{ID: "a", URL: "http://127.0.0.1:1", Version: "v1", Plugins: []string{"math", "swe"}}); err != nil {
		t.Fatal(err)
	}
}

func TestAdmissionAndDeath(t *testing.T) {
	c := newTest(t, 300*time.Millisecond)
	if err := c.Admission(); err == nil || !strings.Contains(err.Error(), "no node has registered") {
		t.Fatalf("empty: %v", err)
	}
	for _, id := range []string{"a", "b"} {
		if err := c.Register(NodeInfo{ID: id, URL: "http://127.0.0.1:1", Version: "v1", Plugins: []string{"math", "swe"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Drain("a"); err != nil {
		t.Fatal(err)
	}
	if err := c.Admission(); err != nil {
		t.Fatalf("b is live: %v", err)
	}
	// b stops heartbeating: dead, and its heartbeat is then refused.
	deadline := time.Now().Add(5 * time.Second)
	for c.Admission() == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.Admission(); err == nil || !strings.Contains(err.Error(), "a dead, b dead") {
		t.Fatalf("after the heartbeats stopped: %v", err)
	}
	if err := c.Heartbeat("b", Load{}); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("heartbeat of a dead node: %v", err)
	}
}

// TestPlacement: a group stays on its node; new groups go to the node with
// the most free capacity (outstanding per slot); a dead node's group moves.
func TestPlacement(t *testing.T) {
	c := newTest(t, time.Hour)
	for id, capacity := range map[string]int{"a": 4, "b": 1} {
		if err := c.Register(NodeInfo{ID: id, URL: "http://127.0.0.1:1", Version: "v1", Plugins: []string{"math", "swe"}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Heartbeat(id, Load{Capacity: capacity}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	place := func(group string) string {
		n, err := c.place(ctx, &pipeline.Rollout{ID: "r", Req: pipeline.Request{GroupID: group}}, "")
		if err != nil {
			t.Fatal(err)
		}
		return n.ID
	}
	var got []string
	for _, g := range []string{"g1", "g1", "g2", "g3", "g4", "g5", "g1"} {
		got = append(got, place(g))
	}
	// a (4 slots) takes g1 twice, then b (empty) takes g2; a then has
	// 2/4 < b's 1/1: g3, g4 to a (3/4, 4/4); g5: a 4/4 vs b 1/1, tie
	// broken by id: a; g1 stays on a.
	if want := "a a b a a a a"; strings.Join(got, " ") != want {
		t.Fatalf("placed %v, want %s", got, want)
	}
	c.mu.Lock()
	c.declareDead(c.nodes["a"])
	c.mu.Unlock()
	if n := place("g1"); n != "b" {
		t.Fatalf("g1 after a died: %s", n)
	}
}
