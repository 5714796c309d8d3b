//go:build linux && (amd64 || arm64)

package jail

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Seccomp is a third fence, aimed at the kernel itself: the command may make
// every system call except a short list of ones ordinary programs do not
// need and kernel exploits favour (io_uring, bpf, userfaultfd, perf, the
// keyring calls, module and kexec loading, mount and namespace calls), and
// no system call at all through a foreign ABI (x32, or i386 on amd64).
// It is a denylist by design: an allowlist breaks real tools.

// seccompDenied are refused with ENOSYS, so programs fall back as on a
// kernel without them; seccompForbidden are refused with EPERM.
var (
	seccompDenied = []uintptr{
		unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
		unix.SYS_BPF, unix.SYS_USERFAULTFD, unix.SYS_PERF_EVENT_OPEN,
	}
	seccompForbidden = []uintptr{
		unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
		unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD,
		unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
		unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_SETNS, unix.SYS_MOUNT, unix.SYS_UMOUNT2,
		unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT, unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_REBOOT,
		unix.SYS_ACCT, unix.SYS_QUOTACTL, unix.SYS_SYSLOG, unix.SYS_FANOTIFY_INIT,
		unix.SYS_LOOKUP_DCOOKIE, unix.SYS_VHANGUP, unix.SYS_FSOPEN, unix.SYS_FSCONFIG,
		unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT,
		unix.SYS_MOUNT_SETATTR,
	}
)

// seccompArch is the audit architecture of this build, 0 where the
// filter is not built (then no filter is installed, and the log says so).
var seccompArch = map[string]uint32{
	"amd64": unix.AUDIT_ARCH_X86_64,
	"arm64": unix.AUDIT_ARCH_AARCH64,
}[runtime.GOARCH]

// x32SyscallBit marks x32 ABI system calls on amd64.
const x32SyscallBit = 0x40000000

// seccompProgram builds the classic BPF filter.
func seccompProgram() []unix.SockFilter {
	const (
		ldAbs  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq    = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jset   = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret    = unix.BPF_RET | unix.BPF_K
		offNr  = 0 // struct seccomp_data.nr
		offArc = 4 // struct seccomp_data.arch
	)
	retPerm := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	retNosys := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
	p := []unix.SockFilter{
		{Code: ldAbs, K: offArc},
		{Code: jeq, Jt: 1, K: seccompArch},
		{Code: ret, K: retPerm}, // a foreign ABI
		{Code: ldAbs, K: offNr},
	}
	if runtime.GOARCH == "amd64" {
		p = append(p, unix.SockFilter{Code: jset, Jf: 1, K: x32SyscallBit}, unix.SockFilter{Code: ret, K: retPerm})
	}
	// Each list: compare, and on a match jump to its return just past the
	// list's end; layout: [denied...] [forbidden...] allow nosys perm.
	n := len(seccompDenied) + len(seccompForbidden)
	for i, nr := range seccompDenied {
		p = append(p, unix.SockFilter{Code: jeq, Jt: uint8(n - i), K: uint32(nr)})
	}
	for i, nr := range seccompForbidden {
		j := len(seccompDenied) + i
		p = append(p, unix.SockFilter{Code: jeq, Jt: uint8(n - j + 1), K: uint32(nr)})
	}
	return append(p,
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		unix.SockFilter{Code: ret, K: retNosys},
		unix.SockFilter{Code: ret, K: retPerm},
	)
}

// applySeccomp installs the filter on the calling thread, which must have
// no_new_privs set and must exec next.
func applySeccomp() error {
	if seccompArch == 0 {
		return nil
	}
	prog := seccompProgram()
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	runtime.KeepAlive(prog)
	return nil
}

// seccompNote says, for the log, whether the filter is installed.
func seccompNote() string {
	if seccompArch == 0 {
		return "none on " + runtime.GOARCH
	}
	return fmt.Sprintf("denylist of %d system calls, native ABI only", len(seccompDenied)+len(seccompForbidden))
}
