package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// The cgroups of a dead host whose work directory is gone (another work
// root, deleted) are removed, also when its pid has been reused, and only
// those: not a live host's, not one a process is still in.
func TestReapOrphanCgroups(t *testing.T) {
	parents := cgroupParents()
	if len(parents) == 0 {
		t.Skip("no cgroup hierarchy")
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
	if age, err := processAge(strconv.Itoa(dead.Process.Pid)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a process that ended: age %v, %v", age, err)
	}
	if age, err := processAge(strconv.Itoa(sleeper.Process.Pid)); err != nil || age < 0 || age > time.Minute {
		t.Fatalf("a process just started: age %v, %v", age, err)
	}
	orphan := fmt.Sprintf("h%d-orphan%d", dead.Process.Pid, os.Getpid())
	live := fmt.Sprintf("h%d-live", os.Getpid())
	busy := fmt.Sprintf("h%d-busy%d", dead.Process.Pid, os.Getpid())
	// A dead host whose pid a process started since has taken: its groups
	// are made first, then named after that process (a rename keeps their
	// time), as if it had reused the pid.
	for _, p := range parents {
		if err := os.MkdirAll(filepath.Join(p, fmt.Sprintf("prorl-tmp%d", os.Getpid()), "spare-1"), 0o755); err != nil {
			t.Skipf("cannot make cgroups here: %v", err)
		}
	}
	time.Sleep(1100 * time.Millisecond)
	reuser := exec.Command("sleep", "60")
	if err := reuser.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reuser.Process.Kill(); _ = reuser.Wait() }()
	reused := fmt.Sprintf("h%d-reused", reuser.Process.Pid)
	for _, p := range parents {
		if err := os.Rename(filepath.Join(p, fmt.Sprintf("prorl-tmp%d", os.Getpid())), filepath.Join(p, "prorl-"+reused)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeGroups(filepath.Join(p, "prorl-"+reused, "spare-1"), filepath.Join(p, "prorl-"+reused)) })
	}
	for _, p := range parents {
		for _, inst := range []string{orphan, live, busy} { // busy: made under another name below
			t.Cleanup(func() { removeGroups(filepath.Join(p, "prorl-"+inst, "spare-1"), filepath.Join(p, "prorl-"+inst)) })
			if inst == busy {
				continue
			}
			if err := os.MkdirAll(filepath.Join(p, "prorl-"+inst, "spare-1"), 0o755); err != nil {
				t.Skipf("cannot make cgroups here: %v", err)
			}
		}
		procs := "tasks"
		if len(parents) == 1 {
			procs = "cgroup.procs" // v2
		}
		// The busy group gets its process under a name no reaper takes
		// (hosts other packages' tests start reap too), then its own.
		tmp := filepath.Join(p, fmt.Sprintf("prorl-tmpbusy%d", os.Getpid()))
		if err := os.MkdirAll(filepath.Join(tmp, "spare-1"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := write(filepath.Join(tmp, "spare-1"), procs, strconv.Itoa(sleeper.Process.Pid)); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(p, "prorl-"+busy)); err != nil {
			t.Fatal(err)
		}
	}
	// Only this test's instances are unknown: other hosts' stay out of it.
	// Hosts that tests in other packages start meanwhile reap too (each
	// manager does at start), so they may take some of these orphans
	// first: what is checked is what is gone and what stays.
	known := func(inst string) bool { return inst != orphan && inst != live && inst != busy && inst != reused }
	if n := ReapOrphans(known); n > 2*len(parents) {
		t.Fatalf("reaped %d instance groups, at most %d are this test's orphans", n, 2*len(parents))
	}
	for _, p := range parents {
		for inst, gone := range map[string]bool{orphan: true, reused: true, live: false, busy: false} {
			_, err := os.Stat(filepath.Join(p, "prorl-"+inst))
			if os.IsNotExist(err) != gone {
				t.Errorf("%s in %s: gone %v, want %v", inst, p, os.IsNotExist(err), gone)
			}
		}
	}
}
