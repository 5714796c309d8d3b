package jail

import (
	"fmt"

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
// execute the system dirs and write its home, /tmp and a few devices.
func applyLandlock() error {
	return landlockConfig.Restrict(
		landlock.PathAccess(landlock.AccessFSSet(llsys.AccessFSReadDir), "/"),
		landlock.RODirs("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc").IgnoreIfMissing(),
		landlock.RODirs("/proc").IgnoreIfMissing(),
		landlock.RWDirs("/home/user", "/tmp", "/dev/shm").WithRefer().IgnoreIfMissing(),
		landlock.RWDirs("/dev/pts").WithIoctlDev().IgnoreIfMissing(),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/tty").WithIoctlDev().IgnoreIfMissing(),
		landlock.ROFiles("/dev/random", "/dev/urandom").IgnoreIfMissing(),
	)
}

// landlockNote says, for the log, what Landlock this kernel enforces.
func landlockNote() string {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil || v < 1 {
		return "unavailable (mount namespace only)"
	}
	return fmt.Sprintf("ABI %d", v)
}
