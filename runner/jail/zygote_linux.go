package jail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// zygote is a sandbox's long-lived namespace holder: a re-executed copy of
// this binary that is root of the sandbox's user namespace (mapped to the
// sandbox's unprivileged host uid) and, for NetworkNone, owns its network
// namespace. Each Start asks it, over a unix socket, to fork a jail init in
// fresh mount, pid and uts namespaces. Creating the user and network
// namespaces once per sandbox instead of once per command saves most of a
// command's start-up cost, and gives all commands of a sandbox one loopback.
type zygote struct {
	cmd     *exec.Cmd
	conn    *net.UnixConn
	mu      sync.Mutex // one request at a time
	release chan struct{}
	done    chan struct{} // closed when the zygote has been reaped
}

// zygoteRequest asks the zygote for one jail init. Its descriptors travel
// alongside: stdin, stdout, stderr, status, control.
type zygoteRequest struct {
	Config initConfig
}

// maxRequestBytes bounds one request to the zygote: a datagram on a unix
// socket must fit its send buffer (about 208 KiB by default).
const maxRequestBytes = 192 << 10

// zygoteHello is the first message to the zygote: the sandbox-wide
// settings it applies to its namespaces.
type zygoteHello struct {
	ShmBytes int64 // SysV shared memory bound for the sandbox's IPC namespace
	// Egress asks for a TCP listener at EgressAddr in the sandbox's network
	// namespace; its descriptor comes back with the hello's reply.
	Egress bool
}

// zygoteReply answers a request; the init's pidfd travels alongside.
type zygoteReply struct {
	Pid   int
	Error string
}

// startZygote starts the sandbox's zygote and waits until it is ready.
func (s *Sandbox) startZygote(ctx context.Context) (*zygote, error) {
	zEnd, ourEnd, err := socketPairType(unix.SOCK_SEQPACKET)
	if err != nil {
		return nil, fmt.Errorf("jail: new: %w", err)
	}
	defer zEnd.Close()
	fc, err := net.FileConn(ourEnd)
	ourEnd.Close()
	if err != nil {
		return nil, fmt.Errorf("jail: new: %w", err)
	}
	conn := fc.(*net.UnixConn)
	dirFD, err := os.OpenFile(s.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("jail: new: %w", err)
	}
	defer dirFD.Close()

	flags := uintptr(syscall.CLONE_NEWUSER | syscall.CLONE_NEWIPC)
	env := stageEnvFor(stageZygote)
	if s.network == NetworkNone {
		flags |= syscall.CLONE_NEWNET
		env = append(env, zygoteNetEnv+"=1")
	}
	attr := &syscall.SysProcAttr{
		Cloneflags:  flags,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: s.hostUID, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: s.hostGID, Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
		Setsid:      true,
	}
	if s.asRoot {
		// Drop the server's supplementary groups (root's include gid 0).
		attr.GidMappingsEnableSetgroups = true
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
	}
	z := &zygote{conn: conn, release: make(chan struct{}), done: make(chan struct{})}
	// Its working directory is Dir: jail inits bind ./home and ./tmp from
	// there. A descriptor of the host's mount namespace cannot be bound in
	// a new one, and the path to Dir may not be searchable by the sandbox's
	// host uid.
	z.cmd = &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{"sandbox-mcp-jail-zygote"},
		Env:         env,
		ExtraFiles:  []*os.File{zEnd}, // fd 3
		SysProcAttr: attr,
	}
	if err := startOnOwnThread(z.cmd, int(dirFD.Fd()), z.release); err != nil {
		conn.Close()
		if errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("jail: new: the jail re-executes this program as the sandbox's unprivileged uid %d, which may not execute it (%v): make the binary executable by others (chmod o+rx)", s.hostUID, err)
		}
		return nil, fmt.Errorf("jail: new: start the sandbox's namespaces: %w", err)
	}
	go func() {
		_ = z.cmd.Wait()
		close(z.release)
		close(z.done)
	}()
	if s.cg != nil {
		if err := s.cg.attach(z.cmd.Process.Pid); err != nil {
			if s.asRoot {
				z.close()
				return nil, err
			}
			// A delegated cgroup we may create but not move into: fall
			// back to rlimits, and say so.
			s.logger.Warn("jail: cannot use the sandbox's cgroup; rlimits only", "error", err)
			_ = s.cg.remove()
			s.cg = nil
		}
	}
	if s.asRoot {
		// The OOM killer should pick a command, not the namespace holder;
		// commands set their own score back to 0.
		_ = os.WriteFile("/proc/"+strconv.Itoa(z.cmd.Process.Pid)+"/oom_score_adj", []byte("-1000"), 0)
	}
	if err := ctx.Err(); err != nil {
		z.close()
		return nil, err
	}
	hello, _ := json.Marshal(zygoteHello{ShmBytes: s.limits.MemoryBytes, Egress: s.egress})
	var rep zygoteReply
	got, err := z.roundTrip(hello, nil, &rep)
	if err != nil {
		z.close()
		return nil, fmt.Errorf("jail: new: the sandbox's namespaces did not come up: %w", err)
	}
	want := 0
	if s.egress {
		want = 1
	}
	if rep.Error != "" || len(got) != want {
		for _, fd := range got {
			unix.Close(fd)
		}
		z.close()
		if rep.Error == "" {
			rep.Error = fmt.Sprintf("the namespace holder sent %d descriptors, want %d", len(got), want)
		}
		return nil, fmt.Errorf("jail: new: %s", rep.Error)
	}
	if s.egress {
		f := os.NewFile(uintptr(got[0]), "egress")
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			z.close()
			return nil, fmt.Errorf("jail: new: the egress listener: %w", err)
		}
		s.egressLn = ln
	}
	return z, nil
}

// roundTrip sends one request with descriptors and reads the reply and any
// descriptors that come with it. It takes milliseconds, so it does not stop
// for a canceled context (the descriptors must stay open until sent, and an
// exchange cut in half would leave the socket out of step); a holder that
// does not answer within 30s is ended.
func (z *zygote) roundTrip(req []byte, fds []*os.File, rep *zygoteReply) ([]int, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	_ = z.conn.SetDeadline(time.Now().Add(30 * time.Second))
	var oob []byte
	if len(fds) > 0 {
		ints := make([]int, len(fds))
		for i, f := range fds {
			ints[i] = int(f.Fd())
		}
		oob = unix.UnixRights(ints...)
	}
	if _, _, err := z.conn.WriteMsgUnix(req, oob, nil); err != nil {
		return nil, z.ioErr(err)
	}
	buf := make([]byte, 4096)
	oobBuf := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := z.conn.ReadMsgUnix(buf, oobBuf)
	if err != nil {
		return nil, z.ioErr(err)
	}
	got, err := parseRights(oobBuf[:oobn])
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(buf[:n], rep); err != nil {
		for _, fd := range got {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("bad reply from the sandbox's namespace holder: %w", err)
	}
	return got, nil
}

func (z *zygote) ioErr(err error) error {
	select {
	case <-z.done:
		return errors.New("the sandbox's namespace holder has ended (killed, perhaps by the OOM killer); close this sandbox and create a new one")
	default:
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		go z.close()
		return errors.New("the sandbox's namespace holder did not answer within 30s; it has been ended")
	}
	return err
}

// spawn asks the zygote for a jail init running cfg with the given stdio,
// status and control descriptors, and returns its host pid and pidfd.
func (z *zygote) spawn(cfg initConfig, fds []*os.File) (int, *os.File, error) {
	req, err := json.Marshal(zygoteRequest{Config: cfg})
	if err != nil {
		return 0, nil, fmt.Errorf("jail: start: %w", err)
	}
	if len(req) > maxRequestBytes {
		return 0, nil, fmt.Errorf("jail: start: the command's arguments and environment encode to %d bytes; the most is %d", len(req), maxRequestBytes)
	}
	var rep zygoteReply
	got, err := z.roundTrip(req, fds, &rep)
	if err != nil {
		return 0, nil, fmt.Errorf("jail: start: %w", err)
	}
	if rep.Error != "" || len(got) != 1 {
		for _, fd := range got {
			unix.Close(fd)
		}
		if rep.Error == "" {
			rep.Error = "no pidfd in the reply"
		}
		return 0, nil, fmt.Errorf("jail: start: %s", rep.Error)
	}
	return rep.Pid, os.NewFile(uintptr(got[0]), "pidfd"), nil
}

// close ends the zygote: every init it forked gets SIGKILL (Pdeathsig), and
// with each init its whole pid namespace.
func (z *zygote) close() {
	_ = z.cmd.Process.Kill()
	z.conn.Close()
	<-z.done
}

func parseRights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		r, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		fds = append(fds, r...)
	}
	return fds, nil
}

// zygoteNetEnv tells the zygote it owns a fresh network namespace.
const zygoteNetEnv = "SANDBOX_MCP_JAIL_NETNS"

// runZygote is the zygote stage; see zygote.
func runZygote() {
	cloexecFrom(3)
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	ignoreSignals()
	f := os.NewFile(3, "zygote")
	fc, err := net.FileConn(f)
	if err != nil {
		os.Exit(125)
	}
	f.Close()
	conn := fc.(*net.UnixConn)
	reply := func(rep zygoteReply, fds ...int) {
		b, _ := json.Marshal(rep)
		var oob []byte
		if len(fds) > 0 {
			oob = unix.UnixRights(fds...)
		}
		if _, _, err := conn.WriteMsgUnix(b, oob, nil); err != nil {
			os.Exit(0)
		}
	}
	buf := make([]byte, 1<<20)
	oobBuf := make([]byte, unix.CmsgSpace(8*4))
	// The first message is the hello: answer once the namespaces are set.
	n, _, _, _, err := conn.ReadMsgUnix(buf, oobBuf)
	if err != nil {
		os.Exit(0)
	}
	var hello zygoteHello
	if err := json.Unmarshal(buf[:n], &hello); err != nil {
		reply(zygoteReply{Error: "bad hello: " + err.Error()})
		os.Exit(125)
	}
	// SysV shared memory outlives its processes (until the sandbox closes)
	// and, without a memory cgroup, nothing else bounds it.
	if hello.ShmBytes > 0 {
		page := int64(os.Getpagesize())
		for name, v := range map[string]int64{"shmmax": hello.ShmBytes, "shmall": (hello.ShmBytes + page - 1) / page} {
			if err := os.WriteFile("/proc/sys/kernel/"+name, []byte(strconv.FormatInt(v, 10)), 0); err != nil {
				reply(zygoteReply{Error: "bound SysV shared memory (kernel." + name + "): " + err.Error()})
				os.Exit(125)
			}
		}
	}
	if os.Getenv(zygoteNetEnv) != "" {
		if err := loopbackUp(); err != nil {
			reply(zygoteReply{Error: "bring up loopback: " + err.Error()})
			os.Exit(125)
		}
	}
	if hello.Egress {
		fd, err := egressListen()
		if err != nil {
			reply(zygoteReply{Error: "listen on " + EgressAddr + " in the sandbox's network namespace: " + err.Error()})
			os.Exit(125)
		}
		reply(zygoteReply{}, fd)
		unix.Close(fd) // the server's copy is the only one left: commands never inherit it
	} else {
		reply(zygoteReply{})
	}
	go reapChildren()
	for {
		n, oobn, _, _, err := conn.ReadMsgUnix(buf, oobBuf)
		if err != nil || n == 0 {
			os.Exit(0) // the server closed the sandbox or died
		}
		fds, _ := parseRights(oobBuf[:oobn])
		pid, pidfd, err := forkInit(buf[:n], fds)
		for _, fd := range fds {
			unix.Close(fd)
		}
		if err != nil {
			reply(zygoteReply{Error: err.Error()})
			continue
		}
		reply(zygoteReply{Pid: pid}, pidfd)
		unix.Close(pidfd)
	}
}

// egressListen opens the egress listener in the zygote's network namespace
// and returns a close-on-exec descriptor of it for the server.
func egressListen() (int, error) {
	if os.Getenv(zygoteNetEnv) == "" {
		return -1, errors.New("the sandbox has no network namespace of its own")
	}
	ln, err := net.Listen("tcp4", EgressAddr)
	if err != nil {
		return -1, err
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return -1, err
	}
	defer f.Close()
	return unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
}

// forkInit starts one jail init with the request's config and descriptors.
func forkInit(req []byte, fds []int) (pid, pidfd int, err error) {
	var r zygoteRequest
	if err := json.Unmarshal(req, &r); err != nil {
		return 0, 0, fmt.Errorf("bad request: %w", err)
	}
	if len(fds) != 5 {
		return 0, 0, fmt.Errorf("bad request: %d descriptors, want 5", len(fds))
	}
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return 0, 0, err
		}
		files[i] = os.NewFile(uintptr(nfd), "fd")
		defer files[i].Close()
	}
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return 0, 0, err
	}
	defer cfgR.Close()
	defer cfgW.Close()
	pidfd = -1
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{"sandbox-mcp-jail-init"},
		Env:        stageEnvFor(stageInit),
		Stdin:      files[0],
		Stdout:     files[1],
		Stderr:     files[2],
		ExtraFiles: []*os.File{cfgR, files[3], files[4]}, // fds 3..5
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS,
			Pdeathsig:  syscall.SIGKILL,
			Setsid:     true,
			PidFD:      &pidfd,
		},
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, fmt.Errorf("start the jail's init: %w", err)
	}
	// Reaped by reapChildren; the server learns the end from its pidfd.
	if err := json.NewEncoder(cfgW).Encode(r.Config); err != nil {
		_ = cmd.Process.Kill()
		unix.Close(pidfd)
		return 0, 0, fmt.Errorf("send config: %w", err)
	}
	return cmd.Process.Pid, pidfd, nil
}

// ignoreSignals makes a jail stage deaf to the signals a sandboxed process
// could send it; only SIGKILL (from the server, or Pdeathsig) ends it.
func ignoreSignals() {
	for _, sig := range []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU} {
		signal.Ignore(sig)
	}
}

// reapChildren reaps the zygote's ended inits as SIGCHLD reports them. One
// goroutine waiting with WNOHANG keeps the thread count fixed: a blocked
// wait per init would hold an OS thread each, and threads count against
// the sandbox's pids limit, which a fork bomb may have exhausted.
func reapChildren() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGCHLD)
	for range ch {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
