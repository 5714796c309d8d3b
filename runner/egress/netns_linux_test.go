package egress_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sandbox-mcp/sandbox-mcp/runner/egress"
)

const helperSockEnv = "EGRESS_TEST_HELPER_SOCK"

type helperCmd struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env,omitempty"`
}

type helperResult struct {
	Code int    `json:"code"`
	Out  string `json:"out"`
}

// TestRealClientsInAnEmptyNetworkNamespace runs curl, Python, git and
// Node in a fresh network namespace (loopback only, like the jail's
// NetworkNone) whose one way out is Bridge on 127.0.0.1:3128 → a unix
// socket → the Proxy. Clients that use the proxy reach allowed hosts only;
// clients that ignore it, and UDP, reach nothing.
func TestRealClientsInAnEmptyNetworkNamespace(t *testing.T) {
	e := pypiEnv(t)
	upstream := e.upstreamTLS(netip.AddrPortFrom(pypiAddr, 443)) // replaces the route; same answers
	e.upstreamHTTP(netip.AddrPortFrom(pypiAddr, 80))
	sock := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	go func() { _ = e.proxy.Serve(context.Background(), ln) }()

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperNamespaceBridge$")
	cmd.Env = append(os.Environ(), helperSockEnv+"="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() != 0 {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot create a network namespace here: %v", err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	out := bufio.NewScanner(stdout)
	out.Buffer(make([]byte, 1<<20), 1<<20)
	run := func(env []string, argv ...string) helperResult {
		t.Helper()
		b, _ := json.Marshal(helperCmd{Argv: argv, Env: env})
		_, err := stdin.Write(append(b, '\n'))
		require.NoError(t, err)
		for out.Scan() {
			var r helperResult
			if json.Unmarshal(out.Bytes(), &r) == nil {
				return r
			}
		}
		t.Fatalf("helper ended: %v; stderr: %s", out.Err(), stderr.String())
		return helperResult{}
	}
	has := func(p string) bool { _, err := exec.LookPath(p); return err == nil }
	upstreamPort := upstream.Listener.Addr().(*net.TCPAddr).Port

	t.Run("curl-reaches-an-allowed-host-over-https", func(t *testing.T) {
		if !has("curl") {
			t.Skip("curl not installed")
		}
		r := run(nil, "curl", "-sS", "-k", "--max-time", "10", "https://pypi.org/simple/")
		assert.Equal(t, 0, r.Code, r.Out)
		assert.Equal(t, "hello pypi.org ", r.Out)
	})
	t.Run("curl-reaches-an-allowed-host-over-plain-http", func(t *testing.T) {
		if !has("curl") {
			t.Skip("curl not installed")
		}
		r := run(nil, "curl", "-sS", "--max-time", "10", "http://pypi.org/simple/")
		assert.Equal(t, 0, r.Code, r.Out)
		assert.Contains(t, r.Out, "hello pypi.org /simple/")
	})
	t.Run("curl-to-a-disallowed-host-gets-403", func(t *testing.T) {
		if !has("curl") {
			t.Skip("curl not installed")
		}
		r := run(nil, "curl", "-sS", "-k", "--max-time", "10", "https://example.org/")
		assert.NotEqual(t, 0, r.Code)
		assert.Contains(t, r.Out, "403")
	})
	t.Run("curl-to-cloud-metadata-through-the-proxy-gets-403", func(t *testing.T) {
		if !has("curl") {
			t.Skip("curl not installed")
		}
		r := run(nil, "curl", "-sS", "--max-time", "10", "-x", "http://"+egress.SandboxAddr, "--noproxy", "", "http://169.254.169.254/latest/meta-data/")
		assert.Contains(t, r.Out, "not covered by an allowed CIDR")
	})
	t.Run("curl-ignoring-the-proxy-reaches-nothing", func(t *testing.T) {
		if !has("curl") {
			t.Skip("curl not installed")
		}
		r := run(nil, "curl", "-sS", "-k", "--max-time", "5", "--noproxy", "*", "https://pypi.org/")
		assert.NotEqual(t, 0, r.Code, r.Out)
		r = run(nil, "curl", "-sS", "-k", "--max-time", "5", "--noproxy", "*", fmt.Sprintf("https://127.0.0.1:%d/", upstreamPort))
		assert.NotEqual(t, 0, r.Code, "the host's loopback is not the sandbox's: %s", r.Out)
		r = run(nil, "curl", "-sS", "-k", "--max-time", "5", "--noproxy", "*", "https://151.101.0.223/")
		assert.NotEqual(t, 0, r.Code, r.Out)
	})
	t.Run("python-urllib-uses-the-proxy", func(t *testing.T) {
		if !has("python3") {
			t.Skip("python3 not installed")
		}
		r := run(nil, "python3", "-c", "import ssl,urllib.request;print(urllib.request.urlopen('https://pypi.org/simple/',context=ssl._create_unverified_context(),timeout=10).read().decode(),end='')")
		assert.Equal(t, 0, r.Code, r.Out)
		assert.Equal(t, "hello pypi.org ", r.Out)
	})
	t.Run("udp-has-no-route-out", func(t *testing.T) {
		if !has("python3") {
			t.Skip("python3 not installed")
		}
		r := run(nil, "python3", "-c", "import socket;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.sendto(b'x',('8.8.8.8',53))")
		assert.NotEqual(t, 0, r.Code)
		assert.Contains(t, r.Out, "unreachable")
	})
	t.Run("git-goes-through-the-proxy", func(t *testing.T) {
		if !has("git") {
			t.Skip("git not installed")
		}
		before := len(e.Decisions())
		// The test server is no git server: what counts is the way there.
		run([]string{"GIT_SSL_NO_VERIFY=1", "GIT_TERMINAL_PROMPT=0"}, "git", "ls-remote", "https://pypi.org/repo.git")
		ds := e.Decisions()[before:]
		require.NotEmpty(t, ds)
		assert.True(t, ds[0].Allow)
		assert.Equal(t, "pypi.org", ds[0].SNI)
	})
	t.Run("node-fetch-ignoring-the-proxy-fails-closed", func(t *testing.T) {
		if !has("node") {
			t.Skip("node not installed")
		}
		r := run(nil, "node", "-e", "fetch('https://pypi.org/').then(r=>r.text()).then(t=>{console.log(t);process.exit(0)},e=>{console.log(String(e.cause&&e.cause.code||e));process.exit(3)})")
		// Node 24+ honours NODE_USE_ENV_PROXY and reaches pypi.org; older
		// versions ignore the proxy and find no network at all.
		if r.Code == 0 {
			assert.Contains(t, r.Out, "hello pypi.org")
		} else {
			assert.Equal(t, 3, r.Code, r.Out)
		}
	})
}

// TestHelperNamespaceBridge is the process inside the namespace: it brings
// up loopback, runs Bridge on SandboxAddr to the proxy's unix socket (or,
// when the socket is "handoff", passes the listener to the test over fd 3),
// and runs the commands the test sends on stdin with SandboxEnv.
func TestHelperNamespaceBridge(t *testing.T) {
	sock := os.Getenv(helperSockEnv)
	if sock == "" {
		t.Skip("helper process for TestRealClientsInAnEmptyNetworkNamespace")
	}
	require.NoError(t, loopbackUp())
	ln, err := net.Listen("tcp", egress.SandboxAddr)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if sock == "handoff" {
		// Hand the listener itself to the server over fd 3: the server's
		// Proxy accepts in this namespace directly, nothing is copied here.
		f, err := ln.(*net.TCPListener).File()
		require.NoError(t, err)
		ctl, err := net.FileConn(os.NewFile(3, "control"))
		require.NoError(t, err)
		_, _, err = ctl.(*net.UnixConn).WriteMsgUnix([]byte{1}, unix.UnixRights(int(f.Fd())), nil)
		require.NoError(t, err)
		f.Close()
		ln.Close()
		ctl.Close()
	} else {
		go func() { _ = egress.Bridge(ctx, ln, egress.UnixDialer(sock)) }()
	}

	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C"}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var c helperCmd
		require.NoError(t, json.Unmarshal(in.Bytes(), &c))
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		cmd := exec.CommandContext(cctx, c.Argv[0], c.Argv[1:]...)
		cmd.Env = append(append(append([]string{}, base...), c.Env...), egress.SandboxEnv(egress.SandboxAddr)...)
		b, err := cmd.CombinedOutput()
		ccancel()
		code := 0
		if err != nil {
			code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			b = append(b, []byte(err.Error())...)
		}
		line, _ := json.Marshal(helperResult{Code: code, Out: strings.ToValidUTF8(string(b), "?")})
		_, _ = os.Stdout.Write(append(line, '\n'))
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// loopbackUp brings up lo in the helper's fresh network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// TestListenerHandOffIntoTheNamespace is the other wiring: the process in
// the namespace opens 127.0.0.1:3128 and passes the listening socket to
// the server (SCM_RIGHTS), whose Proxy then accepts the sandbox's
// connections directly — no bridge, no unix socket path.
func TestListenerHandOffIntoTheNamespace(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	e := pypiEnv(t)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	ours, theirs := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "theirs")
	defer ours.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperNamespaceBridge$")
	cmd.Env = append(os.Environ(), helperSockEnv+"=handoff")
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() != 0 {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot create a network namespace here: %v", err)
	}
	theirs.Close()
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })

	ctl, err := net.FileConn(ours)
	require.NoError(t, err)
	defer ctl.Close()
	_ = ctl.SetReadDeadline(time.Now().Add(20 * time.Second))
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := ctl.(*net.UnixConn).ReadMsgUnix(make([]byte, 1), oob)
	require.NoError(t, err)
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	got, err := unix.ParseUnixRights(&msgs[0])
	require.NoError(t, err)
	require.Len(t, got, 1)
	lf := os.NewFile(uintptr(got[0]), "sandbox-listener")
	ln, err := net.FileListener(lf)
	lf.Close()
	require.NoError(t, err)
	go func() { _ = e.proxy.Serve(context.Background(), ln) }()

	out := bufio.NewScanner(stdout)
	run := func(argv ...string) helperResult {
		b, _ := json.Marshal(helperCmd{Argv: argv})
		_, err := stdin.Write(append(b, '\n'))
		require.NoError(t, err)
		for out.Scan() {
			var r helperResult
			if json.Unmarshal(out.Bytes(), &r) == nil {
				return r
			}
		}
		t.Fatalf("helper ended: %v", out.Err())
		return helperResult{}
	}
	r := run("curl", "-sS", "-k", "--max-time", "10", "https://pypi.org/simple/")
	assert.Equal(t, 0, r.Code, r.Out)
	assert.Equal(t, "hello pypi.org ", r.Out)
	r = run("curl", "-sS", "-k", "--max-time", "10", "https://example.org/")
	assert.Contains(t, r.Out, "403")
	ds := e.Decisions()
	require.Len(t, ds, 2)
	assert.True(t, ds[0].Allow)
	assert.False(t, ds[1].Allow)
	assert.Contains(t, ds[0].Client, "127.0.0.1:", "the client is on the sandbox's own loopback")
}
