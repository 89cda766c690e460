package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/prorl/prorl/internal/sandboxproto"
)

// The session's shell function reads the command body (length given, so
// any bytes pass) from the control channel, runs it in the shell itself (so
// cd and variables persist) with stdin from /dev/null, snapshots the cwd and
// exported variables (a restarted shell gets them back), then prints
// completion markers on both streams. It never forks: a sandbox at its
// process limit still answers.
const prelude = `__prorl_run() { local __c; LC_ALL=C IFS= read -r -N "$2" __c; eval "$__c" </dev/null; local s=$?; pwd >"$PRORL_STATE/cwd"; export -p >"$PRORL_STATE/env"; printf '\n__PRORL_DONE_%s_%d\n' "$1" "$s"; printf '\n__PRORL_DONE_%s\n' "$1" >&2; }
if [ -s "$PRORL_STATE/env" ]; then . "$PRORL_STATE/env" 2>/dev/null; cd "$(<"$PRORL_STATE/cwd")" 2>/dev/null; fi
`

// session is one persistent bash, restarted if a command kills it.
type session struct {
	a     *agent
	state string     // snapshot dir of cwd and exported variables
	mu    sync.Mutex // one command at a time
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *marked
	err   *marked
}

// marked accumulates one stream and signals when a marker line appears.
// It keeps at most max bytes of output; past that only a short tail is
// kept, to find the marker in, so a command that floods its output costs
// the agent bounded memory.
type marked struct {
	mu   sync.Mutex
	cond *sync.Cond
	buf  bytes.Buffer
	max  int
	over bool   // buf is full; output goes to tail only
	tail []byte // the latest bytes once over, where the marker is looked for
	eof  bool
}

const tailKeep = 4096

func newMarked(r io.Reader, max int) *marked {
	m := &marked{max: max}
	m.cond = sync.NewCond(&m.mu)
	go func() {
		br := bufio.NewReaderSize(r, 64<<10)
		chunk := make([]byte, 32<<10)
		for {
			n, err := br.Read(chunk)
			m.mu.Lock()
			m.add(chunk[:n])
			if err != nil {
				m.eof = true
			}
			m.cond.Broadcast()
			m.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return m
}

func (m *marked) add(p []byte) {
	if !m.over {
		room := m.max - m.buf.Len()
		if len(p) <= room {
			m.buf.Write(p)
			return
		}
		m.buf.Write(p[:room])
		m.over = true
		b := m.buf.Bytes()
		m.tail = append([]byte(nil), b[max(0, len(b)-tailKeep):]...) // a marker may straddle the cut
		p = p[room:]
	}
	m.tail = append(m.tail, p...)
	if len(m.tail) > 2*tailKeep {
		m.tail = append(m.tail[:0:0], m.tail[len(m.tail)-tailKeep:]...)
	}
}

// take returns the kept output and starts afresh with rest.
func (m *marked) take(rest []byte) (out []byte, truncated bool) {
	out, truncated = append([]byte(nil), m.buf.Bytes()...), m.over
	m.buf.Reset()
	m.over, m.tail = false, nil
	m.add(rest)
	return out, truncated
}

// wait returns the output before the marker, and what follows the marker
// on its line; ok is false at EOF or when the deadline passes.
func (m *marked) wait(marker string, deadline time.Time) (out []byte, tail string, truncated, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	needle := []byte("\n" + marker)
	for {
		hay := m.buf.Bytes()
		if m.over {
			hay = m.tail
		}
		if i := bytes.Index(hay, needle); i >= 0 {
			if j := bytes.IndexByte(hay[i+len(needle):], '\n'); j >= 0 {
				tail = string(hay[i+len(needle) : i+len(needle)+j])
				rest := append([]byte(nil), hay[i+len(needle)+j+1:]...)
				if !m.over {
					m.buf.Truncate(i)
				}
				out, truncated = m.take(rest)
				return out, tail, truncated, true
			}
		}
		if m.eof || !time.Now().Before(deadline) {
			return nil, "", false, false
		}
		// Wake periodically to notice the deadline.
		go func() { time.Sleep(20 * time.Millisecond); m.mu.Lock(); m.cond.Broadcast(); m.mu.Unlock() }()
		m.cond.Wait()
	}
}

// drain returns and clears whatever the stream holds.
func (m *marked) drain() ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.take(nil)
}

func (s *session) start() error {
	if s.state == "" {
		d, err := os.MkdirTemp("", ".prorl-session-")
		if err != nil {
			return err
		}
		s.state = d
	}
	cmd, err := s.a.command([]string{"bash", "--noprofile", "--norc"}, "", map[string]string{"PRORL_STATE": s.state})
	if err != nil {
		return err
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	so, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	se, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	// Right after a runaway was killed its processes may still count
	// against the process limit until reaped: retry briefly.
	var err2 error
	for try := 0; try < 40; try++ {
		if err2 = start(cmd); err2 == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
		if cmd, err = s.a.command([]string{"bash", "--noprofile", "--norc"}, "", map[string]string{"PRORL_STATE": s.state}); err != nil {
			return err
		}
		if in, err = cmd.StdinPipe(); err != nil {
			return err
		}
		if so, err = cmd.StdoutPipe(); err != nil {
			return err
		}
		if se, err = cmd.StderrPipe(); err != nil {
			return err
		}
	}
	if err2 != nil {
		return fmt.Errorf("start bash: %w", err2)
	}
	go func() { _ = cmd.Wait() }()
	mx := int(s.a.limits.MaxOutputBytes)
	s.cmd, s.in, s.out, s.err = cmd, in, newMarked(so, mx), newMarked(se, mx)
	_, err = io.WriteString(in, prelude)
	return err
}

func (s *session) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

// removeState removes the session's state directory: it is in the
// agent's TMPDIR, which can outlive the sandbox (a task's TMPDIR under
// driver none).
func (s *session) removeState() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != "" {
		_ = os.RemoveAll(s.state)
		s.state = ""
	}
}

func (s *session) killLocked() {
	if s.cmd != nil {
		killTree(s.cmd.Process.Pid)
		_ = s.in.Close()
		s.cmd = nil
	}
}

func nonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *session) run(req sandboxproto.Request) sandboxproto.Reply {
	r := sandboxproto.Reply{ID: req.ID, Done: true}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		if err := s.start(); err != nil {
			r.Error = err.Error()
			return r
		}
	}
	n := nonce()
	line := "__prorl_run " + n + " " + strconv.Itoa(len(req.Command)) + "\n" + req.Command
	if _, err := io.WriteString(s.in, line); err != nil {
		s.killLocked()
		r.Error = "session died; it will restart on the next command"
		return r
	}
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = 24 * time.Hour
	}
	marker := "__PRORL_DONE_" + n
	out, tail, truncOut, ok := s.out.wait(marker, time.Now().Add(timeout))
	if !ok {
		// Timed out, or the command ended the shell. Killing only the
		// command's processes would let the shell run the rest of the
		// command line, so the shell goes too; the next command gets a new
		// one with the last cwd and exported variables.
		r.TimedOut = !s.out.eof
		out, t1 := s.out.drain()
		errb, t2 := s.err.drain()
		s.killLocked()
		r.Stdout, r.Stderr = s.a.cap(out, &r), s.a.cap(errb, &r)
		r.Truncated = r.Truncated || t1 || t2
		r.ExitCode = -1
		note := "[the shell exited; a new one starts with the last working directory and exported variables]\n"
		if r.TimedOut {
			r.ExitCode = 124
			note = "[the shell was restarted after the timeout; the working directory and exported variables are kept]\n"
		}
		r.Stderr = append(r.Stderr, note...)
		return r
	}
	if len(tail) < 2 {
		tail = "_-1"
	}
	code, _ := strconv.Atoi(tail[1:]) // tail is "_<code>"
	errOut, _, truncErr, _ := s.err.wait(marker, time.Now().Add(2*time.Second))
	r.ExitCode = code
	r.Stdout, r.Stderr = s.a.cap(out, &r), s.a.cap(errOut, &r)
	r.Truncated = r.Truncated || truncOut || truncErr
	return r
}

// cap truncates output to the limit, marking the reply.
func (a *agent) cap(b []byte, r *sandboxproto.Reply) []byte {
	if uint64(len(b)) <= a.limits.MaxOutputBytes {
		return b
	}
	r.Truncated = true
	return b[:a.limits.MaxOutputBytes]
}
