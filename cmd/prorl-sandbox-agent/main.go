// Command prorl-sandbox-agent runs inside every sandbox, bind-mounted read
// only. The host talks to it over stdin/stdout (internal/sandboxproto): it
// runs processes, keeps one persistent bash session, and reads and writes
// files, so one protocol serves every sandbox driver. It is static Go: it
// needs nothing from the image.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/prorl/prorl/internal/sandboxproto"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: prorl-sandbox-agent serve LIMITS_JSON | rlimit-exec LIMITS_JSON -- ARGV...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		os.Exit(serve(os.Args[2:]))
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
	session   *session
}

func (a *agent) reply(r sandboxproto.Reply) {
	b, _ := json.Marshal(r)
	a.outMu.Lock()
	defer a.outMu.Unlock()
	_, _ = a.out.Write(b)
	_ = a.out.WriteByte('\n')
	_ = a.out.Flush()
}

func serve(args []string) int {
	la := ""
	if len(args) > 0 {
		la = args[0]
	}
	l, err := parseLimits(la)
	if err != nil {
		fmt.Fprintln(os.Stderr, "limits:", err)
		return 2
	}
	if l.MaxOutputBytes == 0 {
		l.MaxOutputBytes = 1 << 20
	}
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	a := &agent{limits: l, limitsArg: la, self: self, out: bufio.NewWriterSize(os.Stdout, 64<<10)}
	a.session = &session{a: a}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 1<<20), 256<<20)
	var wg sync.WaitGroup
	for in.Scan() {
		var req sandboxproto.Request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
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
	return 0
}

func (a *agent) handle(req sandboxproto.Request) {
	r := sandboxproto.Reply{ID: req.ID, Done: true}
	switch req.Op {
	case sandboxproto.OpPing:
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
		if err := os.WriteFile(req.Path, req.Data, mode); err != nil {
			r.Error = err.Error()
		}
	case sandboxproto.OpList:
		ents, err := os.ReadDir(req.Path)
		if err != nil {
			r.Error = err.Error()
			break
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

func env(extra map[string]string) []string {
	e := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "TERM=dumb", "PYTHONUNBUFFERED=1"}
	if h := os.Getenv("HOME"); h != "" {
		e = append(e, "HOME="+h)
	}
	for k, v := range extra {
		e = append(e, k+"="+v)
	}
	return e
}
