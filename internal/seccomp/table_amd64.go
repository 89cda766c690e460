package seccomp

import "golang.org/x/sys/unix"

const (
	auditArch = unix.AUDIT_ARCH_X86_64
	x32Bit    = 0x40000000 // __X32_SYSCALL_BIT
)

// archAlways are the legacy calls only this architecture has.
var archAlways = []uint32{
	unix.SYS_CREATE_MODULE, unix.SYS_GET_KERNEL_SYMS, unix.SYS_QUERY_MODULE, unix.SYS_IOPL, unix.SYS_IOPERM,
	unix.SYS_USELIB, unix.SYS_SYSFS, unix.SYS_USTAT, unix.SYS__SYSCTL,
}
