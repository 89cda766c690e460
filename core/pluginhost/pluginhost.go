// Package pluginhost launches, verifies, supervises and restarts task-domain
// plugins (the go-plugin client side).
package pluginhost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/rundir"
	pb "github.com/prorl/prorl/sdk/proto"
	"github.com/prorl/prorl/sdk/wire"
)

// ErrCrashed marks a call that failed because the plugin process died or was
// restarted under the rollout.
var ErrCrashed = errors.New("plugin crashed")

// ErrUnhealthy means the plugin crashed too often and is not serving.
var ErrUnhealthy = errors.New("plugin unhealthy")

// State of a plugin.
type State string

const (
	StateStarting  State = "starting"
	StateRunning   State = "running"
	StateUnhealthy State = "unhealthy"
	StateStopped   State = "stopped"
)

// Plugin is one supervised plugin process.
type Plugin struct {
	Name string
	cfg  *config.Plugin
	log  hclog.Logger
	hs   pb.HostServicesServer
	opts Options

	mu       sync.Mutex
	client   *plugin.Client
	cmd      *exec.Cmd // the running process, for its process group
	rpc      pb.TaskDomainClient
	info     *Info
	epoch    uint64
	state    State
	lastErr  string
	restarts []time.Time
	total    int
	ready    chan struct{} // closed when running; replaced on crash
	stopping bool
}

// Verify checks the binary's sha256 against the pinned value.
func Verify(name string, p *config.Plugin) error {
	f, err := verified(name, p)
	if f != nil {
		f.Close()
	}
	return err
}

// verified reads a pinned binary once into a sealed memory file, hashes
// what it read, and returns that file: the host executes the very bytes
// it hashed, so no rename or rewrite of the path between the two can slip
// another binary in. Unpinned plugins are run by path (nil).
func verified(name string, p *config.Plugin) (*os.File, error) {
	if p.SHA256 == "" {
		return nil, nil
	}
	src, err := os.Open(p.Path)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", name, err)
	}
	defer src.Close()
	fd, err := unix.MemfdCreate("prorl-plugin-"+name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: memfd: %w", name, err)
	}
	mem := os.NewFile(uintptr(fd), "prorl-plugin-"+name)
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(h, mem), src); err != nil {
		mem.Close()
		return nil, fmt.Errorf("plugin %s: hash %s: %w", name, p.Path, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(got, p.SHA256) {
		mem.Close()
		return nil, fmt.Errorf("plugin %s: refusing to start %s: its sha256 is %s but the config pins %s", name, p.Path, got, strings.ToLower(p.SHA256))
	}
	if _, err := unix.FcntlInt(mem.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		mem.Close()
		return nil, fmt.Errorf("plugin %s: seal: %w", name, err)
	}
	return mem, nil
}

// execFD is where a verified binary appears in the plugin's process (the
// first of exec.Cmd's ExtraFiles); exec'ing /proc/self/fd/3 runs it
// (scripts too: the interpreter reads /dev/fd/3).
const execFD = 3

// HashFile returns a file's sha256 in hex, for pinning.
func HashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (p *Plugin) command(bin *os.File) *exec.Cmd {
	cmd := exec.Command(p.cfg.Path, p.cfg.Args...)
	if bin != nil {
		cmd.Path = fmt.Sprintf("/proc/self/fd/%d", execFD)
		cmd.ExtraFiles = []*os.File{bin}
	}
	cmd.Env = append([]string{}, wire.BaseEnv...)
	keys := make([]string, 0, len(p.cfg.Env))
	for k := range p.cfg.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+p.cfg.Env[k])
	}
	// Own process group, and killed with the host even on SIGKILL: no orphans.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Command is a plugin binary's admin subcommand (sdk.Command) as the
// host would run the plugin itself: the pinned bytes, the plugin's own
// environment only, with its config table as JSON in sdk.ConfigEnv.
// close releases the verified copy once the command has run.
func Command(name string, cfg *config.Plugin, args []string) (cmd *exec.Cmd, close func(), err error) {
	bin, err := verified(name, cfg)
	if err != nil {
		return nil, nil, err
	}
	table, err := json.Marshal(cfg.Config)
	if err != nil {
		if bin != nil {
			bin.Close()
		}
		return nil, nil, fmt.Errorf("plugin %s: its config table: %w", name, err)
	}
	cmd = (&Plugin{Name: name, cfg: cfg}).command(bin)
	cmd.Args = append(cmd.Args, args...)
	cmd.Env = append(cmd.Env, wire.ConfigEnv+"="+string(table))
	return cmd, func() {
		if bin != nil {
			bin.Close()
		}
	}, nil
}

// start launches and configures the process once.
func (p *Plugin) start(ctx context.Context) error {
	bin, err := verified(p.Name, p.cfg)
	if err != nil {
		return err
	}
	if bin != nil {
		defer bin.Close() // the child holds its own copy
	}
	cmd := p.command(bin)
	cc, err := wire.ClientConfig(cmd, p.hs, p.log)
	if err != nil {
		return fmt.Errorf("plugin %s: %w", p.Name, err)
	}
	cc.StartTimeout = p.cfg.StartTimeout.Duration
	if rundir.Fits(p.opts.SocketDir) {
		// go-plugin makes a directory of its own in SocketDir for the
		// plugin's socket and the host's end of its broker, names it to the
		// plugin (PLUGIN_UNIX_SOCKET_DIR, read by the Python SDK too) and
		// removes it when the plugin stops; only with a RunnerFunc, to
		// which it hands the handshake's environment on a command of its
		// own.
		cc.UnixSocketConfig = &plugin.UnixSocketConfig{TempDir: p.opts.SocketDir}
		cc.Cmd = nil
		cc.RunnerFunc = func(_ hclog.Logger, spec *exec.Cmd, _ string) (runner.Runner, error) {
			cmd.Env = append(cmd.Env, spec.Env...)
			cmd.Stdin = spec.Stdin
			return newProcRunner(cmd)
		}
	}
	// The process's own stderr before the plugin serves, then what the
	// plugin writes to os.Stderr/os.Stdout (go-plugin carries those over
	// gRPC once it serves, and drops them unless told where).
	cc.Stderr = &stderrLog{log: p.log}
	cc.SyncStderr = &stderrLog{log: p.log}
	cc.SyncStdout = &stderrLog{log: p.log.With("stream", "stdout")}
	client := plugin.NewClient(cc)
	fail := func(err error) error {
		p.kill(client, cmd, 0)
		return fmt.Errorf("plugin %s (%s): %w", p.Name, p.cfg.Path, err)
	}
	rpcClient, err := client.Client()
	if err != nil {
		return fail(err)
	}
	rd, err := wire.Dispense(rpcClient)
	if err != nil {
		return fail(err)
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout.Duration)
	defer cancel()
	info, err := rd.Client.GetInfo(cctx, &pb.GetInfoRequest{})
	if err != nil {
		return fail(fmt.Errorf("get info: %w", err))
	}
	cfgJSON, err := json.Marshal(p.cfg.Config)
	if err != nil || p.cfg.Config == nil {
		cfgJSON = []byte("{}")
	}
	// The table is checked against the schema the domain declares (SDK v2
	// generates it from the config type), so a wrong key or value is named
	// at start, under the admin's own key path.
	if len(info.ConfigSchemaJson) > 0 {
		if err := wire.ValidateSchema(info.ConfigSchemaJson, cfgJSON); err != nil {
			return fail(fmt.Errorf("[plugins.%s.config] %w", p.Name, err))
		}
	}
	cr, err := rd.Client.Configure(cctx, &pb.ConfigureRequest{ConfigJson: cfgJSON, HostServicesBrokerId: rd.HostServicesID, HostInstance: p.opts.Instance})
	if err != nil {
		return fail(fmt.Errorf("configure: %w", err))
	}
	if len(cr.Diagnostics) > 0 {
		d := cr.Diagnostics[0]
		return fail(fmt.Errorf("configuration refused: %s", d.Message))
	}
	p.mu.Lock()
	p.client, p.cmd, p.rpc, p.info = client, cmd, newBatchingClient(rd.Client), infoOf(info)
	p.epoch++
	// Published together with the client: a crash-looping plugin is never
	// seen running between its restart and being marked unhealthy.
	p.state = StateRunning
	if len(p.restarts) > p.cfg.MaxRestarts {
		p.state = StateUnhealthy
	}
	p.lastErr = ""
	close(p.ready)
	p.mu.Unlock()
	p.log.Info("plugin running", "version", info.Version, "pid", pidOf(cmd), "epoch", p.epoch)
	return nil
}

// pidOf is the plugin process's id, 0 before it started. (go-plugin's
// ReattachConfig knows it only when it ran the command itself.)
func pidOf(cmd *exec.Cmd) int {
	if cmd == nil || cmd.Process == nil {
		return 0
	}
	return cmd.Process.Pid
}

// supervise restarts the plugin whenever its process exits.
func (p *Plugin) supervise(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for {
		p.mu.Lock()
		c, cmd := p.client, p.cmd
		p.mu.Unlock()
		// go-plugin offers no exit channel; a short poll is cheap for a few processes.
		for c != nil && !c.Exited() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		if c != nil {
			// The process is gone; its client still holds connections and
			// goroutines (broker, stdio, controller) until killed.
			p.kill(c, cmd, 0)
		}
		p.mu.Lock()
		if p.stopping {
			p.mu.Unlock()
			return
		}
		now := time.Now()
		p.restarts = append(p.restarts, now)
		cut := 0
		for cut < len(p.restarts) && now.Sub(p.restarts[cut]) > p.cfg.RestartWindow.Duration {
			cut++
		}
		p.restarts = p.restarts[cut:]
		p.total++
		p.epoch++ // rollouts prepared under the old process fail as plugin_crashed
		p.rpc = nil
		p.state = StateStarting
		if len(p.restarts) > p.cfg.MaxRestarts {
			p.state = StateUnhealthy
		}
		p.ready = make(chan struct{})
		p.mu.Unlock()
		p.log.Error("plugin exited; restarting", "backoff", backoff, "restarts_in_window", len(p.restarts))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if err := p.start(ctx); err != nil {
			p.mu.Lock()
			p.lastErr = err.Error()
			p.client = nil
			p.mu.Unlock()
			p.log.Error("plugin restart failed", "error", err)
			backoff = min(backoff*2, 10*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
	}
}

// Acquire returns the running process's client, waiting for a restart up to
// the start timeout.
func (p *Plugin) Acquire(ctx context.Context) (Conn, error) {
	p.mu.Lock()
	rpc, epoch, ready, st := p.rpc, p.epoch, p.ready, p.state
	p.mu.Unlock()
	if rpc != nil {
		return Conn{rpc: rpc, Epoch: epoch}, nil
	}
	if st == StateStopped {
		return Conn{}, fmt.Errorf("plugin %s stopped", p.Name)
	}
	t := time.NewTimer(p.cfg.StartTimeout.Duration)
	defer t.Stop()
	select {
	case <-ready:
		return p.Acquire(ctx)
	case <-t.C:
		return Conn{}, fmt.Errorf("%w: plugin %s not running (%s)", ErrUnhealthy, p.Name, p.LastError())
	case <-ctx.Done():
		return Conn{}, ctx.Err()
	}
}

// Epoch is the current process generation.
func (p *Plugin) Epoch() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epoch
}

// Check maps a call error to ErrCrashed when the process that served the
// rollout is gone. A transport error may arrive a moment before the
// process is seen to exit: it waits up to a second to tell.
func (p *Plugin) Check(epoch uint64, err error) error {
	deadline := time.Now().Add(time.Second)
	for {
		p.mu.Lock()
		cur, c := p.epoch, p.client
		p.mu.Unlock()
		if cur != epoch || c == nil || c.Exited() {
			if err == nil {
				err = errors.New("process restarted")
			}
			return fmt.Errorf("%w: %s: %v", ErrCrashed, p.Name, err)
		}
		if err == nil || status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// AwaitRestart waits until a process newer than epoch runs (or the start
// timeout passes), so that a retried call does not meet the dead one.
func (p *Plugin) AwaitRestart(ctx context.Context, epoch uint64) {
	deadline := time.Now().Add(p.cfg.StartTimeout.Duration)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		p.mu.Lock()
		newer := p.epoch > epoch && p.rpc != nil
		stopping := p.stopping
		p.mu.Unlock()
		if newer || stopping {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// LastError is the last start failure.
func (p *Plugin) LastError() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// Info is the plugin's GetInfo answer.
func (p *Plugin) Info() *Info {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.info
}

// Has reports whether the plugin declared a capability.
func (p *Plugin) Has(capability string) bool {
	info := p.Info()
	return info != nil && slices.Contains(info.Capabilities, capability)
}

// Status is a plugin as GET /v1/domains shows it.
type Status struct {
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	Description string   `json:"description,omitempty"`
	State       State    `json:"state"`
	Healthy     bool     `json:"healthy"`
	Restarts    int      `json:"restarts"`
	LastError   string   `json:"last_error,omitempty"`
	DataSources []string `json:"data_sources,omitempty"`
	Tools       []string `json:"tools"`
	Path        string   `json:"path"`
	Pinned      bool     `json:"sha256_pinned"`
	PID         int      `json:"pid,omitempty"`
}

// Status reports the plugin.
func (p *Plugin) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stateLocked()
	s := Status{Name: p.Name, State: st, Healthy: st == StateRunning, Restarts: p.total, LastError: p.lastErr,
		Path: p.cfg.Path, Pinned: p.cfg.SHA256 != "", Tools: []string{}}
	if p.info != nil {
		s.Version, s.Description, s.DataSources = p.info.Version, p.info.Description, p.info.DataSources
		for _, t := range p.info.Tools {
			s.Tools = append(s.Tools, t.Name)
		}
	}
	if p.client != nil {
		s.PID = pidOf(p.cmd)
	}
	return s
}

// Healthy reports whether the plugin serves new rollouts.
func (p *Plugin) Healthy() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stateLocked() == StateRunning
}

// stateLocked derives the state: a crash-looping plugin is unhealthy until
// its crashes age out of the restart window.
func (p *Plugin) stateLocked() State {
	if p.state != StateUnhealthy || p.rpc == nil {
		return p.state
	}
	recent := 0
	for _, t := range p.restarts {
		if time.Since(t) <= p.cfg.RestartWindow.Duration {
			recent++
		}
	}
	if recent <= p.cfg.MaxRestarts {
		p.state = StateRunning
	}
	return p.state
}

// PID of the running process, 0 if none.
func (p *Plugin) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client == nil {
		return 0
	}
	return pidOf(p.cmd)
}

func (p *Plugin) stop() {
	p.mu.Lock()
	p.stopping = true
	p.state = StateStopped
	c, cmd := p.client, p.cmd
	p.rpc = nil
	p.mu.Unlock()
	if c != nil {
		p.kill(c, cmd, stopGrace) // graceful first: go-plugin asks the plugin to exit
	}
}

// stderrLog puts what a plugin writes to stderr outside the SDK's JSON
// log lines (a print, a traceback, a library's warning) into the host's
// log at warn level, with the plugin's name: go-plugin alone keeps such
// lines at debug, where a host at info never shows them.
type stderrLog struct {
	log  hclog.Logger
	mu   sync.Mutex
	part []byte
}

func (w *stderrLog) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, b...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			if len(w.part) > 64<<10 { // a line without end: say it in pieces
				w.line(w.part)
				w.part = w.part[:0]
			}
			return len(b), nil
		}
		w.line(w.part[:i])
		w.part = w.part[i+1:]
	}
}

func (w *stderrLog) line(l []byte) {
	l = bytes.TrimRight(l, "\r ")
	if len(l) == 0 {
		return
	}
	// The SDK's own lines are JSON hclog entries go-plugin already relays
	// at their level.
	if l[0] == '{' && bytes.Contains(l, []byte(`"@message"`)) && json.Valid(l) {
		return
	}
	w.log.Warn("plugin stderr", "line", string(l))
}

// stopGrace is how long a stopping plugin may take to exit by itself.
const stopGrace = 5 * time.Second

// kill ends a plugin process and everything in its process group, and
// never blocks for long: go-plugin's own Kill waits for the process's
// output pipes, which a child the plugin forked (a script's long sleep)
// can hold forever. With grace, go-plugin first asks the plugin to exit.
func (p *Plugin) kill(c *plugin.Client, cmd *exec.Cmd, grace time.Duration) {
	group := func() {
		if cmd != nil && cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	if grace == 0 {
		group()
	}
	done := make(chan struct{})
	go func() { c.Kill(); close(done) }()
	select {
	case <-done:
		group() // children it left in its group
		return
	case <-time.After(grace + time.Second):
	}
	group()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		p.log.Error("plugin process group killed, but go-plugin's client did not finish; moving on", "path", p.cfg.Path)
	}
}

// Manager owns every enabled plugin.
type Manager struct {
	log     hclog.Logger
	plugins map[string]*Plugin
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Options are where plugins run.
type Options struct {
	// Instance names the host to its plugins (ConfigureRequest.host_instance).
	Instance string
	// SocketDir holds the plugins' Unix sockets (the host's directory,
	// core/rundir); the system's temporary directory if empty.
	SocketDir string
}

// Start verifies and launches every enabled plugin; any failure stops all.
func Start(ctx context.Context, log hclog.Logger, plugins map[string]*config.Plugin, sandboxes Sandboxes, opts Options) (*Manager, error) {
	hs := HostServices(sandboxes)
	if opts.SocketDir != "" && !rundir.Fits(opts.SocketDir) {
		log.Info("the socket directory's path is too long for plugins' sockets in it (a Unix socket's is at most 107 bytes); they go to the system's temporary directory, and a killed host leaves them there", "dir", opts.SocketDir)
	}
	sctx, cancel := context.WithCancel(context.Background())
	m := &Manager{log: log, plugins: map[string]*Plugin{}, cancel: cancel}
	names := make([]string, 0, len(plugins))
	for n := range plugins {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := &Plugin{Name: n, cfg: plugins[n], log: log.Named("plugin." + n), hs: hs, opts: opts, state: StateStarting, ready: make(chan struct{})}
		if err := p.start(ctx); err != nil {
			m.Stop()
			return nil, err
		}
		if got := p.Info().Name; got != n {
			p.log.Warn("plugin reports a different name than its config table", "reported", got)
		}
		m.plugins[n] = p
		m.wg.Add(1)
		go func() { defer m.wg.Done(); p.supervise(sctx) }()
	}
	return m, nil
}

// Get returns a plugin by name.
func (m *Manager) Get(name string) (*Plugin, bool) {
	p, ok := m.plugins[name]
	return p, ok
}

// Names lists the plugins.
func (m *Manager) Names() []string {
	out := make([]string, 0, len(m.plugins))
	for n := range m.plugins {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ByDataSource resolves a ProRL data_source to a plugin, exact names first,
// then "prefix*" patterns, then the plugin's own name.
func (m *Manager) ByDataSource(ds string) (*Plugin, bool) {
	for _, n := range m.Names() {
		if info := m.plugins[n].Info(); info != nil {
			for _, s := range info.DataSources {
				if s == ds {
					return m.plugins[n], true
				}
			}
		}
	}
	for _, n := range m.Names() {
		if info := m.plugins[n].Info(); info != nil {
			for _, s := range info.DataSources {
				if pre, ok := strings.CutSuffix(s, "*"); ok && strings.HasPrefix(ds, pre) {
					return m.plugins[n], true
				}
			}
		}
	}
	p, ok := m.plugins[ds]
	return p, ok
}

// Statuses reports every plugin.
func (m *Manager) Statuses() []Status {
	out := []Status{}
	for _, n := range m.Names() {
		out = append(out, m.plugins[n].Status())
	}
	return out
}

// Stop stops every plugin gracefully.
func (m *Manager) Stop() {
	m.cancel()
	var wg sync.WaitGroup
	for _, p := range m.plugins {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop() }()
	}
	wg.Wait()
	m.wg.Wait()
}
