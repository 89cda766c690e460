// Package seccomp builds and installs the syscall filter every sandboxed
// command runs under: a deny list in the spirit of Docker's default profile
// (no ptrace, bpf, perf_event_open, kexec, keyctl, mount, new namespaces,
// io_uring, kernel modules, clock changes, ...). Denied calls fail with
// EPERM rather than killing the process, so programs that probe for a
// feature (a test suite checking for ptrace) see "not permitted" and go on.
// It is classic BPF assembled here: the agent is static Go without cgo.
package seccomp

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Groups a sandbox spec may allow back, by name.
const (
	// AllowPtrace permits ptrace, process_vm_readv/writev, pidfd_getfd and
	// kcmp. A command's own pid namespace still hides every process it did
	// not start, the agent included.
	AllowPtrace = "ptrace"
	// AllowNamespaces permits new namespaces (user, mount, pid, net, ...),
	// setns and the mount family: for images that run containers or
	// bubblewrap themselves.
	AllowNamespaces = "namespaces"
	// AllowIOURing permits io_uring.
	AllowIOURing = "io_uring"
)

// Groups lists the names Allow accepts.
var Groups = []string{AllowPtrace, AllowNamespaces, AllowIOURing}

// nsFlags are the clone/unshare flags that make a namespace.
const nsFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// Validate checks allow-group names.
func Validate(allow []string) error {
	for _, a := range allow {
		if !known(a) {
			return fmt.Errorf("unknown seccomp group %q (known: %s)", a, strings.Join(Groups, ", "))
		}
	}
	return nil
}

func known(a string) bool {
	for _, g := range Groups {
		if a == g {
			return true
		}
	}
	return false
}

// denied returns the syscall numbers that fail with EPERM, and whether
// clone/unshare are checked for namespace flags.
func denied(allow []string) (nrs []uint32, checkNS bool, clone3 bool) {
	has := map[string]bool{}
	for _, a := range allow {
		has[a] = true
	}
	nrs = append(nrs, always...)
	if !has[AllowPtrace] {
		nrs = append(nrs, ptraceGroup...)
	}
	if !has[AllowNamespaces] {
		nrs = append(nrs, nsGroup...)
		checkNS, clone3 = true, true
	}
	if !has[AllowIOURing] {
		nrs = append(nrs, ioURingGroup...)
	}
	sort.Slice(nrs, func(i, j int) bool { return nrs[i] < nrs[j] })
	return nrs, checkNS, clone3
}

// BPF opcodes (linux/filter.h).
const (
	ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	ret  = unix.BPF_RET | unix.BPF_K

	offNr   = 0
	offArch = 4
	offArg0 = 16 // low 32 bits of args[0] on little-endian machines

	retAllow  = unix.SECCOMP_RET_ALLOW
	retEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	retKill   = unix.SECCOMP_RET_KILL_PROCESS
)

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, K: k, Jt: jt, Jf: jf}
}

// Program assembles the filter for this machine's architecture.
func Program(allow []string) ([]unix.SockFilter, error) {
	if err := Validate(allow); err != nil {
		return nil, err
	}
	if auditArch == 0 {
		return nil, fmt.Errorf("seccomp: no syscall table for %s", runtime.GOARCH)
	}
	nrs, checkNS, clone3 := denied(allow)
	var p []unix.SockFilter
	// Another ABI (i386 through int 0x80, x32) would bypass a table of
	// native numbers: such processes are killed.
	p = append(p, stmt(ldW, offArch), jump(jeq, auditArch, 1, 0), stmt(ret, retKill), stmt(ldW, offNr))
	if x32Bit != 0 {
		p = append(p, jump(jge, x32Bit, 0, 1), stmt(ret, retKill))
	}
	for _, nr := range nrs {
		p = append(p, jump(jeq, nr, 0, 1), stmt(ret, retEPERM))
	}
	if clone3 {
		// clone3 passes its flags in memory BPF cannot read; ENOSYS makes
		// libc fall back to clone, whose flags are checked below.
		p = append(p, jump(jeq, sysClone3, 0, 1), stmt(ret, retENOSYS))
	}
	if checkNS {
		// if nr == clone || nr == unshare: deny when arg0 has a namespace flag.
		p = append(p,
			jump(jeq, sysClone, 1, 0),
			jump(jeq, sysUnshare, 0, 3),
			stmt(ldW, offArg0),
			jump(jset, nsFlags, 0, 1),
			stmt(ret, retEPERM))
	}
	p = append(p, stmt(ret, retAllow))
	if len(p) > 4096 {
		return nil, fmt.Errorf("seccomp: program too long (%d)", len(p))
	}
	return p, nil
}

// Install sets no_new_privs and loads the filter on every thread of the
// calling process; it binds every process started afterwards.
func Install(allow []string) error {
	p, err := Program(allow)
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	prog := unix.SockFprog{Len: uint16(len(p)), Filter: &p[0]}
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(p)
	if e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	return nil
}
