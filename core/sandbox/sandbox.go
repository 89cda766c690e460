// Package sandbox runs rollouts' commands in real, rootless sandboxes. Every
// sandbox runs prorl-sandbox-agent inside it; a driver only decides how the
// agent is launched (bubblewrap, Apptainer, or no isolation at all).
package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/internal/sandboxproto"
)

// Limits bound every process in a sandbox.
type Limits struct {
	CPUSeconds     uint64
	MemoryBytes    uint64
	MaxProcesses   uint64
	MaxFileBytes   uint64
	MaxOutputBytes uint64
}

// Spec asks for a sandbox.
type Spec struct {
	Image   string
	Network bool
	Env     map[string]string
	Limits  Limits
}

// Launch is what a driver needs to start the agent.
type Launch struct {
	ID       string
	Label    string // host instance and sandbox id, findable in the process list
	Spec     Spec
	WorkDir  string // host path, bound read-write at Workdir inside
	Agent    string // host path of the agent binary
	Limits   string // agent limits, JSON
	UID      int    // host uid to run as; 0 keeps the host's
	Instance string // the host instance, for names the reaper can find
}

// preparer is a driver that sets a sandbox up before the agent starts (an
// Apptainer instance) and tears it down after.
type preparer interface {
	Prepare(ctx context.Context, l Launch) (cleanup func(), err error)
}

// safeBuffer collects a command's output from two goroutines.
type safeBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

func (s *safeBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b...)
}

// Workdir is the work directory inside every isolating sandbox.
const Workdir = "/work"

// Driver launches the agent in a new sandbox.
type Driver interface {
	Name() string
	// Command returns the process that runs the agent in a new sandbox.
	Command(l Launch) (*exec.Cmd, error)
	// InnerWorkdir is where the work directory appears inside the sandbox.
	InnerWorkdir(l Launch) string
}

// ErrStopped is returned for calls on a stopped sandbox.
var ErrStopped = errors.New("sandbox stopped")

// Sandbox is one running sandbox.
type Sandbox struct {
	ID      string
	Image   string
	Driver  string
	WorkDir string // host path
	Inner   string // work dir inside
	log     hclog.Logger
	cmd     *exec.Cmd
	in      io.WriteCloser
	inMu    sync.Mutex
	mu      sync.Mutex
	pending map[uint64]*call
	next    uint64
	dead    chan struct{}
	deadErr error
	stopped bool
	cleanup func()
	// PrepareTime is the driver's setup (an Apptainer instance start);
	// StartTime runs until the agent inside answered.
	PrepareTime, StartTime time.Duration
}

type call struct {
	onChunk func(stdout, stderr []byte)
	done    chan sandboxproto.Reply
}

func start(ctx context.Context, d Driver, l Launch, log hclog.Logger) (*Sandbox, error) {
	cleanup := func() {}
	t0 := time.Now()
	if p, ok := d.(preparer); ok {
		c, err := p.Prepare(ctx, l)
		if err != nil {
			return nil, err
		}
		cleanup = c
	}
	prep := time.Since(t0)
	s, err := launch(ctx, d, l, log)
	if err != nil {
		cleanup()
		return nil, err
	}
	s.cleanup = cleanup
	s.PrepareTime, s.StartTime = prep, time.Since(t0)
	return s, nil
}

func launch(ctx context.Context, d Driver, l Launch, log hclog.Logger) (*Sandbox, error) {
	cmd, err := d.Command(l)
	if err != nil {
		return nil, err
	}
	// The sandbox dies with the host even on SIGKILL, and is its own group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// Our own pipe: cmd.StdoutPipe would be closed by Wait before the last
	// replies are read.
	out, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = pw
	cmd.Stderr = &logWriter{log: log}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s sandbox: %w", d.Name(), err)
	}
	s := &Sandbox{ID: l.ID, Image: l.Spec.Image, Driver: d.Name(), WorkDir: l.WorkDir, Inner: d.InnerWorkdir(l), log: log,
		cmd: cmd, in: in, pending: map[uint64]*call{}, dead: make(chan struct{})}
	go func() { s.read(out); out.Close() }()
	go func() {
		err := cmd.Wait()
		s.fail(fmt.Errorf("sandbox process exited: %v", err))
	}()
	// Ready when the agent answers.
	if _, err := s.call(ctx, sandboxproto.Request{Op: sandboxproto.OpPing}, nil); err != nil {
		s.kill()
		return nil, fmt.Errorf("%s sandbox did not come up: %w (%s)", d.Name(), err, s.stderrTail())
	}
	return s, nil
}

type logWriter struct {
	log  hclog.Logger
	mu   sync.Mutex
	tail []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.tail = append(w.tail, p...)
	if len(w.tail) > 2048 {
		w.tail = w.tail[len(w.tail)-2048:]
	}
	w.mu.Unlock()
	w.log.Debug("sandbox stderr", "output", string(p))
	return len(p), nil
}

func (s *Sandbox) stderrTail() string {
	if lw, ok := s.cmd.Stderr.(*logWriter); ok {
		lw.mu.Lock()
		defer lw.mu.Unlock()
		return string(lw.tail)
	}
	return ""
}

func (s *Sandbox) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 512<<20)
	for sc.Scan() {
		var rep sandboxproto.Reply
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
			s.log.Warn("bad reply from sandbox agent", "error", err)
			continue
		}
		s.mu.Lock()
		c := s.pending[rep.ID]
		if rep.Done {
			delete(s.pending, rep.ID)
		}
		s.mu.Unlock()
		if c == nil {
			continue
		}
		if rep.Done {
			c.done <- rep
		} else if c.onChunk != nil {
			c.onChunk(rep.Stdout, rep.Stderr)
		}
	}
	s.fail(errors.New("sandbox agent closed its output"))
}

func (s *Sandbox) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.dead:
		return
	default:
	}
	s.deadErr = err
	close(s.dead)
}

func (s *Sandbox) call(ctx context.Context, req sandboxproto.Request, onChunk func(stdout, stderr []byte)) (sandboxproto.Reply, error) {
	c := &call{onChunk: onChunk, done: make(chan sandboxproto.Reply, 1)}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return sandboxproto.Reply{}, ErrStopped
	}
	s.next++
	req.ID = s.next
	s.pending[req.ID] = c
	s.mu.Unlock()
	b, _ := json.Marshal(req)
	s.inMu.Lock()
	_, err := s.in.Write(append(b, '\n'))
	s.inMu.Unlock()
	if err != nil {
		return sandboxproto.Reply{}, fmt.Errorf("sandbox %s: %w", s.ID, err)
	}
	select {
	case r := <-c.done:
		if r.Error != "" && req.Op != sandboxproto.OpExec {
			return r, errors.New(r.Error)
		}
		return r, nil
	case <-s.dead:
		return sandboxproto.Reply{}, fmt.Errorf("sandbox %s: %w", s.ID, s.deadErr)
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.pending, req.ID)
		s.mu.Unlock()
		return sandboxproto.Reply{}, ctx.Err()
	}
}

// ExecResult is a finished command.
type ExecResult struct {
	Stdout, Stderr []byte
	ExitCode       int
	TimedOut       bool
	Truncated      bool
}

// Exec runs argv as a new process; output is streamed to onChunk as it comes.
func (s *Sandbox) Exec(ctx context.Context, argv []string, stdin []byte, timeout time.Duration, workdir string, env map[string]string, onChunk func(stdout, stderr []byte)) (*ExecResult, error) {
	res := &ExecResult{}
	r, err := s.call(ctx, sandboxproto.Request{Op: sandboxproto.OpExec, Argv: argv, Stdin: stdin, TimeoutMS: ms(timeout), Workdir: workdir, Env: env},
		func(o, e []byte) {
			res.Stdout = append(res.Stdout, o...)
			res.Stderr = append(res.Stderr, e...)
			if onChunk != nil {
				onChunk(o, e)
			}
		})
	if err != nil {
		return nil, err
	}
	if r.Error != "" {
		return nil, errors.New(r.Error)
	}
	res.ExitCode, res.TimedOut, res.Truncated = r.ExitCode, r.TimedOut, r.Truncated
	return res, nil
}

// Session runs a command in the sandbox's persistent bash session.
func (s *Sandbox) Session(ctx context.Context, command string, timeout time.Duration) (*ExecResult, error) {
	r, err := s.call(ctx, sandboxproto.Request{Op: sandboxproto.OpSession, Command: command, TimeoutMS: ms(timeout)}, nil)
	if err != nil {
		return nil, err
	}
	return &ExecResult{Stdout: r.Stdout, Stderr: r.Stderr, ExitCode: r.ExitCode, TimedOut: r.TimedOut, Truncated: r.Truncated}, nil
}

// ReadFile reads a file inside the sandbox (relative to its work dir).
func (s *Sandbox) ReadFile(ctx context.Context, path string, max uint64) ([]byte, bool, error) {
	r, err := s.call(ctx, sandboxproto.Request{Op: sandboxproto.OpRead, Path: path, MaxBytes: max}, nil)
	return r.Data, r.Truncated, err
}

// WriteFile writes a file inside the sandbox, creating its directories.
func (s *Sandbox) WriteFile(ctx context.Context, path string, data []byte, mode uint32) error {
	_, err := s.call(ctx, sandboxproto.Request{Op: sandboxproto.OpWrite, Path: path, Data: data, Mode: mode}, nil)
	return err
}

// ListDir lists a directory inside the sandbox.
func (s *Sandbox) ListDir(ctx context.Context, path string) ([]sandboxproto.Entry, error) {
	r, err := s.call(ctx, sandboxproto.Request{Op: sandboxproto.OpList, Path: path}, nil)
	return r.Entries, err
}

func ms(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	return uint32(min(d.Milliseconds(), 1<<31))
}

// kill ends the sandbox's whole process group at once.
func (s *Sandbox) kill() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.dead
}

// stop asks the agent to exit (it kills everything it started), then kills
// the group if it lingers, then removes the work directory.
func (s *Sandbox) stop(grace time.Duration) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	s.mu.Unlock()
	s.inMu.Lock()
	_ = s.in.Close()
	s.inMu.Unlock()
	select {
	case <-s.dead:
	case <-time.After(grace):
	}
	s.kill()
	if s.cleanup != nil {
		s.cleanup()
	}
	return removeAll(s.WorkDir)
}

// removeAll deletes a work dir even when the sandbox left read-only dirs.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = exec.Command("chmod", "-R", "u+rwx", dir).Run()
	return os.RemoveAll(dir)
}
