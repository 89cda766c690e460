package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/rundir"
	"github.com/prorl/prorl/internal/syncbuf"
	pb "github.com/prorl/prorl/sdk/proto"
	"github.com/prorl/prorl/sdk/sdktest"

	"github.com/prorl/prorl/internal/testbin"
)

var envPlugin, countdown string

func TestMain(m *testing.M) {
	dir, cleanup := testbin.ForMain("pluginhost", map[string]string{"envplugin": "github.com/prorl/prorl/core/pluginhost/testdata/envplugin",
		"countdown": "github.com/prorl/prorl/sdk/examples/countdown"})
	envPlugin, countdown = filepath.Join(dir, "envplugin"), filepath.Join(dir, "countdown")
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// pcfg's start timeout is a minute: the Python countdown (an interpreter
// importing grpc) missed 10 s four times running in a fresh machine's make
// test, beside e2e's vLLM on the 2 cores. Tests of the timeout set their own.
func pcfg(path, sha string) *config.Plugin {
	return &config.Plugin{Enabled: true, Path: path, SHA256: sha, Env: map[string]string{"ALLOWED": "yes"},
		StartTimeout: config.Duration{Duration: time.Minute}, MaxRestarts: 3, RestartWindow: config.Duration{Duration: time.Minute}}
}

func TestSHA256Mismatch(t *testing.T) {
	good, err := HashFile(envPlugin)
	if err != nil {
		t.Fatal(err)
	}
	wrong := strings.Repeat("ab", 32)
	_, err = Start(context.Background(), hclog.NewNullLogger(), map[string]*config.Plugin{"envtest": pcfg(envPlugin, wrong)}, nil, Options{Instance: "t", SocketDir: shortDir(t)})
	if err == nil {
		t.Fatal("a wrong sha256 was accepted")
	}
	for _, want := range []string{"plugin envtest", good, wrong} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	m, err := Start(context.Background(), hclog.NewNullLogger(), map[string]*config.Plugin{"envtest": pcfg(envPlugin, strings.ToUpper(good))}, nil, Options{Instance: "t", SocketDir: shortDir(t)})
	if err != nil {
		t.Fatalf("the right sha256 was refused: %v", err)
	}
	m.Stop()
}

func TestEnvCrashRestart(t *testing.T) {
	t.Setenv("PRORL_SECRET_TOKEN", "hunter2")
	ctx := context.Background()
	var logBuf syncbuf.Buffer
	hostLog := hclog.New(&hclog.LoggerOptions{Output: &logBuf, Level: hclog.Info})
	m, err := Start(ctx, hostLog, map[string]*config.Plugin{"envtest": pcfg(envPlugin, "")}, nil, Options{Instance: "t", SocketDir: shortDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	p, ok := m.ByDataSource("envx-42")
	if !ok || p.Name != "envtest" {
		t.Fatal("data_source prefix routing")
	}
	c, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.rpc.CallTool(ctx, &pb.CallToolRequest{RolloutId: "r-logged", Call: &pb.ToolCall{Name: "env", ArgumentsJson: []byte("{}")}})
	if err != nil {
		t.Fatal(err)
	}
	// The SDK logger's line and a plain stderr line reach the host's log
	// (at info) with the plugin's name, the first with the rollout id.
	deadline := time.Now().Add(5 * time.Second)
	for !(strings.Contains(logBuf.String(), "a plain line on stderr") && strings.Contains(logBuf.String(), "env tool called")) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for _, l := range strings.Split(logBuf.String(), "\n") {
		switch {
		case strings.Contains(l, "env tool called") && !(strings.Contains(l, "plugin.envtest") && strings.Contains(l, "rollout=r-logged")):
			t.Errorf("SDK log line without plugin or rollout: %s", l)
		case strings.Contains(l, "a plain line on stderr") && !strings.Contains(l, "plugin.envtest"):
			t.Errorf("stderr line without the plugin: %s", l)
		}
	}
	if !strings.Contains(logBuf.String(), "a plain line on stderr") || !strings.Contains(logBuf.String(), "env tool called") {
		t.Fatalf("host log lacks the plugin's lines (%d bytes):\n%s", len(logBuf.String()), logBuf.String())
	}
	if strings.Contains(r.Output, "hunter2") || !strings.Contains(r.Output, "ALLOWED=yes") {
		t.Fatalf("plugin env:\n%s", r.Output)
	}
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, callErr := c.rpc.CallTool(ctx, &pb.CallToolRequest{Call: &pb.ToolCall{Name: "env"}})
	if callErr == nil {
		// The call may race the kill; the epoch check below still catches it.
		callErr = errors.New("late")
	}
	deadline = time.Now().Add(20 * time.Second)
	for p.Epoch() == c.Epoch && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.Check(c.Epoch, callErr); !errors.Is(err, ErrCrashed) {
		t.Fatalf("Check after crash = %v", err)
	}
	c2, err := p.Acquire(ctx)
	if err != nil {
		t.Fatalf("no restart: %v", err)
	}
	if c2.Epoch == c.Epoch {
		t.Fatal("epoch did not change")
	}
	if _, err := c2.rpc.GetInfo(ctx, &pb.GetInfoRequest{}); err != nil {
		t.Fatalf("restarted plugin: %v", err)
	}
	if s := p.Status(); s.Restarts != 1 || !s.Healthy {
		t.Fatalf("status %+v", s)
	}
}

// TestSwapLoopNeverRunsUnpinned: while a loop renames an impostor over
// the pinned path and back, every start either runs the pinned binary or
// is refused; the impostor never runs.
func TestSwapLoopNeverRunsUnpinned(t *testing.T) {
	good, err := HashFile(envPlugin)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "plugin")
	marker := filepath.Join(dir, "impostor-ran")
	impostor := filepath.Join(dir, "impostor")
	if err := os.WriteFile(impostor, []byte("#!/bin/sh\ntouch "+marker+"\nexec "+envPlugin+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(envPlugin)
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		swaps := 0
		for {
			select {
			case <-stop:
				done <- swaps
				return
			default:
			}
			// path <-> impostor, by rename: each is atomic, as an attacker's would be.
			_ = os.Rename(path, path+".real")
			_ = os.Link(impostor, path)
			time.Sleep(200 * time.Microsecond)
			_ = os.Remove(path)
			_ = os.Rename(path+".real", path)
			swaps++
			time.Sleep(time.Millisecond) // the real binary in place most of the time
		}
	}()
	started, refused := 0, 0
	for i := 0; i < 150; i++ {
		p := &Plugin{Name: "swap", cfg: pcfg(path, good), hs: HostServices(nil), log: hclog.NewNullLogger(), ready: make(chan struct{}), opts: Options{Instance: "t", SocketDir: shortDir(t)}}
		if err := p.start(context.Background()); err != nil {
			refused++
			continue
		}
		started++
		p.stop()
	}
	close(stop)
	swaps := <-done
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the impostor ran (%d starts, %d refused, %d swaps)", started, refused, swaps)
	}
	// With the swapping over, the pinned binary starts (the refusals were
	// the swaps', not the mechanism's).
	p := &Plugin{Name: "swap", cfg: pcfg(path, good), hs: HostServices(nil), log: hclog.NewNullLogger(), ready: make(chan struct{}), opts: Options{Instance: "t", SocketDir: shortDir(t)}}
	if err := p.start(context.Background()); err != nil {
		t.Fatalf("the pinned binary in place did not start: %v", err)
	}
	p.stop()
	t.Logf("%d starts of the pinned binary, %d refused, %d swaps; the impostor never ran", started, refused, swaps)
}

// TestHangingPluginCannotWedgeStart: a plugin that never handshakes,
// ignores signals and forks a child holding its output is killed, group
// and all, within its start timeout, and start-up goes on.
func TestHangingPluginCannotWedgeStart(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "hang")
	pidFile := filepath.Join(dir, "child")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntrap '' TERM INT HUP\nsleep 300 &\necho $! > "+pidFile+"\nwhile :; do sleep 1; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := pcfg(script, "")
	c.StartTimeout = config.Duration{Duration: time.Second}
	t0 := time.Now()
	_, err := Start(context.Background(), hclog.NewNullLogger(), map[string]*config.Plugin{"hang": c}, nil, Options{Instance: "t", SocketDir: shortDir(t)})
	took := time.Since(t0)
	if err == nil {
		t.Fatal("a plugin that never handshakes started")
	}
	if took > 5*time.Second {
		t.Fatalf("start-up took %v with a 1 s start timeout", took)
	}
	b, _ := os.ReadFile(pidFile)
	var pid int
	if _, err := fmt.Sscanf(string(b), "%d", &pid); err != nil {
		t.Fatalf("no child pid: %q", b)
	}
	deadline := time.Now().Add(3 * time.Second)
	for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if syscall.Kill(pid, 0) == nil && !zombie(pid) {
		t.Errorf("the plugin's child %d outlived it", pid)
	}
	t.Logf("refused in %v: %v", took, err)
}

func zombie(pid int) bool {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || (len(s) > i+2 && s[i+2] == 'Z')
}

// countdowns are the configurations of the Go countdown example and its
// Python twin, the latter started as the admin configures it: the venv's
// python as path, the script as args. Each call is a fresh one.
func countdowns(t *testing.T) map[string]func() *config.Plugin {
	py := sdktest.Reference(t, "../../scripts/ref.py", "pysdk")
	script, err := filepath.Abs("../../sdk/python/examples/countdown.py")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]func() *config.Plugin{
		"go": func() *config.Plugin { return pcfg(countdown, "") },
		"python": func() *config.Plugin {
			pc := pcfg(py, "")
			pc.Args = []string{script}
			return pc
		},
	}
}

// TestConfigSchema: the host checks a plugin's config table against the
// schema the plugin declares and names the key at fault, the same for the
// Go countdown example and its Python twin.
func TestConfigSchema(t *testing.T) {
	for lang, pc := range countdowns(t) {
		for _, c := range []struct {
			config map[string]any
			want   string
		}{
			{map[string]any{"max_turns": 0}, "[plugins.countdown.config] max_turns: must be at least 1, got 0"},
			{map[string]any{"max_turn": 3}, "[plugins.countdown.config] max_turn: unknown key (known: max_turns)"},
			{map[string]any{"max_turns": "3"}, "[plugins.countdown.config] max_turns: must be an integer, got string"},
			{map[string]any{"max_turns": 3}, ""},
		} {
			pc := pc()
			pc.Config = c.config
			m, err := Start(context.Background(), hclog.NewNullLogger(), map[string]*config.Plugin{"countdown": pc}, nil, Options{Instance: "t", SocketDir: shortDir(t)})
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%s: %v refused: %v", lang, c.config, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("%s: %v: got %v, want %q", lang, c.config, err, c.want)
			}
			if m != nil {
				m.Stop()
			}
		}
	}
}

// TestSocketsInSocketDir: a plugin's socket, and the host's end of its
// broker, are made in Options.SocketDir (a host's own directory, which the
// next host removes if this one is killed), not in the temporary
// directory; they are gone once the plugins stop. The same for the Go
// SDK's plugin and the Python SDK's. A SocketDir too long for a socket
// address under it is not used: the plugin still starts.
func TestSocketsInSocketDir(t *testing.T) {
	pcs := countdowns(t)
	for _, c := range []struct {
		lang    string
		tooLong bool
	}{{"go", false}, {"python", false}, {"go", true}, {"python", true}} {
		t.Run(fmt.Sprintf("%s/too long %v", c.lang, c.tooLong), func(t *testing.T) {
			sockDir, tmp := shortDir(t), shortDir(t)
			t.Setenv("TMPDIR", tmp)
			want, other := sockDir, tmp
			if c.tooLong {
				sockDir = filepath.Join(sockDir, strings.Repeat("d", rundir.MaxSocketPath-rundir.SocketRoom-len(sockDir)))
				if err := os.Mkdir(sockDir, 0o700); err != nil {
					t.Fatal(err)
				}
				want, other = tmp, sockDir
			}
			m, err := Start(context.Background(), hclog.NewNullLogger(), map[string]*config.Plugin{"countdown": pcs[c.lang]()}, nil, Options{Instance: "t", SocketDir: sockDir})
			if err != nil {
				t.Fatal(err)
			}
			var sockets []string
			_ = filepath.WalkDir(want, func(path string, d os.DirEntry, err error) error {
				if err == nil && d.Type()&os.ModeSocket != 0 {
					sockets = append(sockets, path)
				}
				return nil
			})
			left, _ := os.ReadDir(other)
			m.Stop()
			// The plugin's server and the host's broker end: two sockets;
			// without a SocketDir only the host's is in its TMPDIR (a
			// plugin's environment has none: its own goes to /tmp).
			if n := map[bool]int{false: 2, true: 1}[c.tooLong]; len(sockets) != n || len(left) != 0 {
				t.Errorf("sockets in %s: %v (want %d); in %s: %v (want none)", want, sockets, n, other, left)
			}
			if !c.tooLong {
				if after, _ := os.ReadDir(sockDir); len(after) != 0 {
					t.Errorf("left in SocketDir after Stop: %v", after)
				}
			}
		})
	}
}

// shortDir is a new directory whose path leaves room for sockets under it
// (t.TempDir's carry the test's name).
func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "ph")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
