package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prorl/prorl/core/trajectory"
)

func TestMemory(t *testing.T) {
	m := NewMemory(3)
	for i := 0; i < 4; i++ {
		g := "g1"
		if i%2 == 1 {
			g = "g2"
		}
		if err := m.Finish(&trajectory.Result{ID: fmt.Sprint("r", i), GroupID: g}); err != nil {
			t.Fatal(err)
		}
	}
	if st := m.Stats(); st.Finished != 3 || st.Dropped != 1 || st.LastSeq != 4 {
		t.Fatalf("retention: %+v", st)
	}
	rs, next := m.Finished(Filter{})
	if len(rs) != 3 || rs[0].ID != "r1" || next != 4 {
		t.Fatalf("finished %v next %d", rs, next)
	}
	rs, _ = m.Finished(Filter{GroupID: "g2"})
	if len(rs) != 2 {
		t.Fatalf("group filter %v", rs)
	}
	rs, next = m.Finished(Filter{Since: 2, Limit: 1})
	if len(rs) != 1 || rs[0].ID != "r2" || next != 3 {
		t.Fatalf("since/limit %v %d", rs, next)
	}
	if n := m.Ack([]string{"r1", "r1", "zz"}); n != 1 {
		t.Fatalf("ack %d", n)
	}
	if _, ok := m.Get("r1"); ok {
		t.Fatal("acked result still served")
	}
	if s, fresh := m.Remember("k", Submission{GroupID: "a"}); !fresh || s.GroupID != "a" {
		t.Fatal("remember")
	}
	if s, fresh := m.Remember("k", Submission{GroupID: "b"}); fresh || s.GroupID != "a" {
		t.Fatal("idempotency key overwritten")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() { time.Sleep(10 * time.Millisecond); _ = m.Finish(&trajectory.Result{ID: "late"}) }()
	rs, _ = Wait(ctx, m, Filter{Since: 4})
	if len(rs) != 1 || rs[0].ID != "late" {
		t.Fatalf("wait %v", rs)
	}
}
