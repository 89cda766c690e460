// Package cgroup bounds a sandbox's memory (tmpfs included) and processes
// as a whole, and lets its stop kill everything in it: one group per
// sandbox under this host instance's parent groups, cgroup v1 (the memory
// and pids hierarchies) or v2, where the host may create groups under its
// own. It also finds and removes what dead hosts left.
package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Set is this host instance's parent groups. Where none can be made (a
// rootless host without delegation) New says why and sandboxes fall back
// to per-process rlimits.
type Set struct {
	v2   string // v2: this host's parent group
	mem  string // v1: parent groups in the memory and pids hierarchies
	pids string
	// own v1 groups of the host, to return a thread to
	ownMem, ownPids string
	forker          *forker // v1
}

// AgentReserve is the processes and threads a sandbox's agent may hold
// beyond its commands' limit.
const AgentReserve = 64

// Group is one sandbox's groups.
type Group struct {
	v2        string
	mem, pids string
	parent    *Set
	// spare: the forker waits in this group to start its sandbox.
	spare *spare
}

// ownCgroups reads /proc/self/cgroup: the v2 path and the v1 paths by controller.
func ownCgroups() (v2 string, v1 map[string]string, err error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", nil, err
	}
	v1 = map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			v2 = f[2]
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			v1[c] = f[2]
		}
	}
	return v2, v1, nil
}

// New makes this host instance's parent groups, or says why not.
func New(instance string) (*Set, error) {
	h, err := cgroupHomes()
	if err != nil {
		return nil, err
	}
	name := "prorl-" + instance
	if h.mem != "" {
		c := &Set{mem: filepath.Join(h.mem, name), pids: filepath.Join(h.pids, name), ownMem: h.mem, ownPids: h.pids}
		if err := os.Mkdir(c.mem, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup v1 memory: %w", err)
		}
		if err := os.Mkdir(c.pids, 0o755); err != nil {
			_ = os.Remove(c.mem)
			return nil, fmt.Errorf("cgroup v1 pids: %w", err)
		}
		_ = os.WriteFile(filepath.Join(c.mem, "memory.use_hierarchy"), []byte("1"), 0)
		c.forker = newForker(c)
		return c, nil
	}
	if h.v2 != "" {
		dir := filepath.Join(h.v2, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup v2: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +pids"), 0); err != nil {
			_ = os.Remove(dir)
			return nil, fmt.Errorf("cgroup v2: enable memory and pids under %s: %w", dir, err)
		}
		return &Set{v2: dir}, nil
	}
	return nil, errors.New("no writable cgroup hierarchy with memory and pids controllers")
}

func write(dir, file, v string) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(v), 0)
}

// Version is "cgroup v1" or "cgroup v2".
func (c *Set) Version() string {
	if c.v2 != "" {
		return "cgroup v2"
	}
	return "cgroup v1"
}

// Create makes one sandbox's group with its limits (0: none); a nil Set
// makes none.
func (c *Set) Create(id string, memoryBytes, maxProcesses uint64) (*Group, error) {
	if c == nil {
		return nil, nil
	}
	// Commands hit RLIMIT_NPROC at MaxProcesses first; the reserve keeps
	// the agent able to make threads (and answer) while a fork bomb runs.
	mem, pids := strconv.FormatUint(memoryBytes, 10), strconv.FormatUint(maxProcesses+AgentReserve, 10)
	if memoryBytes == 0 {
		mem = "max"
	}
	if maxProcesses == 0 {
		pids = "max"
	}
	g := &Group{parent: c}
	if c.v2 != "" {
		g.v2 = filepath.Join(c.v2, id)
		if err := os.Mkdir(g.v2, 0o755); err != nil {
			return nil, err
		}
		for _, kv := range [][2]string{{"memory.max", mem}, {"memory.swap.max", "0"}, {"pids.max", pids}} {
			if err := write(g.v2, kv[0], kv[1]); err != nil && kv[0] != "memory.swap.max" {
				g.Remove()
				return nil, fmt.Errorf("cgroup %s: %w", kv[0], err)
			}
		}
		return g, nil
	}
	g.mem, g.pids = filepath.Join(c.mem, id), filepath.Join(c.pids, id)
	if g.spare = c.forker.claim(g); g.spare == nil {
		if err := os.Mkdir(g.mem, 0o755); err != nil {
			return nil, err
		}
		if err := os.Mkdir(g.pids, 0o755); err != nil {
			g.Remove()
			return nil, err
		}
	}
	if memoryBytes == 0 {
		mem = "-1"
	}
	// memsw after the limit it may not be below; no swap beyond the limit.
	for _, kv := range [][3]string{{g.mem, "memory.limit_in_bytes", mem}, {g.mem, "memory.memsw.limit_in_bytes", mem}, {g.pids, "pids.max", pids}} {
		if err := write(kv[0], kv[1], kv[2]); err != nil && kv[1] != "memory.memsw.limit_in_bytes" {
			g.Remove()
			return nil, fmt.Errorf("cgroup %s: %w", kv[1], err)
		}
	}
	return g, nil
}

// Start starts cmd inside the group (a nil group: as it is), so that everything it ever forks is
// in it from the first instruction. v2 clones straight into the group; v1
// has no such call, so a thread already in the group forks it: the
// forker's (forker.go), or else the starting thread, which joins the
// group for the fork and leaves it after (a thread that cannot leave is
// retired).
func (g *Group) Start(cmd *exec.Cmd) error {
	if g == nil {
		return cmd.Start()
	}
	if g.v2 != "" {
		fd, err := unix.Open(g.v2, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
		return cmd.Start()
	}
	if sp := g.spare; sp != nil {
		g.spare = nil
		return sp.start(cmd)
	}
	runtime.LockOSThread()
	tid := strconv.Itoa(unix.Gettid())
	if err := write(g.mem, "tasks", tid); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("join cgroup: %w", err)
	}
	if err := write(g.pids, "tasks", tid); err != nil {
		if write(g.parent.ownMem, "tasks", tid) == nil {
			runtime.UnlockOSThread()
		}
		return fmt.Errorf("join cgroup: %w", err)
	}
	err := cmd.Start()
	if g.parent.leave(tid) {
		runtime.UnlockOSThread()
	} // else the goroutine ends locked and Go retires the thread
	return err
}

// leave returns a thread to the host's own v1 groups.
func (c *Set) leave(tid string) bool {
	return write(c.ownMem, "tasks", tid) == nil && write(c.ownPids, "tasks", tid) == nil
}

// Procs lists the processes in the group.
func (g *Group) Procs() []int {
	for _, d := range []string{g.v2, g.pids, g.mem} {
		if d != "" {
			return procsIn(d)
		}
	}
	return nil
}

// procsIn lists the processes in a group but the host itself, whose
// forker thread may be there for a moment after starting its sandbox.
func procsIn(dir string) []int {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var out []int
	self := os.Getpid()
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid != self {
			out = append(out, pid)
		}
	}
	return out
}

// Remove kills whatever is left in the group and deletes it.
func (g *Group) Remove() {
	if g == nil {
		return
	}
	if sp := g.spare; sp != nil {
		g.spare = nil
		sp.cancel() // the forker leaves the group (emptyAndRemove waits for it)
	}
	removeGroups(g.v2, g.pids, g.mem)
}

// removeGroups empties and removes each group directory given ("": none).
func removeGroups(dirs ...string) {
	for _, d := range dirs {
		if d != "" {
			emptyAndRemove(d)
		}
	}
}

// emptyAndRemove kills the processes in one group directory and removes it.
// It waits up to 5 s for them to go: on a loaded machine a killed process
// can take longer than half a second to exit (a fresh-clone CI run saw two
// outlive a 0.5 s bound), and a stopped sandbox must have none left.
// A group the forker thread has not yet left cannot be removed (EBUSY):
// that is waited for too.
func emptyAndRemove(dir string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		ps := procsIn(dir)
		for _, p := range ps {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if len(ps) == 0 {
			if err := os.Remove(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
				return
			}
		}
		if time.Now().After(deadline) {
			_ = os.Remove(dir)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Close removes the host's parent groups (empty by then).
func (c *Set) Close() {
	if c == nil {
		return
	}
	c.forker.close()
	for _, d := range []string{c.v2, c.mem, c.pids} {
		if d != "" {
			_ = os.Remove(d)
		}
	}
}

// homes are where a host makes its instance groups: the v1 memory and
// pids groups it is in (both set), or else its v2 group ("": none).
type homes struct{ mem, pids, v2 string }

// cgroupHomes finds this process's homes from /proc/self/cgroup.
func cgroupHomes() (homes, error) {
	v2, v1, err := ownCgroups()
	if err != nil {
		return homes{}, err
	}
	if m, p := v1["memory"], v1["pids"]; m != "" && p != "" {
		return homes{mem: filepath.Join("/sys/fs/cgroup/memory", m), pids: filepath.Join("/sys/fs/cgroup/pids", p)}, nil
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil && v2 != "" {
		return homes{v2: filepath.Join("/sys/fs/cgroup", v2)}, nil
	}
	return homes{}, nil
}

// cgroupParents are the directories hosts on this machine make their
// instance groups in (New).
func cgroupParents() []string {
	h, err := cgroupHomes()
	if err != nil {
		return nil
	}
	var out []string
	for _, d := range []string{h.mem, h.pids, h.v2} {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}

// Reap removes the groups of a dead host instance, killing what is left
// in them.
func Reap(instance string) {
	for _, parent := range cgroupParents() {
		dead := filepath.Join(parent, "prorl-"+instance)
		ents, err := os.ReadDir(dead)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() {
				emptyAndRemove(filepath.Join(dead, e.Name()))
			}
		}
		_ = os.Remove(dead)
	}
}

// ReapOrphans removes the groups of dead host instances that no
// work directory tells about (their host used another work root, since
// deleted): an instance "h<pid>-…" whose pid no process has, and with no
// process left in its groups. known says whether a work directory speaks
// for an instance (Reap's lock decides those). It returns how many went.
func ReapOrphans(known func(instance string) bool) int {
	n := 0
	for _, parent := range cgroupParents() {
		ents, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range ents {
			instance, ok := strings.CutPrefix(e.Name(), "prorl-")
			if !e.IsDir() || !ok || known(instance) {
				continue
			}
			info, err := e.Info()
			if err != nil || !deadInstance(instance, info.ModTime()) {
				continue
			}
			if removeEmptyTree(filepath.Join(parent, e.Name())) {
				n++
			}
		}
	}
	return n
}

// deadInstance: no process has the pid in the instance's name
// ("h<pid>-…"), or the one that has it is younger than the instance's
// groups, made at made (the pid was reused).
func deadInstance(instance string, made time.Time) bool {
	rest, ok := strings.CutPrefix(instance, "h")
	if !ok {
		return false
	}
	pid, _, ok := strings.Cut(rest, "-")
	if !ok {
		return false
	}
	if n, err := strconv.Atoi(pid); err != nil || n <= 0 {
		return false
	}
	age, err := processAge(pid)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	// Slack for the clock ticks both ages are counted in.
	return err == nil && age < time.Since(made)-200*time.Millisecond
}

// processAge is how long ago a process started: /proc/uptime less its
// start time in /proc/<pid>/stat (clock ticks since boot, USER_HZ = 100 on
// Linux), both counted from boot, so no wall clock enters.
func processAge(pid string) (time.Duration, error) {
	f, err := ProcStatFields(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 20 {
		return 0, errors.New("short /proc/pid/stat")
	}
	ticks, err := strconv.ParseInt(f[19], 10, 64) // field 22 of stat
	if err != nil {
		return 0, err
	}
	u, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0, err
	}
	up, _, _ := strings.Cut(string(u), " ")
	secs, err := strconv.ParseFloat(up, 64)
	if err != nil {
		return 0, err
	}
	return time.Duration(secs*float64(time.Second)) - time.Duration(ticks)*10*time.Millisecond, nil
}

// ProcStatFields are the fields of /proc/<pid>/stat from the third (the
// state) on: after the command, which may hold spaces and parentheses.
func ProcStatFields(pid string) ([]string, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New("unreadable /proc/pid/stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) == 0 {
		return nil, errors.New("short /proc/pid/stat")
	}
	return f, nil
}

// removeEmptyTree removes a group and its children, deepest first, if no
// process is in any of them; it kills nothing.
func removeEmptyTree(dir string) bool {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if len(procsIn(p)) > 0 {
				return errBusy
			}
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return false
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if os.Remove(dirs[i]) != nil {
			return false
		}
	}
	return true
}

var errBusy = errors.New("a process is in the group")

// Abandon stops the forker thread and returns the parent groups'
// directories, left in place as a host that crashed leaves them: for the
// tests of what the next host reaps.
func (c *Set) Abandon() []string {
	c.forker.close()
	return []string{c.v2, c.mem, c.pids}
}
