// Command prorl-sandbox-agent runs inside every sandbox, bind-mounted read
// only. The host talks to it over stdin/stdout (internal/sandboxproto): it
// runs processes, keeps one persistent bash session, and reads and writes
// files, so one protocol serves every sandbox driver. It is static Go: it
// needs nothing from the image.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/prorl/prorl/internal/sandboxproto"
	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: prorl-sandbox-agent serve | init [--probe] -- ARGV... | rlimit-exec LIMITS_JSON -- ARGV...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		os.Exit(serve(os.Args[2:]))
	case "init":
		os.Exit(initMain(os.Args[2:]))
	case "rlimit-exec":
		os.Exit(rlimitExec(os.Args[2:]))
	}
	fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
	os.Exit(2)
}

func parseLimits(s string) (sandboxproto.Limits, error) {
	var l sandboxproto.Limits
	if s == "" {
		return l, nil
	}
	err := json.Unmarshal([]byte(s), &l)
	return l, err
}

// rlimitExec sets the limits on itself, then becomes argv: Go cannot set a
// child's rlimits, and limits set here bind every descendant.
func rlimitExec(args []string) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(os.Stderr, "usage: rlimit-exec LIMITS_JSON -- ARGV...")
		return 2
	}
	l, err := parseLimits(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "limits:", err)
		return 2
	}
	path, err := exec.LookPath(args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 127
	}
	// Everything execve needs is built before the limits go on: after
	// RLIMIT_AS is lowered, an allocation by this Go process could be fatal,
	// and nothing between setrlimit and execve may allocate.
	argv0, err := syscall.BytePtrFromString(path)
	if err != nil {
		return 126
	}
	argv, err := syscall.SlicePtrFromStrings(args[2:])
	if err != nil {
		return 126
	}
	envv, err := syscall.SlicePtrFromStrings(os.Environ())
	if err != nil {
		return 126
	}
	lims := [4]struct {
		res int
		v   uint64
	}{{syscall.RLIMIT_CPU, l.CPUSeconds}, {syscall.RLIMIT_AS, l.MemoryBytes}, {6 /* RLIMIT_NPROC */, l.MaxProcesses}, {syscall.RLIMIT_FSIZE, l.MaxFileBytes}}
	rl := [4]syscall.Rlimit{}
	for i, x := range lims {
		rl[i] = syscall.Rlimit{Cur: x.v, Max: x.v}
	}
	for i, x := range lims {
		if x.v > 0 {
			_, _, _ = syscall.RawSyscall(syscall.SYS_SETRLIMIT, uintptr(x.res), uintptr(unsafe.Pointer(&rl[i])), 0)
		}
	}
	_, _, e := syscall.RawSyscall(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(argv0)), uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	fmt.Fprintln(os.Stderr, "exec:", e)
	return 126
}

type agent struct {
	limits    sandboxproto.Limits
	limitsArg string
	self      string
	outMu     sync.Mutex
	out       *bufio.Writer
	seal      *sandboxproto.Sealer
	session   *session
	isoOnce   sync.Once
	isoMode   string // how commands are isolated (init.go)
	isoErr    error  // why commands cannot get their own namespaces
}

// reply sends r, splitting output and data over chunk frames so that no
// frame exceeds the protocol's cap.
func (a *agent) reply(r sandboxproto.Reply) {
	if r.Done && len(r.Stdout)+len(r.Stderr)+len(r.Data) > sandboxproto.ChunkBytes {
		for _, part := range []*[]byte{&r.Stdout, &r.Stderr, &r.Data} {
			for len(*part) > 0 {
				n := min(len(*part), sandboxproto.ChunkBytes)
				c := sandboxproto.Reply{ID: r.ID}
				switch part {
				case &r.Stdout:
					c.Stdout = (*part)[:n]
				case &r.Stderr:
					c.Stderr = (*part)[:n]
				default:
					c.Data = (*part)[:n]
				}
				a.send(c)
				*part = (*part)[n:]
			}
		}
	}
	a.send(r)
}

func (a *agent) send(r sandboxproto.Reply) {
	b, _ := json.Marshal(r)
	a.outMu.Lock()
	defer a.outMu.Unlock()
	_, _ = a.out.Write(a.seal.Seal(b))
	_ = a.out.Flush()
}

func serve(args []string) int {
	// Nothing the sandbox runs may read or trace this process: a process
	// that is not dumpable has /proc/PID/{mem,fd,environ} and ptrace
	// guarded by CAP_SYS_PTRACE, which no command has.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	// Descriptors the host's parent leaked without close-on-exec stop here.
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err := readSandboxEnv(); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox env:", err)
		return 1
	}
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	line, _, err := sandboxproto.ReadFrame(in, sandboxproto.MaxFrame)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		return 2
	}
	var h sandboxproto.Hello
	if err := json.Unmarshal(line, &h); err != nil || len(h.Key) < 16 {
		fmt.Fprintln(os.Stderr, "hello: bad or keyless")
		return 2
	}
	// Before anything runs: commands see the copies, never the image's.
	for _, w := range h.Writable {
		if err := makeWritable(w); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
	}
	if h.Gateway != nil {
		serveGateway(h.Gateway)
	}
	l := h.Limits
	if l.MaxOutputBytes == 0 {
		l.MaxOutputBytes = 1 << 20
	}
	la, _ := json.Marshal(l)
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	a := &agent{limits: l, limitsArg: string(la), self: self, out: bufio.NewWriterSize(os.Stdout, 64<<10),
		seal: sandboxproto.NewSealer(h.Key, sandboxproto.ToHost)}
	open := sandboxproto.NewOpener(h.Key, sandboxproto.ToAgent)
	clear(h.Key) // the MACs hold their own copies
	a.session = &session{a: a}
	var wg sync.WaitGroup
	for {
		frame, n, err := sandboxproto.ReadFrame(in, sandboxproto.MaxFrame)
		if errors.Is(err, sandboxproto.ErrTooLong) {
			fmt.Fprintf(os.Stderr, "dropped a request of %d bytes (over the frame cap)\n", n)
			continue
		}
		if err != nil {
			break
		}
		body, err := open.Open(frame)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dropped a request:", err)
			continue
		}
		var req sandboxproto.Request
		if err := json.Unmarshal(body, &req); err != nil {
			a.reply(sandboxproto.Reply{Done: true, Error: "bad request: " + err.Error()})
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); a.handle(req) }()
	}
	// stdin closed: the host is gone or stopping us; take everything down.
	a.session.kill()
	killAllChildren()
	wg.Wait()
	a.session.removeState()
	return 0
}

func (a *agent) handle(req sandboxproto.Request) {
	r := sandboxproto.Reply{ID: req.ID, Done: true}
	switch req.Op {
	case sandboxproto.OpPing:
		if req.Command == "isolation" {
			mode, err := a.isolation()
			r.Isolation = mode
			if err != nil {
				r.Isolation = "none: " + err.Error()
			}
		}
	case sandboxproto.OpExec:
		r = a.exec(req)
	case sandboxproto.OpSession:
		r = a.session.run(req)
	case sandboxproto.OpRead:
		f, err := os.Open(req.Path)
		if err != nil {
			r.Error = err.Error()
			break
		}
		max := req.MaxBytes
		if max == 0 {
			max = 64 << 20
		}
		buf := make([]byte, 0, 4096)
		for {
			if uint64(len(buf)) >= max {
				var one [1]byte
				if n, _ := f.Read(one[:]); n > 0 {
					r.Truncated = true
				}
				break
			}
			if len(buf) == cap(buf) {
				buf = append(buf, 0)[:len(buf)]
			}
			n, err := f.Read(buf[len(buf):min(cap(buf), int(max))])
			buf = buf[:len(buf)+n]
			if err != nil {
				break
			}
		}
		f.Close()
		r.Data = buf
	case sandboxproto.OpWrite:
		mode := os.FileMode(req.Mode)
		if mode == 0 {
			mode = 0o644
		}
		if i := strings.LastIndexByte(req.Path, '/'); i > 0 {
			if err := os.MkdirAll(req.Path[:i], 0o755); err != nil {
				r.Error = err.Error()
				break
			}
		}
		flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
		if req.Append {
			flags = os.O_WRONLY | os.O_APPEND
		}
		f, err := os.OpenFile(req.Path, flags, mode)
		if err == nil {
			_, err = f.Write(req.Data)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			r.Error = err.Error()
		}
	case sandboxproto.OpList:
		ents, err := os.ReadDir(req.Path)
		if err != nil {
			r.Error = err.Error()
			break
		}
		if len(ents) > sandboxproto.MaxEntries {
			ents, r.Truncated = ents[:sandboxproto.MaxEntries], true
		}
		for _, e := range ents {
			info, err := e.Info()
			if err != nil {
				continue
			}
			r.Entries = append(r.Entries, sandboxproto.Entry{Name: e.Name(), Dir: e.IsDir(), Size: uint64(info.Size()), Mode: uint32(info.Mode())})
		}
	default:
		r.Error = "unknown op " + strconv.Quote(req.Op)
	}
	a.reply(r)
}

// sandboxEnv is the sandbox's own environment (sandboxproto.EnvVar), set
// on the agent too (its session state goes to the sandbox's TMPDIR).
var sandboxEnv []string

func readSandboxEnv() error {
	env, err := sandboxproto.DecodeEnv(os.Getenv(sandboxproto.EnvVar))
	_ = os.Unsetenv(sandboxproto.EnvVar)
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if err := os.Setenv(k, env[k]); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		sandboxEnv = append(sandboxEnv, k+"="+env[k])
	}
	return nil
}

// env is a command's environment: defaults, the sandbox's own, then the
// request's (exec's duplicate keys take the last).
func env(extra map[string]string) []string {
	e := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "TERM=dumb", "PYTHONUNBUFFERED=1"}
	if h := os.Getenv("HOME"); h != "" {
		e = append(e, "HOME="+h)
	}
	e = append(e, sandboxEnv...) // after the defaults: a task's PATH wins
	for k, v := range extra {
		e = append(e, k+"="+v)
	}
	return e
}
