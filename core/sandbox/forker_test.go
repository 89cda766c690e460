package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// v1Manager is a bwrap manager with per-sandbox cgroup v1 groups, or skips.
func v1Manager(t *testing.T) (*Manager, *forker) {
	t.Helper()
	m := newManager(t, "bwrap", workRoot(t))
	if m.cgroups == nil || m.cgroups.forker == nil {
		t.Skipf("needs cgroup v1 groups the host may create (%s)", m.Enforcement())
	}
	return m, m.cgroups.forker
}

// waitSpare waits until the forker has joined a spare pair of groups.
func waitSpare(t *testing.T, f *forker) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		f.mu.Lock()
		ready := f.ready != nil
		f.mu.Unlock()
		if ready {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the forker never joined a spare")
		}
	}
}

// hostThreadsIn lists this process's threads in a v1 group.
func hostThreadsIn(dir string) []string {
	b, _ := os.ReadFile(filepath.Join(dir, "tasks"))
	var out []string
	for _, tid := range strings.Fields(string(b)) {
		if _, err := os.Stat("/proc/self/task/" + tid); err == nil {
			out = append(out, tid)
		}
	}
	return out
}

// TestForkerStarts: sandboxes started by the forker run in their own
// groups with their limits, the host's thread leaves those groups, and a
// sandbox outlives the forker's later moves (its Pdeathsig follows the
// forking thread, which must not exit).
func TestForkerStarts(t *testing.T) {
	m, f := v1Manager(t)
	ctx := context.Background()
	var boxes []*Sandbox
	for i := range 4 {
		waitSpare(t, f)
		before := f.forked.Load()
		s, err := m.Start(ctx, "forker", Spec{})
		if err != nil {
			t.Fatal(err)
		}
		boxes = append(boxes, s)
		if got := f.forked.Load(); got != before+1 {
			t.Fatalf("start %d: the forker started %d sandboxes, want %d", i, got, before+1)
		}
		g := s.cgroup
		if filepath.Base(g.mem) != s.ID || filepath.Base(g.pids) != s.ID {
			t.Fatalf("groups %s, %s not named after the sandbox %s", g.mem, g.pids, s.ID)
		}
		for file, want := range map[string]string{filepath.Join(g.mem, "memory.limit_in_bytes"): strconv.Itoa(1 << 30),
			filepath.Join(g.pids, "pids.max"): strconv.Itoa(128 + agentReserve)} {
			if b, _ := os.ReadFile(file); strings.TrimSpace(string(b)) != want {
				t.Fatalf("%s = %q, want %s", file, b, want)
			}
		}
		if len(g.procs()) < 2 {
			t.Fatalf("the sandbox's group holds %v: the launcher and the agent at least", g.procs())
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			in := append(hostThreadsIn(g.mem), hostThreadsIn(g.pids)...)
			if len(in) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("host threads %v still in the sandbox's groups", in)
			}
		}
	}
	for _, s := range boxes {
		r, err := s.Session(ctx, "echo alive", 10*time.Second)
		if err != nil || string(r.Stdout) != "alive\n" {
			t.Fatalf("sandbox %s: %v %+v", s.ID, err, r)
		}
		g := s.cgroup
		if err := m.Stop(s.ID); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{g.mem, g.pids} {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Fatalf("%s left after stop: %v", d, err)
			}
		}
	}
}

// TestForkerCancel: a group that took the spare and is removed before its
// sandbox starts is removed once the forker has left it, and the forker
// goes on to the next start.
func TestForkerCancel(t *testing.T) {
	m, f := v1Manager(t)
	waitSpare(t, f)
	g, err := m.cgroups.create("cancelled", Limits{MemoryBytes: 1 << 28, MaxProcesses: 8})
	if err != nil {
		t.Fatal(err)
	}
	if g.spare == nil {
		t.Fatal("the group did not take the waiting spare")
	}
	g.remove()
	for _, d := range []string{g.mem, g.pids} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("%s left after remove: %v", d, err)
		}
	}
	waitSpare(t, f)
	s, err := m.Start(context.Background(), "after", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Session(context.Background(), "echo ok", 10*time.Second); err != nil || string(r.Stdout) != "ok\n" {
		t.Fatalf("%v %+v", err, r)
	}
}

// TestForkerClose: closing with a spare waiting removes it and the host's
// parent groups, and the forker thread is back in the host's own groups.
func TestForkerClose(t *testing.T) {
	m, f := v1Manager(t)
	waitSpare(t, f)
	f.mu.Lock()
	sp := f.ready
	f.mu.Unlock()
	c := m.cgroups
	m.Close()
	for _, d := range []string{sp.mem, sp.pids, c.mem, c.pids} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("%s left after close: %v", d, err)
		}
	}
}
