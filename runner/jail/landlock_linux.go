package jail

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// landlockConfig restricts file access and, from ABI 6, signals and abstract
// unix sockets to the sandbox's own domain. Network is left to the network
// namespace. BestEffort: older kernels get what they support.
var landlockConfig = landlock.Config{
	HandledAccessFS: landlock.V6.HandledAccessFS,
	Scoped:          landlock.V6.Scoped,
}.BestEffort()

// applyLandlock is the second fence behind the mount namespace: even if the
// sandbox's root held more than intended, the command may only read and
// execute the system dirs and write its home, /tmp and a few devices. It
// restricts only the calling thread, which must be locked and then exec:
// the domain passes to the program, and no other thread needs it.
func applyLandlock() error {
	fd, flags, err := landlockConfig.NewRulesetFD(
		landlock.PathAccess(landlock.AccessFSSet(llsys.AccessFSReadDir), "/"),
		landlock.RODirs("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc").IgnoreIfMissing(),
		landlock.RODirs("/proc").IgnoreIfMissing(),
		landlock.RWDirs("/home/user", "/tmp", "/dev/shm").WithRefer().IgnoreIfMissing(),
		landlock.RWDirs("/dev/pts").WithIoctlDev().IgnoreIfMissing(),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/tty").WithIoctlDev().IgnoreIfMissing(),
		landlock.ROFiles("/dev/random", "/dev/urandom").IgnoreIfMissing(),
	)
	if err != nil {
		return err
	}
	if fd < 0 { // no Landlock on this kernel: BestEffort
		return nil
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	return llsys.LandlockRestrictSelf(fd, flags)
}

// llsysABI is the kernel's Landlock ABI version (0 without Landlock).
func llsysABI() (int, error) {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0, err
	}
	return v, nil
}

// landlockNote says, for the log, what Landlock this kernel enforces.
func landlockNote() string {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil || v < 1 {
		return "unavailable (mount namespace only)"
	}
	return fmt.Sprintf("ABI %d", v)
}
