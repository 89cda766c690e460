package seccomp

import "golang.org/x/sys/unix"

// The names are the same on every supported architecture; the numbers
// are each architecture's own (x/sys/unix).
const (
	sysClone   = unix.SYS_CLONE
	sysClone3  = unix.SYS_CLONE3
	sysUnshare = unix.SYS_UNSHARE
)

// always are denied whatever a spec allows: they act on the machine, not
// on the sandbox.
var always = append([]uint32{
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_REBOOT,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_ACCT, unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX,
	unix.SYS_SYSLOG, unix.SYS_USERFAULTFD, unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
	unix.SYS_LOOKUP_DCOOKIE, unix.SYS_QUOTACTL, unix.SYS_VHANGUP, unix.SYS_NFSSERVCTL,
}, archAlways...)

var ptraceGroup = []uint32{unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV, unix.SYS_PIDFD_GETFD, unix.SYS_KCMP}

var nsGroup = []uint32{unix.SYS_SETNS, unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT,
	unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_OPEN_TREE,
	unix.SYS_MOVE_MOUNT, unix.SYS_MOUNT_SETATTR}

var ioURingGroup = []uint32{unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER}
