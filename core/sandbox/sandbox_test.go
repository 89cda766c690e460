package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/dirlock"
	"github.com/prorl/prorl/core/sandbox/cgroup"
	"github.com/prorl/prorl/internal/hammer"

	"github.com/prorl/prorl/sdk/sdktest"

	"github.com/prorl/prorl/internal/testbin"
)

var agentBin string

func TestMain(m *testing.M) {
	dir, cleanup := testbin.ForMain("sandbox-agent", map[string]string{"prorl-sandbox-agent": "github.com/prorl/prorl/cmd/prorl-sandbox-agent"})
	agentBin = filepath.Join(dir, "prorl-sandbox-agent")
	code := m.Run()
	cleanup()
	os.Exit(code)
}

func workRoot(t *testing.T) string {
	d, err := os.MkdirTemp("", "sandboxes")
	if err != nil {
		t.Fatal(err)
	}
	// Reachable by the sandboxes' uids when the tests run as root.
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = RemoveAll(d) })
	return d
}

func newManager(t *testing.T, driver, root string) *Manager {
	t.Helper()
	return newManagerLimits(t, driver, root, Limits{CPUSeconds: 20, MemoryBytes: 1 << 30, MaxProcesses: 128, MaxFileBytes: 64 << 20, MaxOutputBytes: 64 << 10})
}

func newManagerLimits(t *testing.T, driver, root string, lim Limits) *Manager {
	t.Helper()
	cfg := Config{Driver: driver}
	switch driver {
	case "bwrap":
		if _, err := exec.LookPath("bwrap"); err != nil {
			t.Skip("bubblewrap not installed (make test installs it)")
		}
	case "apptainer", "apptainer-userns":
		if _, err := FindApptainer(""); err != nil {
			sdktest.Missing(t, "apptainer (make apptainer)", err)
		}
		if driver == "apptainer-userns" && os.Geteuid() != 0 {
			t.Skip("--userns mode is for a host running as root")
		}
		dc, _ := config.Parse(nil, "defaults", config.Vars{})
		cfg.ImageDir, cfg.DefaultImage = dc.Sandbox.ImageDir, "default"
		if _, err := os.Stat(filepath.Join(cfg.ImageDir, "default.sif")); err != nil {
			sdktest.Missing(t, "the default.sif image (make image)", err)
		}
		// "apptainer" runs rootless as an ordinary account (nobody) when the
		// tests run as root; "apptainer-userns" runs as root with --userns.
		cfg.Driver, cfg.ApptainerRootMode = "apptainer", "user"
		if driver == "apptainer-userns" {
			cfg.ApptainerRootMode = "userns"
		}
	}
	cfg.WorkRoot, cfg.Agent, cfg.MaxStarting = root, agentBin, 8
	m, err := New(Config{Driver: cfg.Driver, ApptainerRootMode: cfg.ApptainerRootMode, ImageDir: cfg.ImageDir, DefaultImage: cfg.DefaultImage,
		WorkRoot: root, Agent: agentBin, MaxStarting: 8, Limits: lim},
		hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	// Closed at the end even where a test closes it itself (Close may be
	// called again): else its cgroups, a forker's spare among them, outlive
	// the test.
	t.Cleanup(m.Close)
	return m
}

var drivers = []string{"bwrap", "none", "apptainer", "apptainer-userns"}

func TestDrivers(t *testing.T) {
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			root := workRoot(t)
			m := newManager(t, driver, root)
			defer m.Close()
			ctx := context.Background()
			s, err := m.Start(ctx, "rollout-1", Spec{})
			if err != nil {
				t.Fatal(err)
			}
			run := func(cmd string, timeout time.Duration) *ExecResult {
				t.Helper()
				r, err := s.Session(ctx, cmd, timeout)
				if err != nil {
					t.Fatalf("session %q: %v", cmd, err)
				}
				return r
			}
			t.Run("exec", func(t *testing.T) {
				r, err := s.Exec(ctx, []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, nil, 5*time.Second, "", nil, nil)
				if err != nil || string(r.Stdout) != "out\n" || string(r.Stderr) != "err\n" || r.ExitCode != 3 {
					t.Fatalf("%+v %v", r, err)
				}
				r, err = s.Exec(ctx, []string{"cat"}, []byte("stdin data"), 5*time.Second, "", nil, nil)
				if err != nil || string(r.Stdout) != "stdin data" {
					t.Fatalf("stdin: %+v %v", r, err)
				}
			})
			t.Run("persistent session", func(t *testing.T) {
				if r := run("mkdir -p sub && cd sub && export GREETING=hello && f() { echo fn; }", 5*time.Second); r.ExitCode != 0 {
					t.Fatalf("setup: %+v stderr %q", r, r.Stderr)
				}
				r := run(`pwd; echo $GREETING; f; printf 'no newline'`, 5*time.Second)
				want := fmt.Sprintf("%s/sub\nhello\nfn\nno newline", s.Inner)
				if string(r.Stdout) != want || r.ExitCode != 0 {
					t.Fatalf("got %q (exit %d), want %q", r.Stdout, r.ExitCode, want)
				}
				r = run("cd "+s.Inner+"; false", 5*time.Second)
				if r.ExitCode != 1 {
					t.Fatalf("exit code %d", r.ExitCode)
				}
				r = run("cat <<'EOF'\nünïcödé ✓ \\ $HOME `x`\nline two\nEOF", 5*time.Second)
				if string(r.Stdout) != "ünïcödé ✓ \\ $HOME `x`\nline two\n" {
					t.Fatalf("heredoc: %q", r.Stdout)
				}
				r = run("echo to-stderr >&2; read x; echo read=$?", 5*time.Second)
				if string(r.Stderr) != "to-stderr\n" || string(r.Stdout) != "read=1\n" {
					t.Fatalf("stderr %q stdout %q: stdin must not be the control channel", r.Stderr, r.Stdout)
				}
			})
			t.Run("files", func(t *testing.T) {
				if err := s.WriteFile(ctx, "dir/a.txt", []byte("hello\x00world"), 0o600); err != nil {
					t.Fatal(err)
				}
				b, trunc, err := s.ReadFile(ctx, "dir/a.txt", 0)
				if err != nil || string(b) != "hello\x00world" || trunc {
					t.Fatalf("%q %v %v", b, trunc, err)
				}
				if b, trunc, _ := s.ReadFile(ctx, "dir/a.txt", 5); string(b) != "hello" || !trunc {
					t.Fatalf("truncated read %q %v", b, trunc)
				}
				ents, err := s.ListDir(ctx, "dir")
				if err != nil || len(ents) != 1 || ents[0].Name != "a.txt" || ents[0].Size != 11 {
					t.Fatalf("%+v %v", ents, err)
				}
				if r := run("cat dir/a.txt | tr -d '\\000'", 5*time.Second); string(r.Stdout) != "helloworld" {
					t.Fatalf("written file not visible to the session: %q", r.Stdout)
				}
				if _, _, err := s.ReadFile(ctx, "missing", 0); err == nil {
					t.Fatal("reading a missing file succeeded")
				}
			})
			t.Run("timeout kills the command tree, session survives", func(t *testing.T) {
				run("cd "+s.Inner+" && export GREETING=hello", 5*time.Second)
				start := time.Now()
				r := run("sleep 300 & sleep 300; echo never", 500*time.Millisecond)
				if !r.TimedOut || r.ExitCode != 124 || strings.Contains(string(r.Stdout), "never") {
					t.Fatalf("%+v", r)
				}
				if time.Since(start) > 5*time.Second {
					t.Fatalf("timeout took %s", time.Since(start))
				}
				if r := run("echo alive; pwd; echo $GREETING", 5*time.Second); string(r.Stdout) != "alive\n"+s.Inner+"\nhello\n" {
					t.Fatalf("session not usable, or its state lost, after a timeout: %q", r.Stdout)
				}
				if r := run("pgrep -x sleep | wc -l", 5*time.Second); strings.TrimSpace(string(r.Stdout)) != "0" && driver != "none" {
					t.Fatalf("sleeps survived: %q", r.Stdout)
				}
				// A builtin loop cannot be killed from outside the shell: the session restarts.
				r = run("while :; do :; done", 300*time.Millisecond)
				if !r.TimedOut || !strings.Contains(string(r.Stderr), "restarted") {
					t.Fatalf("%+v", r)
				}
				if r := run("echo back", 5*time.Second); string(r.Stdout) != "back\n" {
					t.Fatalf("session did not restart: %+v", r)
				}
				er, err := s.Exec(ctx, []string{"sh", "-c", "sleep 300 & sleep 300"}, nil, 300*time.Millisecond, "", nil, nil)
				if err != nil || !er.TimedOut {
					t.Fatalf("exec timeout: %+v %v", er, err)
				}
			})
			t.Run("output truncated", func(t *testing.T) {
				r := run("head -c 200000 /dev/zero | tr '\\000' x", 5*time.Second)
				if !r.Truncated || len(r.Stdout) != 64<<10 {
					t.Fatalf("truncated=%v len=%d", r.Truncated, len(r.Stdout))
				}
			})
			if driver == "none" {
				return
			}
			apptainer := strings.HasPrefix(driver, "apptainer")
			t.Run("no network", func(t *testing.T) {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				port := ln.Addr().(*net.TCPAddr).Port
				r := run(fmt.Sprintf("timeout 3 bash -c 'echo hi > /dev/tcp/127.0.0.1/%d' && echo CONNECTED; ls /sys/class/net 2>/dev/null | tr '\\n' ' '", port), 10*time.Second)
				if strings.Contains(string(r.Stdout), "CONNECTED") {
					t.Fatal("the host's loopback is reachable from the sandbox")
				}
			})
			t.Run("writes outside the work dir fail", func(t *testing.T) {
				if apptainer {
					// --writable-tmpfs makes the root writable in memory; what
					// matters is that nothing reaches the host.
					marker := fmt.Sprintf("prorl-escape-%d", time.Now().UnixNano())
					run("touch /tmp/"+marker+" /var/tmp/"+marker+" 2>/dev/null; true", 5*time.Second)
					for _, p := range []string{"/tmp/" + marker, "/var/tmp/" + marker} {
						if _, err := os.Stat(p); err == nil {
							os.Remove(p)
							t.Errorf("a write to %s inside reached the host", p)
						}
					}
					return
				}
				for _, p := range []string{"/usr/x", "/x", "/etc/x", "/bin/x"} {
					if r := run("touch "+p+" && echo WROTE", 5*time.Second); strings.Contains(string(r.Stdout), "WROTE") {
						t.Errorf("wrote %s", p)
					}
				}
				if r := run("touch /tmp/scratch && echo ok", 5*time.Second); string(r.Stdout) != "ok\n" {
					t.Errorf("/tmp must be writable scratch: %+v", r)
				}
			})
			t.Run("fork bomb and memory hog are stopped", func(t *testing.T) {
				if driver == "apptainer-userns" {
					t.Skip("as root with --userns the kernel does not apply RLIMIT_NPROC (real uid 0): for a process limit use apptainer_root_mode = \"user\" or the bwrap driver")
				}
				r := run("bomb() { bomb | bomb & }; bomb; sleep 1; echo survived", 3*time.Second)
				if r := run("echo alive", 10*time.Second); string(r.Stdout) != "alive\n" {
					t.Fatalf("session dead after a fork bomb: %+v", r)
				}
				_ = r
				r = run(`python3 -c "x = bytearray(2 * 1024**3); print('allocated')"`, 20*time.Second)
				if strings.Contains(string(r.Stdout), "allocated") || r.ExitCode == 0 {
					t.Fatalf("memory hog not stopped: %+v", r)
				}
			})
			t.Run("nothing left after stop", func(t *testing.T) {
				run("sleep 300 &", 5*time.Second)
				label := labelPrefix(m.instance) + s.ID
				if n := countLabelled(label); n == 0 {
					t.Fatal("no labelled process while running")
				}
				var inside []int
				started := map[int]string{} // a pid's start time: under load a pid is soon reused by another process
				if s.cgroup != nil {
					if inside = s.cgroup.Procs(); len(inside) < 3 {
						t.Fatalf("the sandbox's cgroup holds %v: the launcher, the agent and the session at least", inside)
					}
					for _, p := range inside {
						started[p], _ = procStat(strconv.Itoa(p))
					}
				}
				if err := m.Stop(s.ID); err != nil {
					t.Fatal(err)
				}
				deadline := time.Now().Add(10 * time.Second)
				for countLabelled(label)+countLabelled(instancePrefix(m.instance)+s.ID) > 0 && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
				if n := countLabelled(label) + countLabelled(instancePrefix(m.instance)+s.ID); n != 0 {
					t.Fatalf("%d processes left after stop", n)
				}
				// Killed processes take a moment to exit on a loaded machine.
				alive := func() []int {
					var out []int
					for _, p := range inside {
						if st, zombie := procStat(strconv.Itoa(p)); !zombie && st == started[p] {
							out = append(out, p)
						}
					}
					return out
				}
				for len(alive()) > 0 && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
				for _, p := range alive() {
					t.Errorf("process %d of the sandbox is alive 10 s after stop", p)
				}
				if _, err := os.Stat(s.WorkDir); !os.IsNotExist(err) {
					t.Fatalf("work dir left: %v", err)
				}
				if _, err := s.Session(ctx, "true", time.Second); err == nil {
					t.Fatal("a stopped sandbox answered")
				}
			})
		})
	}
}

func countLabelled(prefix string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if (strings.Contains(string(b), prefix) || strings.Contains(string(env), labelEnv+"="+prefix)) && !isZombie(e.Name()) {
			n++
		}
	}
	return n
}

func isZombie(pid string) bool {
	_, zombie := procStat(pid)
	return zombie
}

// procStat is a process's start time (clock ticks since boot: with the pid,
// what tells a process from a later one given the same pid) and whether it
// is gone or a zombie.
func procStat(pid string) (start string, gone bool) {
	f, err := cgroup.ProcStatFields(pid) // from field 3, the state; field 22 is the start time
	if err != nil {
		return "", true
	}
	if len(f) > 19 {
		start = f[19]
	}
	return start, f[0] == "Z"
}

// A host that died without stopping its sandboxes leaves processes and dirs;
// the next host's manager reaps them at start.
func TestReaper(t *testing.T) {
	root := workRoot(t)
	a := newManager(t, "bwrap", root)
	s, err := a.Start(context.Background(), "r", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Session(context.Background(), "sleep 300 &", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// "Crash": the lock goes as it would with the process, and so does the
	// thread waiting in a spare group; nothing is stopped.
	a.lock.Close()
	var groups []string
	if a.cgroups != nil {
		groups = a.cgroups.Abandon()
	}
	label := labelPrefix(a.instance)
	if countLabelled(label) == 0 {
		t.Fatal("nothing to reap")
	}
	b := newManager(t, "bwrap", root)
	defer b.Close()
	deadline := time.Now().Add(5 * time.Second)
	for countLabelled(label) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := countLabelled(label); n > 0 {
		t.Fatalf("%d processes of the dead host survived the reaper", n)
	}
	if a.cfg.WorkRoot != root {
		t.Fatalf("work root moved to %s", a.cfg.WorkRoot)
	}
	if _, err := os.Stat(filepath.Join(root, a.instance)); !os.IsNotExist(err) {
		t.Fatalf("dead host's dir left: %v", err)
	}
	for _, g := range groups {
		if _, err := os.Stat(g); g != "" && !os.IsNotExist(err) {
			t.Fatalf("dead host's cgroup %s left: %v", g, err)
		}
	}
}

// Hosts starting while others reap: a reaper never takes a starting
// host's instance directory, which it would see for a moment without a
// held lock.
func TestNewWhileReaping(t *testing.T) {
	root := workRoot(t)
	reaper := newManager(t, "none", root)
	defer reaper.Close()
	defer hammer.Start(4, reaper.Reap)()
	for i := range 200 {
		m, err := New(Config{Driver: "none", WorkRoot: root, Agent: agentBin}, hclog.NewNullLogger())
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		if _, err := os.Stat(filepath.Join(root, m.instance, dirlock.Name)); err != nil {
			t.Fatalf("start %d: its instance directory was reaped: %v", i, err)
		}
		m.Close()
	}
}

// The agent's shell session keeps state in a directory of the agent's
// temporary directory; under driver none that is the host's, so the agent
// removes it when it stops.
func TestSessionStateRemoved(t *testing.T) {
	m := newManager(t, "none", workRoot(t))
	defer m.Close()
	tmp := t.TempDir()
	s, err := m.Start(context.Background(), "r", Spec{Env: map[string]string{"TMPDIR": tmp}})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Session(context.Background(), "cd /; echo ok", 5*time.Second); err != nil || string(r.Stdout) != "ok\n" {
		t.Fatalf("%+v %v", r, err)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, ".prorl-session-*")); len(left) != 1 {
		t.Fatalf("session state %v: the test no longer sees where it is", left)
	}
	if err := m.Stop(s.ID); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, ".prorl-session-*")); len(left) != 0 {
		t.Fatalf("left after the sandbox stopped: %v", left)
	}
}

// A task's SandboxSpec.Env is the environment of every command in the
// sandbox, exec'd or in the session, under every driver; a request's own
// variables win over it, and the launcher's list of names stays out.
func TestSpecEnv(t *testing.T) {
	value := "a,b=c 'q' \"d\" $x ${y} `id` \\ \\$ é\nline two\\"
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			m := newManager(t, driver, workRoot(t))
			defer m.Close()
			ctx := context.Background()
			s, err := m.Start(ctx, "r", Spec{Env: map[string]string{"TASK_VAR": value, "OTHER": "spec", "PATH": "/opt/task/bin:/usr/bin:/bin"}})
			if err != nil {
				t.Fatal(err)
			}
			const show = `printf '%s|%s|%s|%s' "$TASK_VAR" "$OTHER" "$PATH" "${PRORL_SANDBOX_ENV-unset}"`
			want := value + "|spec|/opt/task/bin:/usr/bin:/bin|unset"
			r, err := s.Exec(ctx, []string{"sh", "-c", show}, nil, 10*time.Second, "", nil, nil)
			if err != nil || string(r.Stdout) != want {
				t.Fatalf("exec: %q (%v), want %q; stderr %q", r.Stdout, err, want, r.Stderr)
			}
			r, err = s.Exec(ctx, []string{"sh", "-c", show}, nil, 10*time.Second, "", map[string]string{"OTHER": "request"}, nil)
			if want := strings.Replace(want, "|spec|", "|request|", 1); err != nil || string(r.Stdout) != want {
				t.Fatalf("exec with the request's env: %q (%v), want %q", r.Stdout, err, want)
			}
			r, err = s.Session(ctx, show, 10*time.Second)
			if err != nil || string(r.Stdout) != want {
				t.Fatalf("session: %q (%v), want %q; stderr %q", r.Stdout, err, want, r.Stderr)
			}
		})
	}
	m := newManager(t, "none", workRoot(t))
	defer m.Close()
	for _, name := range []string{"", "A=B", "A:B", "1A", "A B", "PRORL_SANDBOX_ENV"} {
		if _, err := m.Start(context.Background(), "r", Spec{Env: map[string]string{name: "v"}}); err == nil || !strings.Contains(err.Error(), "env") {
			t.Errorf("variable %q: %v, want an error naming the env", name, err)
		}
	}
	if _, err := m.Start(context.Background(), "r", Spec{Env: map[string]string{"A": "a\x00b"}}); err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("a NUL in a value: %v", err)
	}
}

// Under driver none, what a command leaves in its temporary directory (a
// judge's directory, after the code under test kills the judge) goes with
// the sandbox, not into the host's /tmp.
func TestNoneTempDirRemoved(t *testing.T) {
	m := newManager(t, "none", workRoot(t))
	defer m.Close()
	s, err := m.Start(context.Background(), "r", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Session(context.Background(), "mktemp -d", 5*time.Second)
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	left := strings.TrimSpace(string(r.Stdout))
	if !strings.HasPrefix(left, m.cfg.WorkRoot+"/") {
		t.Fatalf("temporary directory %s is outside the work root %s", left, m.cfg.WorkRoot)
	}
	if err := m.Stop(s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s after the sandbox stopped: %v", left, err)
	}
}

// As root, a work root inside a private directory is replaced by one the
// sandboxes' uids can reach, and sandboxes work there.
func TestPrivateWorkRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root host gives sandboxes their own uids")
	}
	private := filepath.Join(t.TempDir(), "data") // TempDir is 0700
	m := newManager(t, "bwrap", private)
	defer m.Close()
	if m.cfg.WorkRoot == private || !traversable(m.cfg.WorkRoot) {
		t.Fatalf("work root %s", m.cfg.WorkRoot)
	}
	s, err := m.Start(context.Background(), "r", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Session(context.Background(), "echo ok > f && cat f", 5*time.Second); err != nil || string(r.Stdout) != "ok\n" {
		t.Fatalf("%+v %v", r, err)
	}
	_ = syscall.Getpid()
}

// The default image built by `make image`: Debian with python3, pytest, git
// and patch, as a read-only root.
func TestDefaultImage(t *testing.T) {
	cfg, err := config.Parse(nil, "defaults", config.Vars{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RootDir(cfg.Sandbox.ImageDir, "default"); err != nil {
		sdktest.Missing(t, "the default image (make image)", err)
	}
	m, err := New(Config{Driver: "bwrap", ImageDir: cfg.Sandbox.ImageDir, DefaultImage: "default", WorkRoot: workRoot(t), Agent: agentBin,
		Limits: Limits{MemoryBytes: 2 << 30, MaxProcesses: 256}}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.Start(context.Background(), "img", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Session(context.Background(), `cat /etc/debian_version >/dev/null && python3 -c "import pytest; print('pytest', pytest.__version__ > '7')" && git --version >/dev/null && patch --version >/dev/null && touch /etc/x 2>/dev/null || echo ro`, 30*time.Second)
	if err != nil || string(r.Stdout) != "pytest True\nro\n" {
		t.Fatalf("%q %q %v", r.Stdout, r.Stderr, err)
	}
}

// A sandbox that cannot start is tried again, then reported with the attempts.
func TestStartRetried(t *testing.T) {
	m := newManager(t, "bwrap", workRoot(t))
	defer m.Close()
	r := m.Reserve("r", Spec{Image: "no-such-image"})
	defer r.Release()
	t0 := time.Now()
	_, err := r.Sandbox(context.Background())
	if err == nil || !strings.Contains(err.Error(), "after 3 attempts") || !strings.Contains(err.Error(), "no-such-image") {
		t.Fatalf("err = %v", err)
	}
	if el := time.Since(t0); el < 500*time.Millisecond {
		t.Fatalf("no backoff between attempts (%s)", el)
	}
	if _, err2 := r.Sandbox(context.Background()); err2 == nil {
		t.Fatal("a failed reservation started later")
	}
}

// A start its caller abandoned (a plugin call cut by the plugin's crash)
// is not the sandbox's failure: the next caller starts it. A start failed
// on purpose ([sandbox] fault_start_rate) is final, as a real one is.
func TestAbandonedStartTriedAgain(t *testing.T) {
	m := newManager(t, "bwrap", workRoot(t))
	defer m.Close()
	r := m.Reserve("r", Spec{})
	defer r.Release()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Sandbox(gone); err == nil {
		t.Fatal("started for a caller that had left")
	}
	sb, err := r.Sandbox(context.Background())
	if err != nil {
		t.Fatalf("the next caller: %v", err)
	}
	if again, _ := r.Sandbox(context.Background()); again != sb {
		t.Fatal("a second sandbox for one reservation")
	}
	// A caller waiting for another's start waits no longer than its own context.
	w := m.Reserve("w", Spec{})
	defer w.Release()
	w.start <- struct{}{} // a start under way
	short, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer stop()
	if _, err := w.Sandbox(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a waiter past its context: %v", err)
	}
	<-w.start
	m.cfg.FaultStartRate = 1
	f := m.Reserve("f", Spec{})
	defer f.Release()
	for range 2 {
		if _, err := f.Sandbox(context.Background()); !errors.Is(err, ErrInjected) {
			t.Fatalf("fault_start_rate 1: %v", err)
		}
	}
}

// A writable directory is the sandbox's own copy of the image's, in place:
// writable by commands, bounded by the disk budget, unseen by the image and
// by other sandboxes.
func TestWritable(t *testing.T) {
	cfg, err := config.Parse(nil, "defaults", config.Vars{})
	if err != nil {
		t.Fatal(err)
	}
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			m := newManagerLimits(t, driver, workRoot(t), Limits{MemoryBytes: 2 << 30, MaxProcesses: 128, DiskBytes: 8 << 20, MaxOutputBytes: 64 << 10})
			defer m.Close()
			spec := Spec{Image: "default", Writable: []string{"/etc"}}
			if driver == "bwrap" {
				if _, err := RootDir(cfg.Sandbox.ImageDir, "default"); err != nil {
					t.Skipf("no default image: %v", err)
				}
				m.cfg.ImageDir = cfg.Sandbox.ImageDir
				m.driver.(*Bwrap).ImageDir = cfg.Sandbox.ImageDir
			}
			ctx := context.Background()
			if driver == "none" {
				if _, err := m.Start(ctx, "w", spec); err == nil || !strings.Contains(err.Error(), "none driver") {
					t.Fatalf("none driver: %v", err)
				}
				return
			}
			for _, bad := range []string{"/work/x", "/tmp", "relative", "/", "/etc/../work"} {
				if _, err := m.Start(ctx, "w", Spec{Image: "default", Writable: []string{bad}}); err == nil {
					t.Fatalf("writable %q accepted", bad)
				}
			}
			if _, err := m.Start(ctx, "w", Spec{Image: "default", Writable: []string{"/no/such/dir"}}); err == nil || !strings.Contains(err.Error(), "/no/such/dir") {
				t.Fatalf("missing directory: %v", err)
			}
			a, err := m.Start(ctx, "a", spec)
			if err != nil {
				t.Fatal(err)
			}
			b, err := m.Start(ctx, "b", spec)
			if err != nil {
				t.Fatal(err)
			}
			run := func(s *Sandbox, cmd string) string {
				t.Helper()
				r, err := s.Exec(ctx, []string{"sh", "-c", cmd}, nil, 20*time.Second, "", nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				return string(r.Stdout) + string(r.Stderr)
			}
			// The image's content, its symlinks and modes, writable in place.
			if got := run(a, `cat /etc/debian_version >/dev/null && readlink /etc/os-release && stat -c %a /etc/debian_version && echo changed > /etc/prorl-w && cat /etc/prorl-w && echo x >> /etc/debian_version && echo ok`); got != "../usr/lib/os-release\n644\nchanged\nok\n" {
				t.Fatalf("sandbox a: %q", got)
			}
			if got := run(b, `cat /etc/prorl-w 2>/dev/null || echo absent; tail -c 2 /etc/debian_version | od -c | head -1`); !strings.HasPrefix(got, "absent\n") || strings.Contains(got, "x") {
				t.Fatalf("sandbox b sees a's changes: %q", got)
			}
			// Bounded: 8 MiB of budget, 16 MiB written.
			if got := run(a, `head -c 16777216 /dev/zero > /etc/big 2>/dev/null; echo $?; stat -c %s /etc/big`); strings.HasPrefix(got, "0\n") {
				t.Fatalf("wrote past the disk budget: %q", got)
			}
			if _, err := os.Stat(filepath.Join(cfg.Sandbox.ImageDir, "default", "rootfs", "etc", "prorl-w")); err == nil {
				t.Fatal("the image was changed")
			}
		})
	}
}
