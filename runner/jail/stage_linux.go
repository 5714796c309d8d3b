package jail

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// stageEnv selects, in a re-executed copy of the current binary, which jail
// stage to run instead of the program's main. It is read in init().
const stageEnv = "SANDBOX_MCP_JAIL_STAGE"

const (
	stageProbe  = "probe"  // Check: namespaces could be created; print ok
	stageZygote = "zygote" // a sandbox's user (and network) namespace holder; forks inits
	stageInit   = "init"   // pid 1 of a command's namespaces: build the root, run the command
	stageExec   = "exec"   // the command's process: drop everything, exec the program
)

// File descriptors the stages receive.
const (
	fdConfig  = 3 // init, exec: JSON initConfig
	fdStatus  = 4 // init: JSON lines to the server; exec: exec error to init
	fdControl = 5 // init: 4-byte signal numbers from the server
)

// initConfig is what the server sends the jail's init.
type initConfig struct {
	Hostname  string
	Network   Network
	Limits    Limits
	NprocRlim bool // no pids cgroup: RLIMIT_NPROC instead
	DataRlim  bool // no memory cgroup: RLIMIT_DATA instead
	Path      string
	Args      []string
	Env       []string
	Dir       string
}

func init() {
	switch os.Getenv(stageEnv) {
	case "":
		return
	case stageProbe:
		fmt.Println("ok")
		os.Exit(0)
	case stageZygote:
		runZygote()
	case stageInit:
		runInit()
	case stageExec:
		runExec()
	default:
		fmt.Fprintf(os.Stderr, "jail: unknown stage %q\n", os.Getenv(stageEnv))
		os.Exit(125)
	}
}

// runInit is pid 1 of a command's namespaces, as root of a user namespace
// that maps only to the sandbox's unprivileged host uid. It builds the
// sandbox's root, starts the command in a nested user namespace as uid
// 1000, forwards signals, reaps orphans, and reports how the command ended.
// When it exits, the kernel kills everything left in its pid namespace.
func runInit() {
	// No descriptor of the server's — ours or any it inherited without
	// close-on-exec — may reach the command.
	cloexecFrom(3)
	status := os.NewFile(fdStatus, "status")
	report := func(m initMsg) {
		b, _ := json.Marshal(m)
		_, _ = status.Write(append(b, '\n'))
	}
	fail := func(err error) {
		report(initMsg{Error: err.Error()})
		os.Exit(125)
	}
	// Non-dumpable: the sandbox's user shares this process's host uid; this
	// keeps it from ptrace and /proc/1/{mem,fd,root,exe}.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fail(fmt.Errorf("prctl dumpable: %w", err))
	}
	ignoreSignals()
	var cfg initConfig
	if err := json.NewDecoder(os.NewFile(fdConfig, "config")).Decode(&cfg); err != nil {
		fail(fmt.Errorf("read config: %w", err))
	}
	if err := buildRoot(cfg); err != nil {
		fail(err)
	}
	control := os.NewFile(fdControl, "control")

	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		fail(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		fail(err)
	}
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{"sandbox-mcp-jail-exec"},
		Env:        stageEnvFor(stageExec),
		Dir:        "/",
		Stdin:      os.Stdin,
		Stdout:     os.Stdout,
		Stderr:     os.Stderr,
		ExtraFiles: []*os.File{cfgR, errW},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: UserID, HostID: 0, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: UserID, HostID: 0, Size: 1}},
			Setsid:      true,
			Pdeathsig:   syscall.SIGKILL,
			// Kept across exec only so the stage can set its namespace's
			// limit and then empty the bounding set.
			AmbientCaps: []uintptr{unix.CAP_SETPCAP, unix.CAP_SYS_RESOURCE},
		},
	}
	if err := cmd.Start(); err != nil {
		fail(fmt.Errorf("start command stage: %w", err))
	}
	cfgR.Close()
	errW.Close()
	os.Stdin.Close()
	os.Stdout.Close()
	os.Stderr.Close()
	if err := json.NewEncoder(cfgW).Encode(cfg); err != nil {
		fail(fmt.Errorf("send config: %w", err))
	}
	cfgW.Close()
	execErr, _ := io.ReadAll(io.LimitReader(errR, 4096))
	errR.Close()
	child := cmd.Process.Pid
	if len(execErr) > 0 {
		_ = syscall.Kill(-1, syscall.SIGKILL)
		reapAll(child)
		fail(errors.New(strings.TrimSpace(string(execErr))))
	}
	report(initMsg{Started: true})

	go forwardSignals(control)
	ws := reapAll(child)
	// A signal being forwarded is answered before init ends: the command's
	// death, which that signal may have caused, must not beat the answer.
	forwardMu.Lock()
	m := initMsg{Exited: true, Code: ws.ExitStatus()}
	if ws.Signaled() {
		m.Code, m.Signal = -1, ws.Signal().String()
	}
	report(m)
	os.Exit(0)
}

// reapAll reaps children (the command and the orphans it leaves to pid 1)
// until the command exits, then kills everything left in the pid namespace.
// It returns the command's wait status. Whatever a fork bomb creates after
// the kill dies with init: the kernel kills a pid namespace's processes
// when its init exits.
func reapAll(child int) syscall.WaitStatus {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil { // ECHILD: cannot happen while the command lives
			return ws
		}
		if pid == child && (ws.Exited() || ws.Signaled()) {
			_ = syscall.Kill(-1, syscall.SIGKILL)
			return ws
		}
	}
}

// forwardSignals sends each signal number read from ctl to every process in
// the pid namespace (kill(-1) from pid 1 spares only pid 1) and answers
// with one byte when it has.
func forwardSignals(ctl *os.File) {
	var b [4]byte
	for {
		if _, err := io.ReadFull(ctl, b[:]); err != nil {
			return
		}
		sig := syscall.Signal(binary.LittleEndian.Uint32(b[:]))
		forwardMu.Lock()
		if sig > 0 && sig < 65 {
			_ = syscall.Kill(-1, sig)
		}
		_, err := ctl.Write([]byte{1})
		forwardMu.Unlock()
		if err != nil {
			return
		}
	}
}

// forwardMu spans one forwarded signal and its answer; init takes it for
// good before it exits.
var forwardMu sync.Mutex

// runExec is the command's own process, in a nested user namespace where it
// is uid 1000 and the host sees the sandbox's unprivileged uid. It sets the
// limits, closes the last doors (no_new_privs, Landlock, capabilities) and
// execs the program.
func runExec() {
	runtime.LockOSThread()
	errPipe := os.NewFile(fdStatus, "exec-error")
	fail := func(format string, a ...any) {
		fmt.Fprintf(errPipe, format, a...)
		os.Exit(127)
	}
	cloexecFrom(3)
	var cfg initConfig
	if err := json.NewDecoder(os.NewFile(fdConfig, "config")).Decode(&cfg); err != nil {
		fail("jail: read config: %v", err)
	}
	syscall.Close(fdConfig)
	// No user namespace below this one: the command cannot gain the
	// capabilities over new network, mount and pid namespaces that much
	// kernel attack surface needs.
	if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0"), 0); err != nil {
		fail("jail: forbid nested user namespaces: %v", err)
	}
	// A session keyring of its own: the server's (inherited) keys, which a
	// possessor may read, stay out of reach.
	if _, err := unix.KeyctlJoinSessionKeyring(fmt.Sprintf("sandbox-mcp-jail-%d-%d", os.Getpid(), time.Now().UnixNano())); err != nil && err != unix.ENOSYS {
		fail("jail: new session keyring: %v", err)
	}
	// The namespace holder is shielded from the OOM killer; the command is not.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("0"), 0)
	if err := os.Chdir(cfg.Dir); err != nil {
		fail("jail: working directory %s: %v", cfg.Dir, err)
	}
	prog, err := lookPath(cfg.Path, cfg.Env)
	if err != nil {
		fail("%v", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fail("jail: no_new_privs: %v", err)
	}
	// Landlock and the capability drop act on this thread, which execs.
	if err := applyLandlock(); err != nil {
		fail("jail: landlock: %v", err)
	}
	if err := dropCapabilities(); err != nil {
		fail("jail: %v", err)
	}
	if err := applySeccomp(); err != nil {
		fail("jail: %v", err)
	}
	argv := append([]string{cfg.Path}, cfg.Args...)
	// Limits last: RLIMIT_DATA and RLIMIT_NPROC count this Go runtime's
	// thread stacks and threads, and a thread it could not create would
	// crash it. Nothing here starts threads between this and exec.
	if err := setRlimits(cfg); err != nil {
		fail("jail: %v", err)
	}
	err = syscall.Exec(prog, argv, cfg.Env)
	fail("jail: exec %s: %v", cfg.Path, err)
}

// lookPath resolves a program name against the PATH in env, inside the
// sandbox's root.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		if _, err := os.Stat(name); err != nil {
			return "", fmt.Errorf("jail: exec %s: %w", name, errors.Unwrap(err))
		}
		return name, nil
	}
	pathEnv := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("jail: exec %s: executable file not found in $PATH", name)
}

// setRlimits applies the per-process limits.
func setRlimits(cfg initConfig) error {
	l := cfg.Limits
	set := func(res int, v uint64, name string) error {
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("setrlimit %s: %w", name, err)
		}
		return nil
	}
	if err := set(unix.RLIMIT_CORE, 0, "RLIMIT_CORE"); err != nil {
		return err
	}
	if err := set(unix.RLIMIT_FSIZE, uint64(l.FileBytes), "RLIMIT_FSIZE"); err != nil {
		return err
	}
	if err := set(unix.RLIMIT_NOFILE, uint64(l.OpenFiles), "RLIMIT_NOFILE"); err != nil {
		return err
	}
	if cfg.NprocRlim {
		if err := set(unix.RLIMIT_NPROC, uint64(l.Processes), "RLIMIT_NPROC"); err != nil {
			return err
		}
	}
	if cfg.DataRlim {
		if err := set(unix.RLIMIT_DATA, uint64(l.MemoryBytes), "RLIMIT_DATA"); err != nil {
			return err
		}
	}
	return nil
}

// dropCapabilities empties the bounding, ambient, inheritable, permitted and
// effective sets of the calling thread (the one that will exec).
func dropCapabilities() error {
	for c := 0; c <= 63; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if err == unix.EINVAL { // past the kernel's last capability
				break
			}
			return fmt.Errorf("drop capability %d from bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// cloexecFrom marks every descriptor from fd up close-on-exec.
func cloexecFrom(fd int) {
	if unix.CloseRange(uint(fd), ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n >= fd {
			syscall.CloseOnExec(n)
		}
	}
}

// stageEnvFor is the whole environment of a re-executed stage: the stage
// selector, and a Go runtime kept small (one P) for a fast start. The
// short-lived exec stage also skips the GC; the zygote and inits live long
// and keep it.
func stageEnvFor(stage string) []string {
	env := []string{stageEnv + "=" + stage, "GOMAXPROCS=1"}
	if stage == stageExec {
		env = append(env, "GOGC=off")
	}
	return env
}
