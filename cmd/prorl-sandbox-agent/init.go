package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"

	"github.com/prorl/prorl/internal/sandboxproto"
	"github.com/prorl/prorl/internal/seccomp"
	"golang.org/x/sys/unix"
)

// Every command runs under `init`, pid 1 of a user, pid and mount
// namespace of its own, with its own /proc. From there the agent, the
// sandbox's pid 1 and the processes of other commands have no pid to
// signal, trace or open, and no /proc entry to read. When the command's
// main process exits, init kills whatever it left behind (daemons,
// setsid'd children, pipe holders) and exits; when the agent kills init
// at a timeout, the kernel kills the whole namespace.

const initEnv = "PRORL_INIT"

// Isolation modes, strongest first. "full": pid and mount namespaces
// with a /proc of their own, made with CAP_SYS_ADMIN (bwrap leaves the
// agent exactly that, in the sandbox's user namespace; a root host has
// it), which init drops before the command runs. "pid": where no
// capability can be had (Apptainer, a rootless none driver) a user and
// pid namespace: the agent and everything outside have no pid there to
// signal, trace or open, and the agent is not dumpable, but /proc still
// lists the sandbox's processes (their command lines, not their memory,
// descriptors or environment).
const (
	modeFull = "full"
	modePid  = "pid"
)

// nsAttr starts init in the namespaces of a mode. "pid" makes a user
// namespace too; its maps are written by start once init has exec'd
// (the agent is not dumpable, and neither is a child until it execs, so
// the kernel would refuse the agent the child's map files before).
func nsAttr(mode string) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	if mode == modeFull {
		a.Cloneflags |= syscall.CLONE_NEWNS
		a.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP}
		return a
	}
	a.Cloneflags |= syscall.CLONE_NEWUSER
	return a
}

// initCmd prepares init for argv in a mode.
func (a *agent) initCmd(mode string, args []string, env []string) *exec.Cmd {
	cmd := exec.Command(a.self, append([]string{"init"}, args...)...)
	cmd.Env = append(env, initEnv+"="+mode+":"+a.limitsArg)
	cmd.SysProcAttr = nsAttr(mode)
	return cmd
}

// start starts a command made by agent.command. For init in "pid" mode
// it then maps the agent's uid and gid in init's user namespace (so
// commands run as the same user) and lets init go on by closing the pipe
// init waits on as fd 3.
func start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil || cmd.SysProcAttr.Cloneflags&syscall.CLONE_NEWUSER == 0 {
		return cmd.Start()
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer w.Close()
	cmd.ExtraFiles = []*os.File{r}
	err = cmd.Start()
	r.Close()
	if err != nil {
		return err
	}
	dir := fmt.Sprintf("/proc/%d/", cmd.Process.Pid)
	uid, gid := os.Getuid(), os.Getgid()
	for _, f := range [][2]string{{"uid_map", fmt.Sprintf("%d %d 1", uid, uid)}, {"setgroups", "deny"}, {"gid_map", fmt.Sprintf("%d %d 1", gid, gid)}} {
		if err := os.WriteFile(dir+f[0], []byte(f[1]), 0); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return fmt.Errorf("map ids in the command's namespace: %w", err)
		}
	}
	return nil
}

// hasCap reports whether the agent holds cap in its effective and
// bounding sets.
func hasCap(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return false
	}
	inBnd, _ := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
	return data[c/32].Effective&(1<<(c%32)) != 0 && inBnd == 1
}

// isolation probes once for the strongest mode commands can run in.
func (a *agent) isolation() (string, error) {
	a.isoOnce.Do(func() {
		if !a.limits.Isolate {
			a.isoErr = errors.New("not requested")
			return
		}
		var errs []string
		for _, mode := range []string{modeFull, modePid} {
			if mode == modeFull && !(hasCap(unix.CAP_SYS_ADMIN) && hasCap(unix.CAP_SETPCAP)) {
				errs = append(errs, "full: no CAP_SYS_ADMIN")
				continue
			}
			cmd := a.initCmd(mode, []string{"--probe"}, nil)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := start(cmd)
			if err == nil {
				err = cmd.Wait()
			}
			if err == nil {
				a.isoMode = mode
				return
			}
			errs = append(errs, fmt.Sprintf("%s: %v %s", mode, err, strings.TrimSpace(out.String())))
		}
		a.isoErr = errors.New(strings.Join(errs, "; "))
	})
	return a.isoMode, a.isoErr
}

// initMain is pid 1 of one command's namespaces.
func initMain(args []string) int {
	// Capabilities, no_new_privs and the bounding set are per thread: all
	// of it, and the fork, happen on this one.
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "prorl sandbox init: %s: %v\n", what, err)
		return 125
	}
	mode, la, _ := strings.Cut(os.Getenv(initEnv), ":")
	_ = os.Unsetenv(initEnv)
	if mode == modePid {
		// Wait for the agent to map our ids (EOF on fd 3).
		f := os.NewFile(3, "go")
		_, _ = io.Copy(io.Discard, f)
		f.Close()
	}
	var l sandboxproto.Limits
	if err := json.Unmarshal([]byte(la), &l); err != nil {
		return fail("limits", err)
	}
	if mode == modeFull {
		// Mounts made here stay here; the new /proc shows this namespace only.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fail("make mounts private", err)
		}
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fail("mount /proc", err)
		}
	}
	if len(args) > 0 && args[0] == "--probe" {
		return 0
	}
	// Under memory pressure the kernel kills commands before the agent.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("500"), 0)
	if err := dropCaps(mode == modeFull); err != nil {
		return fail("drop capabilities", err)
	}
	if l.Seccomp != "off" {
		if err := seccomp.Install(l.SeccompAllow); err != nil {
			return fail("seccomp", err)
		}
	}
	if len(args) < 2 || args[0] != "--" {
		return fail("usage", errors.New("init -- ARGV"))
	}
	self, err := os.Executable()
	if err != nil {
		return fail("own path", err)
	}
	pid, err := syscall.ForkExec(self, append([]string{"prorl-sandbox-agent", "rlimit-exec", la, "--"}, args[1:]...),
		&syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}})
	if err != nil {
		return fail("start", err)
	}
	return reap(pid)
}

// reap waits for the command, then kills and reaps everything else in the
// namespace, and returns the command's status as a shell would.
func reap(main int) int {
	code := -1
	for {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			break // ECHILD: nothing left
		}
		if wpid == main {
			code = ws.ExitStatus()
			if ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
			// From pid 1, -1 is every other process of this namespace.
			_ = syscall.Kill(-1, syscall.SIGKILL)
		}
	}
	return code
}

// dropCaps leaves init, and everything it starts, with no capability and
// no way to regain one.
func dropCaps(bounding bool) error {
	for c := 0; bounding && c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("bounding set: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("ambient: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capset(&hdr, &data[0])
}
