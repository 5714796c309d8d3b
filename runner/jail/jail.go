package jail

import (
	"fmt"
	"log/slog"
	"strings"
)

// Network selects the network a sandbox's commands see.
type Network int

const (
	// NetworkNone gives the sandbox a network namespace of its own, shared
	// by its commands, with only a loopback interface (brought up): no
	// route to the host or beyond.
	NetworkNone Network = iota
	// NetworkHost shares the host's network namespace: egress is open and
	// host services on 127.0.0.1 are reachable. It is not an allowlist.
	NetworkHost
)

func (n Network) String() string {
	switch n {
	case NetworkNone:
		return "none"
	case NetworkHost:
		return "host"
	}
	return fmt.Sprintf("Network(%d)", int(n))
}

// Limits bounds what the commands of one sandbox may consume.
type Limits struct {
	// Processes is the most processes the sandbox may hold at once. Under a
	// pids cgroup that counts threads and the jail's own helpers too (about
	// five for the sandbox and five per running command); without one it is
	// RLIMIT_NPROC per command. It also caps the commands running at once.
	// If zero, 256.
	Processes int
	// MemoryBytes is the memory the sandbox may use: the total of all its
	// processes under a memory cgroup (the jail's helpers count too, a few
	// MiB), else a per-process RLIMIT_DATA. /dev/shm is bounded by it too.
	// If zero, 1 GiB.
	MemoryBytes int64
	// FileBytes is the largest file a command may write (RLIMIT_FSIZE).
	// If zero, 1 GiB.
	FileBytes int64
	// OpenFiles is the most open file descriptors per process
	// (RLIMIT_NOFILE). If zero, 1024.
	OpenFiles int
}

// withDefaults fills zero fields with their documented defaults.
func (l Limits) withDefaults() Limits {
	if l.Processes <= 0 {
		l.Processes = 256
	}
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = 1 << 30
	}
	if l.FileBytes <= 0 {
		l.FileBytes = 1 << 30
	}
	if l.OpenFiles <= 0 {
		l.OpenFiles = 1024
	}
	return l
}

// Config describes one sandbox.
type Config struct {
	// Dir is the host directory that holds this sandbox's writable areas:
	// Dir/home is /home/user and Dir/tmp is /tmp inside. It is created with
	// mode 0700 if missing and removed by Close. Required.
	Dir string
	// Network is the network commands see. The zero value is NetworkNone.
	Network Network
	// Limits bounds resource use; zero fields take their defaults.
	Limits Limits
	// Logger receives one line per sandbox saying which limits are in force,
	// and start failures. If nil, nothing is logged.
	Logger *slog.Logger
	// Hostname is the host name inside the sandbox. If empty, "sandbox".
	Hostname string
	// Egress opens a TCP listener at EgressAddr on the loopback of the
	// sandbox's otherwise empty network namespace and hands it to the
	// server: EgressListener accepts what the sandbox's programs send there
	// (an egress proxy's traffic). Valid only with NetworkNone.
	Egress bool
}

// EgressAddr is where the listener of a sandbox with Config.Egress sits
// inside its network namespace (runner/egress.SandboxAddr).
const EgressAddr = "127.0.0.1:3128"

// Cmd is one command to start in a sandbox.
type Cmd struct {
	// Path is the program: an absolute path inside the sandbox, or a name
	// looked up in the PATH of Env (default PATH if Env has none). It is
	// also argv[0].
	Path string
	// Args are the arguments after argv[0].
	Args []string
	// Env is the complete environment, "KEY=value" entries. HOME, USER,
	// LOGNAME and PATH are added when missing.
	Env []string
	// Dir is the working directory inside the sandbox; a relative one is
	// taken from /home/user. If empty, /home/user.
	Dir string
	// Stdin makes Process.Stdin a pipe to the command. If false, the
	// command's stdin is /dev/null.
	Stdin bool
}

// ExitStatus is how a command ended.
type ExitStatus struct {
	// Code is the exit code, or -1 if the command was killed by a signal.
	Code int
	// Signaled is true if a signal ended the command.
	Signaled bool
	// Signal names the signal ("killed", "terminated") when Signaled.
	Signal string
	// Status reads like os/exec: "exit status 1" or "signal: killed".
	Status string
}

// The sandbox's user inside every jail.
const (
	// UserName is the name of the unprivileged user commands run as.
	UserName = "user"
	// UserID is that user's uid and gid inside the sandbox.
	UserID = 1000
	// HomeDir is the user's home directory inside the sandbox.
	HomeDir = "/home/user"
	// TmpDir is the sandbox's writable scratch directory.
	TmpDir = "/tmp"
)

// defaultPath is the PATH given to commands whose Env has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// commandEnv returns env with HOME, USER, LOGNAME and PATH added when missing.
func commandEnv(env []string) []string {
	out := make([]string, 0, len(env)+4)
	have := map[string]bool{}
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		have[k] = true
		out = append(out, kv)
	}
	for _, d := range [][2]string{{"HOME", HomeDir}, {"USER", UserName}, {"LOGNAME", UserName}, {"PATH", defaultPath}} {
		if !have[d[0]] {
			out = append(out, d[0]+"="+d[1])
		}
	}
	return out
}

// statusOf builds the ExitStatus for an exit code or a signal name.
func statusOf(code int, signal string) ExitStatus {
	if signal != "" {
		return ExitStatus{Code: -1, Signaled: true, Signal: signal, Status: "signal: " + signal}
	}
	return ExitStatus{Code: code, Status: fmt.Sprintf("exit status %d", code)}
}
