package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prorl/prorl/internal/sandboxproto"
)

// limited keeps the first max bytes written and counts the rest.
type limited struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	max     uint64
	dropped uint64
	stream  func([]byte) // optional: forwards each kept chunk as it arrives
}

func (l *limited) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	room := int(l.max) - l.buf.Len()
	keep := p
	if room < len(p) {
		keep = p[:max(room, 0)]
		l.dropped += uint64(len(p) - len(keep))
	}
	if len(keep) > 0 {
		l.buf.Write(keep)
		if l.stream != nil {
			l.stream(append([]byte(nil), keep...))
		}
	}
	return len(p), nil
}

// descendants lists every process whose ancestry reaches pid.
func descendants(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) > 1 {
			parent[n], _ = strconv.Atoi(f[1])
		}
	}
	var out []int
	for p := range parent {
		for q, hops := p, 0; q > 1 && hops < 64; q, hops = parent[q], hops+1 {
			if parent[q] == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// killTree kills a process, its group, and every descendant, including
// those that left the group with setsid.
func killTree(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for _, d := range descendants(pid) {
		_ = syscall.Kill(d, syscall.SIGKILL)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// killAllChildren kills everything the agent started.
func killAllChildren() {
	for _, d := range descendants(os.Getpid()) {
		_ = syscall.Kill(d, syscall.SIGKILL)
	}
}

// command prepares argv under init in namespaces of its own, or, where
// they cannot be made and the host allows it, under rlimit-exec alone.
func (a *agent) command(argv []string, workdir string, extra map[string]string) (*exec.Cmd, error) {
	if mode, err := a.isolation(); err == nil {
		cmd := a.initCmd(mode, append([]string{"--"}, argv...), env(extra))
		cmd.Dir = workdir
		return cmd, nil
	} else if a.limits.RequireIsolation {
		return nil, fmt.Errorf("commands cannot be isolated here (%v); the host requires it", err)
	}
	cmd := exec.Command(a.self, append([]string{"rlimit-exec", a.limitsArg, "--"}, argv...)...)
	cmd.Env = env(extra)
	cmd.Dir = workdir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

func (a *agent) exec(req sandboxproto.Request) sandboxproto.Reply {
	r := sandboxproto.Reply{ID: req.ID, Done: true}
	if len(req.Argv) == 0 {
		r.Error = "exec: empty argv"
		return r
	}
	cmd, err := a.command(req.Argv, req.Workdir, req.Env)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	cmd.Stdin = bytes.NewReader(req.Stdin)
	if req.StdinPath != "" {
		f, err := os.Open(req.StdinPath)
		if err != nil {
			r.Error = "stdin: " + err.Error()
			return r
		}
		defer f.Close()
		_ = os.Remove(req.StdinPath)
		cmd.Stdin = f
	}
	stdout := &limited{max: a.limits.MaxOutputBytes, stream: func(b []byte) { a.reply(sandboxproto.Reply{ID: req.ID, Stdout: b}) }}
	stderr := &limited{max: a.limits.MaxOutputBytes, stream: func(b []byte) { a.reply(sandboxproto.Reply{ID: req.ID, Stderr: b}) }}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := start(cmd); err != nil {
		r.Error = err.Error()
		return r
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var timeout <-chan time.Time
	if req.TimeoutMS > 0 {
		t := time.NewTimer(time.Duration(req.TimeoutMS) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case err = <-done:
	case <-timeout:
		r.TimedOut = true
		killTree(cmd.Process.Pid)
		err = <-done
	}
	// Orphans the command left behind (daemonised children) go with it.
	killTree(cmd.Process.Pid)
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.ExitCode = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.ExitCode = 128 + int(ws.Signal())
		}
	case err != nil && !errors.Is(err, io.EOF):
		r.Error = err.Error()
	}
	r.Truncated = stdout.dropped > 0 || stderr.dropped > 0
	return r
}
