package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// v1Set is this test's instance groups with a forker (cgroup v1), or skips.
func v1Set(t *testing.T) *Set {
	t.Helper()
	c, err := New(fmt.Sprintf("h%d-test%d", os.Getpid(), time.Now().UnixNano()))
	if err != nil {
		t.Skipf("cannot make cgroups here: %v", err)
	}
	if c.forker == nil {
		c.Close()
		t.Skip("needs cgroup v1 groups the host may create")
	}
	t.Cleanup(c.Close)
	return c
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

// sleeper is a command that lives until killed, and dies with the thread
// that forked it (as a sandbox does).
func sleeper() *exec.Cmd {
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// alive reports whether a started command's process is still running.
func alive(cmd *exec.Cmd) bool {
	f, err := ProcStatFields(strconv.Itoa(cmd.Process.Pid))
	return err == nil && f[0] != "Z"
}

// TestForkerStarts: processes started by the forker run in their own
// groups with their limits, the host's thread leaves those groups, and a
// process outlives the forker's later moves (its Pdeathsig follows the
// forking thread, which must not exit); removing a group kills what is in
// it and deletes it.
func TestForkerStarts(t *testing.T) {
	c := v1Set(t)
	f := c.forker
	var groups []*Group
	var cmds []*exec.Cmd
	for i := range 4 {
		waitSpare(t, f)
		before := f.forked.Load()
		id := fmt.Sprintf("s%d", i)
		g, err := c.Create(id, 1<<30, 128)
		if err != nil {
			t.Fatal(err)
		}
		cmd := sleeper()
		if err := g.Start(cmd); err != nil {
			t.Fatal(err)
		}
		groups, cmds = append(groups, g), append(cmds, cmd)
		if got := f.forked.Load(); got != before+1 {
			t.Fatalf("start %d: the forker started %d processes, want %d", i, got, before+1)
		}
		if filepath.Base(g.mem) != id || filepath.Base(g.pids) != id {
			t.Fatalf("groups %s, %s not named after the sandbox %s", g.mem, g.pids, id)
		}
		for file, want := range map[string]string{filepath.Join(g.mem, "memory.limit_in_bytes"): strconv.Itoa(1 << 30),
			filepath.Join(g.pids, "pids.max"): strconv.Itoa(128 + AgentReserve)} {
			if b, _ := os.ReadFile(file); strings.TrimSpace(string(b)) != want {
				t.Fatalf("%s = %q, want %s", file, b, want)
			}
		}
		if ps := g.Procs(); len(ps) != 1 || ps[0] != cmd.Process.Pid {
			t.Fatalf("the group holds %v, want the started process %d", ps, cmd.Process.Pid)
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
	for i, g := range groups {
		if !alive(cmds[i]) {
			t.Fatalf("process %d died when the forker moved on", i)
		}
		g.Remove()
		_ = cmds[i].Wait()
		for _, d := range []string{g.mem, g.pids} {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Fatalf("%s left after remove: %v", d, err)
			}
		}
	}
}

// TestForkerCancel: a group that took the spare and is removed before its
// process starts is removed once the forker has left it, and the forker
// goes on to the next start.
func TestForkerCancel(t *testing.T) {
	c := v1Set(t)
	waitSpare(t, c.forker)
	g, err := c.Create("cancelled", 1<<28, 8)
	if err != nil {
		t.Fatal(err)
	}
	if g.spare == nil {
		t.Fatal("the group did not take the waiting spare")
	}
	g.Remove()
	for _, d := range []string{g.mem, g.pids} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("%s left after remove: %v", d, err)
		}
	}
	waitSpare(t, c.forker)
	g, err = c.Create("after", 1<<28, 8)
	if err != nil {
		t.Fatal(err)
	}
	cmd := sleeper()
	if err := g.Start(cmd); err != nil || !alive(cmd) {
		t.Fatalf("a start after the cancel: %v", err)
	}
	g.Remove()
	_ = cmd.Wait()
}

// TestForkerClose: closing with a spare waiting removes it and the host's
// parent groups, and the forker thread is back in the host's own groups.
func TestForkerClose(t *testing.T) {
	c := v1Set(t)
	waitSpare(t, c.forker)
	c.forker.mu.Lock()
	sp := c.forker.ready
	c.forker.mu.Unlock()
	c.Close()
	for _, d := range []string{sp.mem, sp.pids, c.mem, c.pids} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("%s left after close: %v", d, err)
		}
	}
}
