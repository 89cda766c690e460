package seccomp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// run interprets the classic BPF program for one syscall, as the kernel
// would, and returns the action.
func run(t *testing.T, p []unix.SockFilter, arch, nr uint32, arg0 uint64) uint32 {
	t.Helper()
	var a uint32
	for pc := 0; pc < len(p); pc++ {
		in := p[pc]
		switch in.Code {
		case ldW:
			switch in.K {
			case offNr:
				a = nr
			case offArch:
				a = arch
			case offArg0:
				a = uint32(arg0)
			default:
				t.Fatalf("load of offset %d", in.K)
			}
		case jeq, jge, jset:
			var taken bool
			switch in.Code {
			case jeq:
				taken = a == in.K
			case jge:
				taken = a >= in.K
			default:
				taken = a&in.K != 0
			}
			if taken {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case ret:
			return in.K
		default:
			t.Fatalf("opcode %#x", in.Code)
		}
	}
	t.Fatal("fell off the program")
	return 0
}

func TestProgram(t *testing.T) {
	def, err := Program(nil)
	if err != nil {
		t.Fatal(err)
	}
	withNS, _ := Program([]string{AllowNamespaces, AllowPtrace})
	type tc struct {
		name string
		p    []unix.SockFilter
		arch uint32
		nr   uint32
		arg0 uint64
		want uint32
	}
	cases := []tc{
		{"read allowed", def, auditArch, unix.SYS_READ, 0, retAllow},
		{"ptrace denied", def, auditArch, unix.SYS_PTRACE, 0, retEPERM},
		{"ptrace allowed back", withNS, auditArch, unix.SYS_PTRACE, 0, retAllow},
		{"pidfd_getfd denied", def, auditArch, unix.SYS_PIDFD_GETFD, 0, retEPERM},
		{"bpf denied even when namespaces are allowed", withNS, auditArch, unix.SYS_BPF, 0, retEPERM},
		{"mount denied", def, auditArch, unix.SYS_MOUNT, 0, retEPERM},
		{"plain fork through clone allowed", def, auditArch, sysClone, uint64(unix.SIGCHLD), retAllow},
		{"threads allowed", def, auditArch, sysClone, unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND, retAllow},
		{"clone of a user namespace denied", def, auditArch, sysClone, unix.CLONE_NEWUSER | uint64(unix.SIGCHLD), retEPERM},
		{"unshare of a mount namespace denied", def, auditArch, sysUnshare, unix.CLONE_NEWNS, retEPERM},
		{"unshare of files allowed", def, auditArch, sysUnshare, unix.CLONE_FILES, retAllow},
		{"unshare allowed back", withNS, auditArch, sysUnshare, unix.CLONE_NEWUSER, retAllow},
		{"clone3 falls back", def, auditArch, sysClone3, 0, retENOSYS},
		{"another ABI is killed", def, 0x40000003, unix.SYS_READ, 0, retKill},
	}
	if x32Bit != 0 {
		cases = append(cases, tc{"x32 numbers are killed", def, auditArch, x32Bit | unix.SYS_PTRACE, 0, retKill})
	}
	for _, c := range cases {
		if got := run(t, c.p, c.arch, c.nr, c.arg0); got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
	if _, err := Program([]string{"everything"}); err == nil {
		t.Error("an unknown group was accepted")
	}
}
