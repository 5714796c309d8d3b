package jail

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// hostIDBase and hostIDSpan pick the unprivileged host uid/gid a sandbox's
// user maps to when the server runs as root: one id per sandbox, far above
// ordinary accounts and the usual /etc/subuid ranges.
const (
	hostIDBase = 1_500_000_000
	hostIDSpan = 1 << 24
)

// Sandbox is one isolated environment: a host directory holding its
// writable areas, its limits and the commands started in it.
type Sandbox struct {
	dir      string
	home     string
	tmp      string
	network  Network
	limits   Limits
	hostname string
	logger   *slog.Logger
	egress   bool
	egressLn net.Listener // EgressAddr in the sandbox's netns; nil without Egress

	// hostUID/hostGID are the host ids of the sandbox's user (and of the
	// jail's setup stage); asRoot says the server runs as root and chose them.
	hostUID, hostGID int
	asRoot           bool

	cg     *cgroups // nil: rlimits only
	zygote *zygote

	mu      sync.Mutex
	procs   map[*Process]struct{}
	closed  bool
	paused  bool
	closeMu sync.Mutex
	cerr    error
	cdone   bool
}

// New prepares a sandbox: it checks that isolation is available, creates
// cfg.Dir (0700) with home/ and tmp/, and sets up the resource limits. It
// never falls back to running commands unisolated: if isolation cannot be
// had, it returns an error saying why.
func New(ctx context.Context, cfg Config) (*Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := Check(); err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		return nil, errors.New("jail: new: Config.Dir is required")
	}
	if cfg.Network != NetworkNone && cfg.Network != NetworkHost {
		return nil, fmt.Errorf("jail: new: unknown network %v", cfg.Network)
	}
	if cfg.Egress && cfg.Network != NetworkNone {
		return nil, fmt.Errorf("jail: new: Egress needs NetworkNone (the listener lives in the sandbox's own network namespace), not %v", cfg.Network)
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("jail: new: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Sandbox{
		dir:      dir,
		home:     filepath.Join(dir, "home"),
		tmp:      filepath.Join(dir, "tmp"),
		network:  cfg.Network,
		limits:   cfg.Limits.withDefaults(),
		hostname: cfg.Hostname,
		logger:   logger,
		egress:   cfg.Egress,
		procs:    map[*Process]struct{}{},
	}
	if s.hostname == "" {
		s.hostname = "sandbox"
	}
	if os.Geteuid() == 0 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("jail: new: %w", err)
		}
		id := hostIDBase + int(binary.LittleEndian.Uint32(b[:])%hostIDSpan)
		s.hostUID, s.hostGID, s.asRoot = id, id, true
	} else {
		s.hostUID, s.hostGID = os.Geteuid(), os.Getegid()
	}
	if err := s.makeDirs(); err != nil {
		return nil, err
	}
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	cg, cgNote := newCgroups("sandbox-mcp-"+hex.EncodeToString(rb[:]), s.limits, s.asRoot)
	s.cg = cg
	z, err := s.startZygote(ctx)
	if err != nil {
		if cg != nil {
			_ = cg.remove()
		}
		_ = removeAll(s.dir)
		return nil, err
	}
	s.zygote = z
	logger.Info("jail: sandbox ready",
		"dir", dir, "network", s.network.String(), "egress_listener", s.egress, "host_uid", s.hostUID,
		"limits", s.limitsInForce(cgNote), "landlock", landlockNote(), "seccomp", seccompNote())
	return s, nil
}

func (s *Sandbox) makeDirs() error {
	if err := os.MkdirAll(filepath.Dir(s.dir), 0o755); err != nil {
		return fmt.Errorf("jail: new: %w", err)
	}
	if err := os.Mkdir(s.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("jail: new: %w", err)
	}
	fi, err := os.Lstat(s.dir)
	if err != nil {
		return fmt.Errorf("jail: new: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("jail: new: %s is not a directory", s.dir)
	}
	if err := os.Chmod(s.dir, 0o700); err != nil {
		return fmt.Errorf("jail: new: %w", err)
	}
	if s.asRoot {
		// The jail's setup runs as the sandbox's host uid and must search Dir.
		if err := os.Lchown(s.dir, s.hostUID, s.hostGID); err != nil {
			return fmt.Errorf("jail: new: %w", err)
		}
	}
	for _, d := range []struct {
		path string
		mode fs.FileMode
	}{{s.home, 0o755}, {s.tmp, 0o1777}} {
		if err := os.Mkdir(d.path, d.mode); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("jail: new: %w", err)
		}
		if fi, err := os.Lstat(d.path); err != nil || !fi.IsDir() {
			return fmt.Errorf("jail: new: %s must be a directory (not a symlink)", d.path)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return fmt.Errorf("jail: new: %w", err)
		}
		if s.asRoot {
			if err := os.Lchown(d.path, s.hostUID, s.hostGID); err != nil {
				return fmt.Errorf("jail: new: %w", err)
			}
		}
	}
	return nil
}

// limitsInForce describes, for the log, how each limit is enforced.
func (s *Sandbox) limitsInForce(cgNote string) string {
	l := s.limits
	var b strings.Builder
	if s.cg != nil && s.cg.pids {
		fmt.Fprintf(&b, "processes=%d (%s pids), ", l.Processes, s.cg.kind)
	} else {
		fmt.Fprintf(&b, "processes=%d (RLIMIT_NPROC per command), ", l.Processes)
	}
	if s.cg != nil && s.cg.memory {
		fmt.Fprintf(&b, "memory=%d (%s memory, whole sandbox), ", l.MemoryBytes, s.cg.kind)
	} else {
		fmt.Fprintf(&b, "memory=%d (RLIMIT_DATA per process), ", l.MemoryBytes)
	}
	fmt.Fprintf(&b, "file_bytes=%d (RLIMIT_FSIZE), open_files=%d (RLIMIT_NOFILE), core=0", l.FileBytes, l.OpenFiles)
	if s.cg != nil && s.cg.freezer {
		fmt.Fprintf(&b, ", pause=%s freezer", s.cg.kind)
	} else {
		b.WriteString(", pause=SIGSTOP")
	}
	if cgNote != "" {
		b.WriteString("; cgroups: " + cgNote)
	}
	return b.String()
}

// HostPath maps a path inside the sandbox under /home/user or /tmp to the
// host path that holds it. Any other path is an error: only the writable
// areas are served. It refuses paths with a symlink in them, because
// opening the returned path with the os package would follow the link out
// of the sandbox; use Root to open files, which stays beneath the area even
// when the sandbox swaps a component for a symlink later.
func (s *Sandbox) HostPath(sandboxPath string) (hostPath string, writable bool, err error) {
	base, rel, err := s.area(sandboxPath)
	if err != nil {
		return "", false, err
	}
	p := base
	if rel != "." {
		for _, part := range strings.Split(rel, "/") {
			p = filepath.Join(p, part)
			fi, err := os.Lstat(p)
			if errors.Is(err, fs.ErrNotExist) {
				break
			}
			if err != nil {
				return "", false, fmt.Errorf("jail: host path %q: %w", sandboxPath, err)
			}
			if fi.Mode()&fs.ModeSymlink != 0 {
				return "", false, fmt.Errorf("jail: host path %q: %s is a symlink; open it through Root", sandboxPath, strings.TrimPrefix(p, base))
			}
		}
	}
	return filepath.Join(base, rel), true, nil
}

// Root opens the writable area that holds sandboxPath (/home/user or /tmp)
// as an os.Root and returns the path of sandboxPath relative to it. Every
// access through the root stays beneath the area: a symlink the sandbox
// planted that points outside (even to /) fails instead of escaping. The
// caller closes the root.
func (s *Sandbox) Root(sandboxPath string) (root *os.Root, rel string, err error) {
	base, rel, err := s.area(sandboxPath)
	if err != nil {
		return nil, "", err
	}
	r, err := os.OpenRoot(base)
	if err != nil {
		return nil, "", fmt.Errorf("jail: root %q: %w", sandboxPath, err)
	}
	return r, rel, nil
}

// area splits an absolute sandbox path into its area's host directory and
// the cleaned relative path inside it.
func (s *Sandbox) area(sandboxPath string) (base, rel string, err error) {
	if !strings.HasPrefix(sandboxPath, "/") {
		return "", "", fmt.Errorf("jail: path %q is not absolute; use /home/user/... or /tmp/...", sandboxPath)
	}
	if strings.ContainsRune(sandboxPath, 0) {
		return "", "", fmt.Errorf("jail: path %q contains a NUL byte", sandboxPath)
	}
	p := path.Clean(sandboxPath)
	for _, a := range []struct{ prefix, host string }{{HomeDir, s.home}, {TmpDir, s.tmp}} {
		if p == a.prefix {
			return a.host, ".", nil
		}
		if r, ok := strings.CutPrefix(p, a.prefix+"/"); ok {
			return a.host, r, nil
		}
	}
	return "", "", fmt.Errorf("jail: path %q is outside the sandbox's files; only /home/user and /tmp are served", sandboxPath)
}

// EgressListener returns the TCP listener at EgressAddr inside the
// sandbox's network namespace, for a sandbox created with Config.Egress,
// else nil. Connections the sandbox's programs open to EgressAddr are
// accepted here, on the host side. Close closes it; the caller may close
// it earlier (an egress proxy's Serve does).
func (s *Sandbox) EgressListener() net.Listener {
	if s.egressLn == nil {
		return nil
	}
	return s.egressLn
}

// Owner returns the host uid and gid that files in the sandbox's writable
// areas should have so the sandbox's user owns them, and ok=false when no
// chown is needed (the server does not run as root).
func (s *Sandbox) Owner() (uid, gid int, ok bool) {
	return s.hostUID, s.hostGID, s.asRoot
}

// Chown makes a file the server wrote under Dir owned by the sandbox's user.
// It resolves hostPath beneath Dir without following symlinks out of it
// (nor a final symlink), so a link the sandbox planted cannot redirect the
// chown. It is a no-op when the server does not run as root, since the
// user is then the server's own uid.
func (s *Sandbox) Chown(hostPath string) error {
	if !s.asRoot {
		return nil
	}
	abs, err := filepath.Abs(hostPath)
	if err != nil {
		return fmt.Errorf("jail: chown: %w", err)
	}
	rel, err := filepath.Rel(s.dir, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("jail: chown %s: not under the sandbox directory %s", hostPath, s.dir)
	}
	root, err := os.OpenRoot(s.dir)
	if err != nil {
		return fmt.Errorf("jail: chown: %w", err)
	}
	defer root.Close()
	if err := root.Lchown(rel, s.hostUID, s.hostGID); err != nil {
		return fmt.Errorf("jail: chown: %w", err)
	}
	return nil
}

// Pause stops every process of the sandbox (freezer cgroup where there is
// one, else SIGSTOP to every command's process tree).
func (s *Sandbox) Pause() error { return s.setPaused(true) }

// Resume continues every process Pause stopped.
func (s *Sandbox) Resume() error { return s.setPaused(false) }

func (s *Sandbox) setPaused(pause bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("jail: sandbox is closed")
	}
	if s.cg != nil && s.cg.freezer {
		if err := s.cg.freeze(pause); err != nil {
			return err
		}
	} else {
		sig := syscall.SIGCONT
		if pause {
			sig = syscall.SIGSTOP
		}
		for p := range s.procs {
			_ = p.forward(sig)
		}
	}
	s.paused = pause
	return nil
}

// Close kills every process of the sandbox — whole trees, daemonised
// grandchildren included — waits for them, and removes Dir. It is safe to
// call more than once; later calls return the first result.
func (s *Sandbox) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.cdone {
		return s.cerr
	}
	s.mu.Lock()
	s.closed = true
	procs := make([]*Process, 0, len(s.procs))
	for p := range s.procs {
		procs = append(procs, p)
	}
	frozen := s.paused
	s.mu.Unlock()
	var errs []error
	if frozen && s.cg != nil && s.cg.freezer {
		// Frozen tasks cannot die; kill first, then thaw so the kill lands.
		for _, p := range procs {
			_ = p.kill()
		}
		_ = s.cg.freeze(false)
	}
	for _, p := range procs {
		_ = p.kill()
	}
	s.zygote.close()
	if s.egressLn != nil {
		// Our descriptor keeps the network namespace alive.
		_ = s.egressLn.Close()
	}
	if s.cg != nil {
		s.cg.killAll()
	}
	deadline := time.After(10 * time.Second)
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline:
			errs = append(errs, fmt.Errorf("jail: close: process %d did not exit", p.Pid()))
		}
	}
	if s.cg != nil {
		if err := s.cg.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeAll(s.dir); err != nil {
		errs = append(errs, fmt.Errorf("jail: close: remove %s: %w", s.dir, err))
	}
	s.cerr = errors.Join(errs...)
	s.cdone = true
	return s.cerr
}

// removeAll removes dir even when the sandbox left directories without
// write or search permission in it.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

var (
	checkOnce sync.Once
	checkErr  error
)

// Check reports whether isolation is available on this machine. The error
// says why not and what to do. The answer is computed once per process.
func Check() error {
	checkOnce.Do(func() { checkErr = check() })
	return checkErr
}

// minKernel is the oldest kernel the jail supports: pidfds (5.3) keep
// signals from ever reaching a reused pid.
var minKernel = [2]int{5, 3}

func check() error {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		var major, minor int
		if _, err := fmt.Sscanf(unix.ByteSliceToString(uts.Release[:]), "%d.%d", &major, &minor); err == nil &&
			(major < minKernel[0] || major == minKernel[0] && minor < minKernel[1]) {
			return fmt.Errorf("jail: kernel %d.%d is older than %d.%d, the oldest the local sandbox supports; use the e2b backend", major, minor, minKernel[0], minKernel[1])
		}
	}
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		return errors.New("jail: this kernel has no user namespaces (CONFIG_USER_NS); use the e2b backend")
	}
	if os.Geteuid() != 0 {
		if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
			return errors.New("jail: unprivileged user namespaces are disabled: sysctl kernel.unprivileged_userns_clone=1, run as root, or use the e2b backend")
		}
		if b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && strings.TrimSpace(string(b)) == "1" {
			return errors.New("jail: unprivileged user namespaces are restricted by AppArmor: sysctl kernel.apparmor_restrict_unprivileged_userns=0, run as root, or use the e2b backend")
		}
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return errors.New("jail: user namespaces are disabled: sysctl user.max_user_namespaces=15000, or use the e2b backend")
	}
	// Probe: clone every namespace a jail uses and exit at once.
	uid, gid := os.Geteuid(), os.Getegid()
	if uid == 0 {
		uid, gid = hostIDBase, hostIDBase
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"sandbox-mcp-jail-probe"}
	cmd.Env = []string{stageEnv + "=" + stageProbe}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	if os.Geteuid() == 0 { // as a sandbox's namespace holder starts
		cmd.SysProcAttr.GidMappingsEnableSetgroups = true
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
	}
	out, err := cmd.CombinedOutput()
	if errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("jail: the jail re-executes this program as an unprivileged uid, which may not execute it (%v): make the binary executable by others (chmod o+rx)", err)
	}
	if err != nil {
		return fmt.Errorf("jail: cannot create namespaces here (%v %s): enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, kernel.apparmor_restrict_unprivileged_userns=0), run outside a container that forbids them, or use the e2b backend", err, strings.TrimSpace(string(out)))
	}
	if strings.TrimSpace(string(out)) != "ok" {
		return fmt.Errorf("jail: namespace probe answered %q; is package jail's init() reached before main runs?", strings.TrimSpace(string(out)))
	}
	return nil
}
