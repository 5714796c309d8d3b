// Package jail runs commands in isolated Linux sandboxes built from
// namespaces, a private root file system, Landlock, rlimits and cgroups, in
// pure Go. It backs the embedded E2B-compatible local sandbox (runner/e2blocal);
// it owns nothing about the E2B protocol, contracts or policy, and it must
// never run a command unisolated: if isolation cannot be had, New and Start
// fail.
//
// # Model
//
// A Sandbox is a host directory (Config.Dir) holding two writable areas,
// Dir/home (/home/user inside) and Dir/tmp (/tmp inside), plus limits. The
// jail's stages are the current binary re-executed (/proc/self/exe) and
// selected by an environment variable that this package's init() reads;
// in the re-executed copy, jail's init() takes over before main runs (it
// also works in test binaries). Programs that import jail must therefore
// do nothing before main that has side effects: package init functions run
// in every stage (the ones of packages initialised before jail's run first,
// and cost start-up time), and main never runs there. The binary must be
// executable by the sandbox's unprivileged uid (mode o+rx); Check says so.
//
// New starts the sandbox's namespace holder (the "zygote" stage): root of a
// new user namespace whose only id maps to an unprivileged host uid — the
// server's own uid when it is not root, and a per-sandbox uid at 1.5e9 and
// above when it is root, so the sandbox's user never maps to host root and
// host file permissions (/etc/shadow, root's files) still apply. For
// NetworkNone it also owns a new network namespace with only loopback up,
// shared by all commands of the sandbox (a server one command starts is
// reachable from the next while it runs); the holder also has the
// sandbox's IPC namespace. With Config.Egress the holder also listens on
// EgressAddr (127.0.0.1:3128) in that namespace and passes the listening
// socket to the server (EgressListener), keeping no copy: the namespace's
// one way out is whatever the server serves there (runner/egress's
// filtering proxy), and the jail itself decides nothing about it.
//
// Each Start asks the holder for a jail init (over a unix socket, passing
// the stdio pipes) in new mount, pid and uts namespaces. The init builds a
// new root on a tmpfs: /usr, /bin, /sbin, /lib* read-only from the host; an
// /etc holding a written passwd/group (user "user", uid 1000, home
// /home/user), hosts, hostname and resolv.conf plus a short list of
// read-only host files (ld.so cache, certificates, alternatives, profile —
// no shadow, ssh keys, machine-id or sudoers); /home/user and /tmp bound
// from Dir; a fresh /proc for the new pid namespace; a minimal /dev (null,
// zero, full, random, urandom, tty bound from the host, a private devpts, a
// bounded /dev/shm). It pivots into that root, detaches the host's, and
// makes / and /dev read-only. The host's home directories, the server's
// working directory, /var, /run, /sys and /root are simply not there.
//
// The command then runs from a last stage in a nested user namespace where
// it is uid 1000 ("user", HOME=/home/user) and the host sees the
// unprivileged uid above. Before exec that stage sets rlimits, forbids
// further user namespaces (max_user_namespaces=0: no route to the
// capabilities much kernel attack surface needs), sets no_new_privs,
// applies Landlock where the kernel has it (read and execute the system
// dirs, read /etc and /proc, write only /home/user, /tmp, /dev/shm and a
// few devices; from ABI 6 also no signals or abstract unix sockets outside
// the sandbox), empties every capability set, bounding set included,
// joins a session keyring of its own, closes every descriptor but stdio,
// and (amd64, arm64) installs a seccomp filter that refuses a short list of
// system calls ordinary programs do not need and kernel exploits favour
// (io_uring, bpf, userfaultfd, perf_event_open, keyctl, module and kexec
// loading, mount and setns) and any call through a foreign ABI.
//
// Each Start gets its own pid namespace whose pid 1 is the jail's init: it
// reaps orphans, forwards Signal to every process in the namespace, and
// when the command exits it kills what the command left behind. Killing
// the init (Signal(SIGKILL), Close — through a pidfd, so never a reused
// pid) makes the kernel kill the whole tree, daemonised grandchildren and
// fork bombs included, so output pipes reach EOF. Background processes
// therefore end with the command that started them. Every stage is
// non-dumpable and ignores catchable signals, so the sandbox's user, which
// shares their host uid, can neither ptrace nor stop them.
//
// Limits: with writable cgroups (v1 controllers, or v2 as root or in a
// delegated subtree such as systemd's user@UID.service) a sandbox
// gets its own pids and memory cgroups (one budget for all its commands)
// and a freezer for Pause; otherwise RLIMIT_NPROC per command and
// RLIMIT_DATA per process stand in, and Pause sends SIGSTOP. RLIMIT_FSIZE,
// RLIMIT_NOFILE and RLIMIT_CORE=0 always apply. New logs which limits are in
// force.
//
// The file API (HostPath, Root) serves only /home/user and /tmp. Root gives
// an os.Root, which refuses to follow a symlink the sandbox planted out of
// the area; HostPath refuses paths that contain a symlink at all.
//
// It needs Linux 5.3 or later with user namespaces open to the server's
// user; Check says what is missing.
//
// # What it protects against, and what not
//
// It stops a command run as the sandbox's user from reading or writing host
// files outside its two areas, seeing or signalling host processes, reaching
// the network (NetworkNone), gaining privileges (setuid binaries, file
// capabilities), outliving Close, and exhausting processes or memory where
// cgroups are available.
//
// It does not protect against kernel exploits: the namespaces, Landlock,
// seccomp and the mount table are enforced by the same kernel the command
// talks to, so a kernel bug reachable through the many system calls still
// allowed is an escape; the seccomp filter is a denylist, not an
// allowlist, and a microVM such as the E2B backend is the stronger
// boundary. NetworkHost shares the host's network: it is open egress and
// exposes every service listening on the host's loopback (this server's
// own local E2B API included, so that must demand its key), not an
// allowlist; allowlists are NetworkNone with Egress and a filtering proxy
// on the server's side. Disk use in Dir is bounded only per file (RLIMIT_FSIZE), not
// in total. Without cgroups the memory limit is per process, and
// RLIMIT_NPROC, when the server is not root, counts the server user's
// processes in the command's namespace. When the server is not root, the
// sandbox's user is the server's own host uid: the namespaces keep them
// apart, but the kernel's per-uid accounting is shared. Files the sandbox
// leaves in its areas are the server's to handle with care: besides
// symlinks (Root), expect FIFOs and huge or sparse files. Timing and
// resource side channels (CPU, cache, /proc/meminfo, load) are not hidden,
// and /proc/self/mountinfo shows the host path of Dir.
package jail
