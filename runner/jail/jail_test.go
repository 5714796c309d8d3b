//go:build linux

package jail

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newSandbox creates a sandbox in a test directory and closes it at the end.
func newSandbox(t *testing.T, cfg Config) *Sandbox {
	t.Helper()
	if err := Check(); err != nil {
		t.Skipf("isolation unavailable here: %v", err)
	}
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(t.TempDir(), "sandbox")
	}
	s, err := New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

type result struct {
	stdout, stderr string
	status         ExitStatus
}

// collect reads a started process's output to the end and waits for it.
func collect(t *testing.T, p *Process) result {
	t.Helper()
	var stderr []byte
	errDone := make(chan struct{})
	go func() { stderr, _ = io.ReadAll(p.Stderr()); close(errDone) }()
	stdout, err := io.ReadAll(p.Stdout())
	require.NoError(t, err)
	<-errDone
	st, err := p.Wait()
	require.NoError(t, err)
	return result{string(stdout), string(stderr), st}
}

// run runs bash -c script in s and collects its output.
func run(t *testing.T, s *Sandbox, script string) result {
	t.Helper()
	p, err := s.Start(context.Background(), Cmd{Path: "/bin/bash", Args: []string{"-c", script}})
	require.NoError(t, err)
	return collect(t, p)
}

func randomName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func TestCheckPassesHere(t *testing.T) {
	require.NoError(t, Check(), "this machine supports unprivileged user namespaces")
}

func TestLoginShellRunsAsUnprivilegedUser(t *testing.T) {
	s := newSandbox(t, Config{})
	p, err := s.Start(context.Background(), Cmd{Path: "/bin/bash", Args: []string{"-l", "-c", "echo hi; id -u; id -un; id -G; echo $HOME; pwd"}})
	require.NoError(t, err)
	r := collect(t, p)
	assert.Equal(t, "hi\n1000\nuser\n1000\n/home/user\n/home/user\n", r.stdout)
	assert.Equal(t, ExitStatus{Code: 0, Status: "exit status 0"}, r.status)
}

func TestCommandHasNoPrivileges(t *testing.T) {
	s := newSandbox(t, Config{})
	r := run(t, s, `grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status`)
	assert.Equal(t, "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"+
		"CapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n", r.stdout)

	t.Run("no-nested-user-namespaces", func(t *testing.T) {
		if _, err := os.Stat("/usr/bin/unshare"); err != nil {
			t.Skip("no unshare(1) on this host")
		}
		r := run(t, s, "unshare -Ur id -u; echo rc=$?; unshare --help >/dev/null && echo tool-runs")
		assert.NotContains(t, r.stdout, "\n0\n")
		assert.Contains(t, r.stdout, "rc=1")
		assert.Contains(t, r.stdout, "tool-runs")
	})
	t.Run("only-stdio-descriptors-are-inherited", func(t *testing.T) {
		p, err := s.Start(context.Background(), Cmd{Path: "/bin/ls", Args: []string{"-l", "/proc/self/fd/"}})
		require.NoError(t, err)
		r := collect(t, p)
		var fds []string
		for _, l := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(l); len(f) > 8 {
				fds = append(fds, f[8])
			}
		}
		assert.Equal(t, []string{"0", "1", "2", "3"}, fds, "stdio and ls's own directory:\n%s", r.stdout)
	})
	t.Run("landlock-blocks-what-the-mounts-allow", func(t *testing.T) {
		if landlockNote() == "unavailable (mount namespace only)" {
			t.Skip("no Landlock on this kernel")
		}
		// /proc is mounted read-write and DAC lets a process rename
		// itself; Landlock keeps /proc read-only.
		r := run(t, s, "echo renamed > /proc/self/comm; echo rc=$?; head -c 4 /proc/self/comm; echo")
		assert.NotContains(t, r.stdout, "rc=0")
		assert.Contains(t, r.stdout, "head")
	})
	t.Run("seccomp-refuses-kernel-attack-surface", func(t *testing.T) {
		if runtime.GOARCH != "amd64" {
			t.Skip("syscall numbers below are amd64's")
		}
		if _, err := os.Stat("/usr/bin/perl"); err != nil {
			t.Skip("needs /usr/bin/perl to make raw system calls")
		}
		// io_uring_setup(1, NULL): EFAULT if allowed, ENOSYS if filtered.
		// keyctl(KEYCTL_GET_KEYRING_ID, @s, 0): EPERM if filtered.
		// getppid: the neighbour, allowed (1: the jail's init).
		r := run(t, s, `perl -e '$! = 0; syscall(425, 1, 0); print 0+$!, "\n"; $! = 0; syscall(250, 0, -3, 0); print 0+$!, "\n"; print syscall(110), "\n"'`)
		assert.Equal(t, fmt.Sprintf("%d\n%d\n1\n", syscall.ENOSYS, syscall.EPERM), r.stdout, r.stderr)
	})
	t.Run("setuid-binaries-give-nothing", func(t *testing.T) {
		su := ""
		for _, p := range []string{"/usr/bin/su", "/bin/su", "/usr/bin/sudo", "/usr/bin/passwd"} {
			if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeSetuid != 0 {
				su = p
				break
			}
		}
		if su == "" {
			t.Skip("no setuid binary on this host to try")
		}
		r := run(t, s, su+" -c 'id -u' root </dev/null; echo rc=$?; id -u")
		assert.NotContains(t, r.stdout, "\n0\n")
		assert.True(t, strings.HasSuffix(r.stdout, "1000\n"), "the neighbour id -u still works: %q", r.stdout)
	})
}

func TestHostFilesAreNotVisible(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil || home == "" || home == "/" {
		home = "/root"
	}
	wd, err := os.Getwd()
	require.NoError(t, err)
	secret := randomName("canary-")
	var canaries []string
	for _, dir := range []string{home, wd} {
		p := filepath.Join(dir, randomName(".jail-canary-"))
		if err := os.WriteFile(p, []byte(secret), 0o644); err != nil {
			t.Logf("cannot place a canary in %s: %v", dir, err)
			continue
		}
		t.Cleanup(func() { os.Remove(p) })
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Equal(t, secret, string(b), "the canary is readable on the host")
		canaries = append(canaries, p)
	}
	require.NotEmpty(t, canaries)

	s := newSandbox(t, Config{})
	require.NoError(t, os.WriteFile(filepath.Join(s.home, "mine.txt"), []byte("neighbour\n"), 0o644))
	require.NoError(t, s.Chown(filepath.Join(s.home, "mine.txt")))
	for _, c := range canaries {
		t.Run("canary-"+filepath.Base(filepath.Dir(c))+"-is-unreadable", func(t *testing.T) {
			// Direct, and through the /proc and /dev/fd aliases of roots and
			// working directories.
			r := run(t, s, fmt.Sprintf("cat %[1]q /proc/self/root%[1]s /proc/1/root%[1]s /proc/1/cwd/%[3]s; ls %[2]q; exec 9</; cat /dev/fd/9/../..%[1]s; grep -rl %[4]q /etc /home /tmp /var 2>/dev/null | head -3",
				c, filepath.Dir(c), filepath.Base(c), secret))
			assert.NotContains(t, r.stdout, secret)
			assert.NotEqual(t, 0, len(r.stderr), "cat reports the file missing")
		})
	}
	t.Run("own-home-file-is-readable", func(t *testing.T) {
		r := run(t, s, "cat /home/user/mine.txt")
		assert.Equal(t, "neighbour\n", r.stdout)
	})
	t.Run("shadow-and-host-identity-are-absent", func(t *testing.T) {
		r := run(t, s, "cat /etc/shadow /etc/machine-id /root/.bash_history 2>&1; ls /root /var/log 2>&1; hostname")
		assert.Contains(t, r.stdout, "/etc/shadow: No such file or directory")
		assert.Contains(t, r.stdout, "/etc/machine-id: No such file or directory")
		assert.True(t, strings.HasSuffix(r.stdout, "sandbox\n"), r.stdout)
	})
	t.Run("init-root-and-environ-are-closed", func(t *testing.T) {
		r := run(t, s, "ls /proc/1/root/ 2>&1; cat /proc/1/environ 2>&1; readlink /proc/1/exe 2>&1; cat /proc/self/environ | tr '\\0' '\\n' | grep ^HOME=")
		assert.Contains(t, r.stdout, "Permission denied")
		assert.NotContains(t, r.stdout, stageEnv)
		assert.True(t, strings.HasSuffix(r.stdout, "HOME=/home/user\n"), "own environ is readable: %q", r.stdout)
	})
}

func TestNetwork(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hello from the host\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	dial := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && cat <&3", port)

	t.Run("none-cannot-reach-a-host-listener", func(t *testing.T) {
		s := newSandbox(t, Config{Network: NetworkNone})
		r := run(t, s, dial)
		assert.NotContains(t, r.stdout, "hello from the host")
		assert.NotEqual(t, 0, r.status.Code)
	})
	t.Run("none-has-a-working-loopback-of-its-own", func(t *testing.T) {
		s := newSandbox(t, Config{Network: NetworkNone})
		r := run(t, s, `ip -o link 2>/dev/null | awk '{print $2}' | tr -d ':\n'; echo; cat /proc/net/dev | tail -n +3 | awk -F: '{print $1}' | tr -d ' ' | sort | tr '\n' ' '`)
		assert.Equal(t, "lo ", strings.Split(r.stdout, "\n")[1], "only a loopback interface")
	})
	t.Run("none-commands-share-the-sandbox-loopback", func(t *testing.T) {
		if _, err := os.Stat("/usr/bin/perl"); err != nil {
			t.Skip("needs /usr/bin/perl for a tiny TCP server")
		}
		s := newSandbox(t, Config{Network: NetworkNone})
		srv, err := s.Start(context.Background(), Cmd{Path: "/usr/bin/perl", Args: []string{"-MIO::Socket::INET", "-e",
			`$|=1; my $l = IO::Socket::INET->new(LocalAddr => "127.0.0.1:8765", Listen => 5, ReuseAddr => 1) or die $!; print "listening\n"; while (my $c = $l->accept) { print $c "hello from the sandbox\n"; close $c }`}})
		require.NoError(t, err)
		line := make([]byte, 10)
		_, err = io.ReadFull(srv.Stdout(), line)
		require.NoError(t, err)
		r := run(t, s, "exec 3<>/dev/tcp/127.0.0.1/8765 && cat <&3")
		assert.Equal(t, "hello from the sandbox\n", r.stdout, r.stderr)
		require.NoError(t, srv.Signal(syscall.SIGKILL))
		_, err = srv.Wait()
		require.NoError(t, err)
	})
	t.Run("host-keeps-host-abstract-sockets-out-of-reach", func(t *testing.T) {
		if _, err := os.Stat("/usr/bin/perl"); err != nil {
			t.Skip("needs /usr/bin/perl for a unix socket client")
		}
		if v, _ := llsysABI(); v < 6 {
			t.Skip("Landlock ABI 6 (scoped abstract unix sockets) is not available on this kernel")
		}
		name := randomName("jail-test-")
		l, err := net.Listen("unix", "@"+name)
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte("host secret\n"))
				c.Close()
			}
		}()
		s := newSandbox(t, Config{Network: NetworkHost})
		client := `use IO::Socket::UNIX; my $c = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Peer => "\0" . $ARGV[0]) or die "connect: $!\n"; print <$c>;`
		p, err := s.Start(context.Background(), Cmd{Path: "/usr/bin/perl", Args: []string{"-e", client, name}})
		require.NoError(t, err)
		r := collect(t, p)
		assert.NotContains(t, r.stdout, "host secret")
		assert.Contains(t, r.stderr, "connect:")
		// The neighbour: a server and client inside the same command work.
		both := `use IO::Socket::UNIX; my $n = "\0" . $ARGV[0] . "-in"; my $l = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Local => $n, Listen => 1) or die "listen: $!"; if (!fork) { my $c = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Peer => $n) or die "connect: $!"; print $c "inside\n"; exit 0 } my $a = $l->accept; print <$a>;`
		p, err = s.Start(context.Background(), Cmd{Path: "/usr/bin/perl", Args: []string{"-e", both, name}})
		require.NoError(t, err)
		r = collect(t, p)
		assert.Equal(t, "inside\n", r.stdout, r.stderr)
	})
	t.Run("host-reaches-the-allowed-neighbour", func(t *testing.T) {
		s := newSandbox(t, Config{Network: NetworkHost})
		r := run(t, s, dial)
		assert.Equal(t, "hello from the host\n", r.stdout)
	})
}

func TestHostProcessesAreInvisible(t *testing.T) {
	s := newSandbox(t, Config{})
	host := os.Getpid()
	r := run(t, s, fmt.Sprintf("kill -0 %d 2>&1 && echo SIGNALLED; ls /proc | grep -c '^[0-9]'; kill -0 $$ && echo self-ok", host))
	assert.NotContains(t, r.stdout, "SIGNALLED")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.GreaterOrEqual(t, len(lines), 2)
	n, err := strconv.Atoi(lines[len(lines)-2])
	require.NoError(t, err, r.stdout)
	assert.LessOrEqual(t, n, 5, "only the jail's own few processes are in /proc")
	assert.Equal(t, "self-ok", lines[len(lines)-1])
}

func TestWritesStayInTheWritableAreas(t *testing.T) {
	s := newSandbox(t, Config{})
	for _, p := range []string{"/usr/x", "/etc/x", "/x", "/bin/x", "/dev/x", "/proc/x", "/etc/passwd"} {
		t.Run("writing-"+strings.ReplaceAll(strings.Trim(p, "/"), "/", "-")+"-fails", func(t *testing.T) {
			r := run(t, s, fmt.Sprintf("echo owned >> %s", p))
			assert.NotEqual(t, 0, r.status.Code, "write to %s must fail", p)
		})
	}
	r := run(t, s, "cat /etc/passwd | grep -c owned")
	assert.Equal(t, "0\n", r.stdout)

	t.Run("home-and-tmp-are-writable-and-land-in-dir", func(t *testing.T) {
		r := run(t, s, "echo h > /home/user/x && mkdir -p /home/user/a/b && echo t > /tmp/y && echo ok")
		require.Equal(t, "ok\n", r.stdout, r.stderr)
		b, err := os.ReadFile(filepath.Join(s.dir, "home", "x"))
		require.NoError(t, err)
		assert.Equal(t, "h\n", string(b))
		b, err = os.ReadFile(filepath.Join(s.dir, "tmp", "y"))
		require.NoError(t, err)
		assert.Equal(t, "t\n", string(b))
	})
	t.Run("file-size-limit-stops-a-huge-file", func(t *testing.T) {
		s := newSandbox(t, Config{Limits: Limits{FileBytes: 1 << 20}})
		r := run(t, s, "head -c 2M /dev/zero > /home/user/big; echo rc=$?; stat -c %s /home/user/big; head -c 512K /dev/zero > /home/user/small && echo small-ok")
		assert.NotContains(t, r.stdout, "rc=0")
		assert.Contains(t, r.stdout, "1048576\n")
		assert.Contains(t, r.stdout, "small-ok")
	})
}

func TestFileAccessDoesNotFollowSymlinksOut(t *testing.T) {
	s := newSandbox(t, Config{})
	r := run(t, s, "ln -s / /home/user/esc && ln -s /etc/passwd /home/user/pw && mkdir /home/user/d && echo fine > /home/user/d/f && echo ok")
	require.Equal(t, "ok\n", r.stdout, r.stderr)

	for _, p := range []string{"/home/user/esc/etc/hostname", "/home/user/esc/root", "/home/user/pw"} {
		t.Run("root-refuses-"+filepath.Base(p), func(t *testing.T) {
			root, rel, err := s.Root(p)
			require.NoError(t, err)
			defer root.Close()
			_, err = root.ReadFile(rel)
			assert.Error(t, err)
			_, err = root.Stat(rel)
			assert.Error(t, err)
		})
		t.Run("host-path-refuses-"+filepath.Base(p), func(t *testing.T) {
			_, _, err := s.HostPath(p)
			assert.ErrorContains(t, err, "symlink")
		})
	}
	t.Run("root-writes-through-a-symlink-fail", func(t *testing.T) {
		root, rel, err := s.Root("/home/user/esc/tmp/planted")
		require.NoError(t, err)
		defer root.Close()
		assert.Error(t, root.WriteFile(rel, []byte("x"), 0o644))
		_, err = os.Stat("/tmp/planted")
		assert.ErrorIs(t, err, os.ErrNotExist)
	})
	t.Run("neighbour-regular-file-is-served", func(t *testing.T) {
		root, rel, err := s.Root("/home/user/d/../d/f")
		require.NoError(t, err)
		defer root.Close()
		b, err := root.ReadFile(rel)
		require.NoError(t, err)
		assert.Equal(t, "fine\n", string(b))
		hp, writable, err := s.HostPath("/home/user/d/f")
		require.NoError(t, err)
		assert.True(t, writable)
		assert.Equal(t, filepath.Join(s.dir, "home", "d", "f"), hp)
	})
	t.Run("chown-does-not-follow-a-planted-link", func(t *testing.T) {
		if _, _, ok := s.Owner(); !ok {
			t.Skip("Chown is a no-op when the server is not root")
		}
		victim := filepath.Join(t.TempDir(), "victim")
		require.NoError(t, os.WriteFile(victim, nil, 0o600))
		r := run(t, s, fmt.Sprintf("ln -s %s /home/user/dirlink && echo ok", filepath.Dir(victim)))
		require.Equal(t, "ok\n", r.stdout, r.stderr)
		assert.Error(t, s.Chown(filepath.Join(s.dir, "home", "dirlink", "victim")))
		fi, err := os.Stat(victim)
		require.NoError(t, err)
		assert.Equal(t, uint32(os.Geteuid()), fi.Sys().(*syscall.Stat_t).Uid, "the host file keeps its owner")
		// The neighbour: a file the server wrote in the area is handed over.
		own := filepath.Join(s.dir, "home", "d", "server-wrote")
		require.NoError(t, os.WriteFile(own, nil, 0o644))
		require.NoError(t, s.Chown(own))
		uid, _, _ := s.Owner()
		fi, err = os.Lstat(own)
		require.NoError(t, err)
		assert.Equal(t, uint32(uid), fi.Sys().(*syscall.Stat_t).Uid)
		assert.Error(t, s.Chown("/etc/passwd"))
	})
	t.Run("paths-outside-the-areas-are-refused", func(t *testing.T) {
		for _, p := range []string{"/etc/passwd", "/home/user2/x", "/home/user/../../etc/passwd", "relative", "/tmpx"} {
			_, _, err := s.HostPath(p)
			assert.Error(t, err, p)
			_, _, err = s.Root(p)
			assert.Error(t, err, p)
		}
	})
}

// jailPids lists host pids whose pid namespace is the one of the jail's init
// with host pid initPid, identified by nsID.
func jailPids(t *testing.T, nsID string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err == nil && l == nsID {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				continue // gone meanwhile
			}
			// A zombie waiting for its parent to reap it runs nothing.
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				continue
			}
			out = append(out, pid)
		}
	}
	return out
}

// waitFor polls cond for up to 10s; the checks around it are not timing
// assertions, only a bound on how long a broken jail can hang the test.
func waitFor(cond func() bool) bool {
	for i := 0; i < 1000; i++ {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func TestProcessTreesDie(t *testing.T) {
	cases := []struct {
		name   string
		script string
		min    int // processes that must be running before the kill
		end    func(*Sandbox, *Process) error
	}{
		{"sleeping-grandchild-dies-on-signal-kill", "sleep 1000 & sleep 1000 & setsid sleep 1000 & echo started; wait", 4,
			func(_ *Sandbox, p *Process) error { return p.Signal(syscall.SIGKILL) }},
		{"sleeping-grandchild-dies-on-close", "(setsid nohup sleep 1000 >/dev/null 2>&1 &) ; sleep 1000 & echo started; wait", 3,
			func(s *Sandbox, _ *Process) error { return s.Close() }},
		{"fork-bomb-dies-on-signal-kill", "echo started; :(){ :|:& };:; sleep 1000", 20,
			func(_ *Sandbox, p *Process) error { return p.Signal(syscall.SIGKILL) }},
		{"fork-bomb-dies-on-close", "echo started; :(){ :|:& };:; sleep 1000", 20,
			func(s *Sandbox, _ *Process) error { return s.Close() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t, Config{Limits: Limits{Processes: 48}})
			p, err := s.Start(context.Background(), Cmd{Path: "/bin/bash", Args: []string{"-c", tc.script}})
			require.NoError(t, err)
			nsID, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p.Pid()))
			require.NoError(t, err)
			line := make([]byte, 8)
			_, err = io.ReadFull(p.Stdout(), line)
			require.NoError(t, err)
			require.Equal(t, "started\n", string(line))
			require.True(t, waitFor(func() bool { return len(jailPids(t, nsID)) >= tc.min }),
				"the attack is running: %d processes", len(jailPids(t, nsID)))

			require.NoError(t, tc.end(s, p))
			done := make(chan struct{})
			go func() { _, _ = io.Copy(io.Discard, p.Stdout()); close(done) }()
			select {
			case <-done: // stdout reached EOF: no survivor holds the pipe
			case <-time.After(20 * time.Second):
				t.Fatal("stdout still open after the kill")
			}
			st, err := p.Wait()
			require.NoError(t, err)
			assert.True(t, st.Signaled)
			assert.Equal(t, "signal: killed", st.Status)
			assert.Empty(t, jailPids(t, nsID), "nothing of the tree survives")
		})
	}
	t.Run("sandbox-outlives-a-fork-bomb-at-its-limit", func(t *testing.T) {
		s := newSandbox(t, Config{Limits: Limits{Processes: 48}})
		bomb, err := s.Start(context.Background(), Cmd{Path: "/bin/bash", Args: []string{"-c", "echo started; :(){ :|:& };:; sleep 1000"}})
		require.NoError(t, err)
		nsID, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", bomb.Pid()))
		require.NoError(t, err)
		line := make([]byte, 8)
		_, err = io.ReadFull(bomb.Stdout(), line)
		require.NoError(t, err)
		require.True(t, waitFor(func() bool { return len(jailPids(t, nsID)) >= 30 }), "the bomb fills the sandbox")
		time.Sleep(500 * time.Millisecond) // let it press against the limit
		_, err = s.Start(context.Background(), Cmd{Path: "/bin/true"})
		t.Logf("a start while the bomb holds every slot: %v", err)
		require.NoError(t, bomb.Signal(syscall.SIGKILL))
		_, err = bomb.Wait()
		require.NoError(t, err)
		assert.Equal(t, "alive\n", run(t, s, "echo alive").stdout, "the sandbox works once the bomb is gone")
	})
	t.Run("neighbour-command-still-runs-after-a-kill", func(t *testing.T) {
		s := newSandbox(t, Config{})
		p, err := s.Start(context.Background(), Cmd{Path: "/bin/sleep", Args: []string{"1000"}})
		require.NoError(t, err)
		require.NoError(t, p.Signal(syscall.SIGKILL))
		_, err = p.Wait()
		require.NoError(t, err)
		assert.Equal(t, "alive\n", run(t, s, "echo alive").stdout)
	})
}

func TestBackgroundProcessesEndWithTheirCommand(t *testing.T) {
	s := newSandbox(t, Config{})
	p, err := s.Start(context.Background(), Cmd{Path: "/bin/bash", Args: []string{"-c", "sleep 1000 & read x; echo done"}, Stdin: true})
	require.NoError(t, err)
	nsID, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p.Pid()))
	require.NoError(t, err)
	require.True(t, waitFor(func() bool { return len(jailPids(t, nsID)) >= 3 }), "init, bash and sleep run")
	require.NoError(t, p.Stdin().Close())
	r := collect(t, p) // returns: the backgrounded sleep does not hold stdout open
	assert.Equal(t, "done\n", r.stdout)
	assert.Equal(t, 0, r.status.Code)
	assert.Empty(t, jailPids(t, nsID))
}

func TestSignalReachesTheWholeTree(t *testing.T) {
	s := newSandbox(t, Config{})
	p, err := s.Start(context.Background(), Cmd{Path: "/bin/bash", Args: []string{"-c",
		"trap 'wait $c; echo parent-got-term; exit 7' TERM; (trap 'echo child-got-term; exit 0' TERM; echo ready; sleep 1000 & wait) & c=$!; wait"}})
	require.NoError(t, err)
	line := make([]byte, 6)
	_, err = io.ReadFull(p.Stdout(), line)
	require.NoError(t, err)
	require.Equal(t, "ready\n", string(line))
	require.NoError(t, p.Signal(syscall.SIGTERM))
	r := collect(t, p)
	assert.Contains(t, r.stdout, "parent-got-term")
	assert.Contains(t, r.stdout, "child-got-term")
	assert.Equal(t, ExitStatus{Code: 7, Status: "exit status 7"}, r.status)
}

func TestExitStatus(t *testing.T) {
	s := newSandbox(t, Config{})
	cases := []struct {
		name   string
		script string
		want   ExitStatus
	}{
		{"zero-exit", "true", ExitStatus{Code: 0, Status: "exit status 0"}},
		{"exit-code-three", "exit 3", ExitStatus{Code: 3, Status: "exit status 3"}},
		{"killed-by-sigterm", "kill -TERM $$", ExitStatus{Code: -1, Signaled: true, Signal: "terminated", Status: "signal: terminated"}},
		{"killed-by-sigkill", "kill -KILL $$", ExitStatus{Code: -1, Signaled: true, Signal: "killed", Status: "signal: killed"}},
		{"command-not-found", "no-such-command-here", ExitStatus{Code: 127, Status: "exit status 127"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, run(t, s, tc.script).status)
		})
	}
	t.Run("oversized-command-is-refused", func(t *testing.T) {
		_, err := s.Start(context.Background(), Cmd{Path: "/bin/echo", Args: []string{strings.Repeat("a", 200<<10)}})
		assert.ErrorContains(t, err, "the most is")
		// Control characters grow sixfold in the encoding.
		_, err = s.Start(context.Background(), Cmd{Path: "/bin/echo", Args: []string{strings.Repeat("\x01", 100<<10)}})
		assert.ErrorContains(t, err, "encode to")
		r := run(t, s, "echo "+strings.Repeat("a", 64<<10)+" | wc -c")
		assert.Equal(t, strconv.Itoa(64<<10+1)+"\n", r.stdout)
	})
	t.Run("missing-program-is-a-start-error", func(t *testing.T) {
		_, err := s.Start(context.Background(), Cmd{Path: "/usr/bin/no-such-program"})
		assert.ErrorContains(t, err, "no-such-program")
		_, err = s.Start(context.Background(), Cmd{Path: "no-such-program"})
		assert.ErrorContains(t, err, "not found in $PATH")
		_, err = s.Start(context.Background(), Cmd{Path: "echo", Dir: "/nope"})
		assert.ErrorContains(t, err, "/nope")
	})
	t.Run("path-lookup-args-env-dir-and-stdin", func(t *testing.T) {
		p, err := s.Start(context.Background(), Cmd{Path: "bash", Args: []string{"-c", `echo "$1 $FOO $(pwd)"; cat`, "argv0", "one"},
			Env: []string{"FOO=bar"}, Dir: "/tmp", Stdin: true})
		require.NoError(t, err)
		_, err = p.Stdin().Write([]byte("from stdin\n"))
		require.NoError(t, err)
		require.NoError(t, p.Stdin().Close())
		assert.Equal(t, "one bar /tmp\nfrom stdin\n", collect(t, p).stdout)
		require.Equal(t, "ok\n", run(t, s, "mkdir -p /home/user/proj && echo ok").stdout)
		p, err = s.Start(context.Background(), Cmd{Path: "pwd", Dir: "proj"})
		require.NoError(t, err)
		assert.Equal(t, "/home/user/proj\n", collect(t, p).stdout, "a relative Dir is taken from /home/user")
		p, err = s.Start(context.Background(), Cmd{Path: "bash", Args: []string{"-c", `echo "$1 $FOO $(pwd)"; cat`, "argv0", "one"},
			Env: []string{"FOO=bar"}, Dir: "/tmp", Stdin: true})
		require.NoError(t, err)
		_, err = p.Stdin().Write([]byte("from stdin\n"))
		require.NoError(t, err)
		require.NoError(t, p.Stdin().Close())
		r := collect(t, p)
		assert.Equal(t, "one bar /tmp\nfrom stdin\n", r.stdout)
	})
}

func TestLargeOutputArrivesWhole(t *testing.T) {
	s := newSandbox(t, Config{})
	const size = 50 << 20
	p, err := s.Start(context.Background(), Cmd{Path: "/usr/bin/head", Args: []string{"-c", strconv.Itoa(size), "/dev/urandom"}})
	require.NoError(t, err)
	n, err := io.Copy(io.Discard, p.Stdout())
	require.NoError(t, err)
	assert.Equal(t, int64(size), n)
	st, err := p.Wait()
	require.NoError(t, err)
	assert.Equal(t, 0, st.Code)
}

func TestMemoryLimit(t *testing.T) {
	s := newSandbox(t, Config{Limits: Limits{MemoryBytes: 64 << 20}})
	t.Run("allocating-past-the-limit-fails", func(t *testing.T) {
		// tail keeps a line without newline whole in memory.
		r := run(t, s, "head -c 512M /dev/zero | tail -n 1 | wc -c")
		assert.NotEqual(t, "536870912\n", r.stdout, "tail must not hold 512 MiB under a 64 MiB limit")
	})
	t.Run("sysv-shared-memory-is-bounded-too", func(t *testing.T) {
		if _, err := os.Stat("/usr/bin/perl"); err != nil {
			t.Skip("needs /usr/bin/perl for shmget")
		}
		// shmget(IPC_PRIVATE, size, 0600): a segment past the limit is
		// refused, a small one is granted.
		r := run(t, s, `perl -e 'for my $sz (128<<20, 1<<20) { my $id = shmget(0, $sz, 0600); print defined($id) ? "ok\n" : "refused\n"; shmctl($id, 0, 0) if defined $id }'`)
		assert.Equal(t, "refused\nok\n", r.stdout, r.stderr)
	})
	t.Run("allocating-under-the-limit-works", func(t *testing.T) {
		r := run(t, s, "head -c 8M /dev/zero | tail -n 1 | wc -c")
		assert.Equal(t, "8388608\n", r.stdout, r.stderr)
	})
}

func TestProcessLimit(t *testing.T) {
	if _, err := os.Stat("/usr/bin/perl"); err != nil {
		t.Skip("needs /usr/bin/perl for a fork loop that reports how far it got")
	}
	s := newSandbox(t, Config{Limits: Limits{Processes: 32}})
	// Fork children that sleep until the limit stops us; print how many.
	r := run(t, s, `perl -e 'my $n = 0; while ($n < 500) { my $p = fork(); last unless defined $p; if ($p == 0) { sleep 30; exit 0 } $n++ } print "$n\n"; kill "KILL", -$$' ; true`)
	n, err := strconv.Atoi(strings.TrimSpace(r.stdout))
	require.NoError(t, err, "stdout %q stderr %q", r.stdout, r.stderr)
	assert.Less(t, n, 32, "the fork loop is stopped at the limit")
	assert.Greater(t, n, 5, "forking under the limit works")
}

func TestPauseAndResume(t *testing.T) {
	s := newSandbox(t, Config{})
	p, err := s.Start(context.Background(), Cmd{Path: "/bin/bash", Args: []string{"-c", "i=0; while read l; do i=$((i+1)); echo $i; done"}, Stdin: true})
	require.NoError(t, err)
	out := make([]byte, 2)
	_, err = p.Stdin().Write([]byte("a\n"))
	require.NoError(t, err)
	_, err = io.ReadFull(p.Stdout(), out)
	require.NoError(t, err)
	assert.Equal(t, "1\n", string(out))

	require.NoError(t, s.Pause())
	_, err = s.Start(context.Background(), Cmd{Path: "/bin/true"})
	assert.ErrorContains(t, err, "paused")
	_, err = p.Stdin().Write([]byte("b\n"))
	require.NoError(t, err)
	got := make(chan string, 1)
	go func() {
		b := make([]byte, 2)
		_, _ = io.ReadFull(p.Stdout(), b)
		got <- string(b)
	}()
	select {
	case g := <-got:
		t.Fatalf("a paused sandbox answered %q", g)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, s.Resume())
	assert.Equal(t, "2\n", <-got, "the resumed sandbox answers")
	require.NoError(t, p.Stdin().Close())
	_, err = p.Wait()
	require.NoError(t, err)
}

// TestCgroupV2 runs a sandbox under a cgroup v2 hierarchy where this host
// has one mounted beside v1 (its controllers may all be on v1: then only
// the freezer and kill parts of v2 are in use, and rlimits stand in).
func TestCgroupV2(t *testing.T) {
	const unified = "/sys/fs/cgroup/unified"
	if _, err := os.Stat(unified + "/cgroup.controllers"); err != nil {
		t.Skip("no cgroup v2 hierarchy at " + unified)
	}
	if os.Geteuid() != 0 {
		t.Skip("cgroup v2 is used only as root")
	}
	old := cgroupRoot
	cgroupRoot = unified
	t.Cleanup(func() { cgroupRoot = old })
	var buf bytes.Buffer
	s := newSandbox(t, Config{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	require.NotNil(t, s.cg)
	require.True(t, s.cg.v2)
	assert.Contains(t, buf.String(), "pause=cgroup v2 freezer")

	p, err := s.Start(context.Background(), Cmd{Path: "/bin/bash", Args: []string{"-c", "while read l; do echo got-$l; done"}, Stdin: true})
	require.NoError(t, err)
	procs, err := os.ReadFile(filepath.Join(s.cg.dirs[0], "cgroup.procs"))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(bytes.Fields(procs)), 3, "holder, init and command are in the sandbox's cgroup")
	require.NoError(t, s.Pause())
	_, err = p.Stdin().Write([]byte("a\n"))
	require.NoError(t, err)
	got := make(chan string, 1)
	go func() { b := make([]byte, 6); _, _ = io.ReadFull(p.Stdout(), b); got <- string(b) }()
	select {
	case g := <-got:
		t.Fatalf("a frozen sandbox answered %q", g)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, s.Resume())
	assert.Equal(t, "got-a\n", <-got)
	dir := s.cg.dirs[0]
	require.NoError(t, s.Close())
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist, "the sandbox's cgroup is removed")
}

// TestCgroupV2DelegatedSubtree checks the non-root v2 path: a cgroup made
// beside the server's own, under its parent. It plays the delegated
// subtree on the unified hierarchy by moving this test process into a leaf.
func TestCgroupV2DelegatedSubtree(t *testing.T) {
	const unified = "/sys/fs/cgroup/unified"
	if _, err := os.Stat(unified + "/cgroup.controllers"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and a cgroup v2 hierarchy at " + unified)
	}
	own, err := ownCgroupV2()
	require.NoError(t, err)
	old := cgroupRoot
	cgroupRoot = unified
	t.Cleanup(func() { cgroupRoot = old })
	deleg := filepath.Join(unified, randomName("jail-test-deleg-"))
	require.NoError(t, os.MkdirAll(filepath.Join(deleg, "server"), 0o755))
	require.NoError(t, writeFile(filepath.Join(deleg, "server"), "cgroup.procs", strconv.Itoa(os.Getpid())))
	t.Cleanup(func() {
		_ = writeFile(filepath.Join(unified, own), "cgroup.procs", strconv.Itoa(os.Getpid()))
		_ = os.Remove(filepath.Join(deleg, "server"))
		_ = os.Remove(deleg)
	})

	cg, note := newCgroupsV2("jail-test-sb", Limits{}.withDefaults(), false)
	require.NotNil(t, cg, note)
	assert.Equal(t, filepath.Join(deleg, "jail-test-sb"), cg.dirs[0], "made beside the server's own cgroup")
	sleeper := exec.Command("/bin/sleep", "1000")
	require.NoError(t, sleeper.Start())
	require.NoError(t, cg.attach(sleeper.Process.Pid))
	assert.Equal(t, []int{sleeper.Process.Pid}, cg.procs())
	require.True(t, cg.freezer)
	require.NoError(t, cg.freeze(true))
	require.NoError(t, cg.freeze(false))
	cg.killAll()
	_ = sleeper.Wait()
	require.NoError(t, cg.remove())
}

func TestCloseIsIdempotentAndRemovesDir(t *testing.T) {
	if err := Check(); err != nil {
		t.Skipf("isolation unavailable here: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "sb")
	s, err := New(context.Background(), Config{Dir: dir})
	require.NoError(t, err)
	r := run(t, s, "mkdir -p /home/user/locked/in && touch /home/user/locked/in/f && chmod 000 /home/user/locked/in /home/user/locked && echo ok")
	require.Equal(t, "ok\n", r.stdout)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = s.Start(context.Background(), Cmd{Path: "/bin/true"})
	assert.ErrorContains(t, err, "closed")
}

func TestNewLogsTheLimitsInForce(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	s := newSandbox(t, Config{Logger: logger, Limits: Limits{Processes: 77, MemoryBytes: 99 << 20}})
	line := buf.String()
	assert.Contains(t, line, "jail: sandbox ready")
	assert.Contains(t, line, "processes=77")
	assert.Contains(t, line, "memory=103809024")
	assert.Contains(t, line, "file_bytes=1073741824 (RLIMIT_FSIZE)")
	if s.cg != nil && s.cg.pids {
		assert.Contains(t, line, s.cg.kind+" pids")
	} else {
		assert.Contains(t, line, "RLIMIT_NPROC")
	}
	assert.Contains(t, line, "landlock=")
}

func TestCanceledStartLeavesTheSandboxWorking(t *testing.T) {
	s := newSandbox(t, Config{})
	long, err := s.Start(context.Background(), Cmd{Path: "/bin/sleep", Args: []string{"1000"}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Start(ctx, Cmd{Path: "/bin/true"})
	assert.ErrorIs(t, err, context.Canceled)
	ctx, cancel = context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	_, err = s.Start(ctx, Cmd{Path: "/bin/true"})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, "still here\n", run(t, s, "echo still here").stdout)
	require.NoError(t, long.Signal(syscall.SIGKILL))
	st, err := long.Wait()
	require.NoError(t, err)
	assert.Equal(t, "signal: killed", st.Status, "the running command lived until killed")
}

func TestStartFailsClearlyWhenTheNamespaceHolderIsGone(t *testing.T) {
	s := newSandbox(t, Config{})
	assert.Equal(t, "ok\n", run(t, s, "echo ok").stdout)
	running, err := s.Start(context.Background(), Cmd{Path: "/bin/sleep", Args: []string{"1000"}})
	require.NoError(t, err)
	require.NoError(t, s.zygote.cmd.Process.Kill())
	<-s.zygote.done
	st, err := running.Wait()
	assert.ErrorContains(t, err, "killed from outside", "a command that dies with its holder says so")
	assert.Equal(t, "signal: killed", st.Status)
	_, err = s.Start(context.Background(), Cmd{Path: "/bin/true"})
	assert.ErrorContains(t, err, "namespace holder has ended")
}

func TestNewRefusesASymlinkedArea(t *testing.T) {
	if err := Check(); err != nil {
		t.Skipf("isolation unavailable here: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "sb")
	require.NoError(t, os.Mkdir(dir, 0o700))
	target := t.TempDir()
	require.NoError(t, os.Chmod(target, 0o750))
	require.NoError(t, os.Symlink(target, filepath.Join(dir, "home")))
	_, err := New(context.Background(), Config{Dir: dir})
	assert.ErrorContains(t, err, "not a symlink")
	fi, err := os.Stat(target)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o750), fi.Mode().Perm(), "the symlink's target was not chmod-ed")
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := New(context.Background(), Config{})
	assert.ErrorContains(t, err, "Dir is required")
	_, err = New(context.Background(), Config{Dir: t.TempDir(), Network: Network(7)})
	assert.ErrorContains(t, err, "unknown network")
	f := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(f, nil, 0o600))
	_, err = New(context.Background(), Config{Dir: f})
	assert.Error(t, err)
}

// TestUnprivilegedServer re-runs this test binary as an ordinary user
// (uid 65534) when the tests run as root, so the jail is proven on the
// unprivileged path too (nested user namespaces, rlimits instead of cgroups).
func TestUnprivilegedServer(t *testing.T) {
	if os.Getenv("JAIL_TEST_UNPRIVILEGED") != "" {
		t.Skip("already the unprivileged run")
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: this run is the unprivileged one")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	const uid = 65534
	base, err := os.MkdirTemp("", "jail-unpriv-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o755))
	exe, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(base, "jail.test")
	data, err := os.ReadFile(exe)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	for _, d := range []string{"home", "work", "tmp"} {
		require.NoError(t, os.Mkdir(filepath.Join(base, d), 0o700))
		require.NoError(t, os.Chown(filepath.Join(base, d), uid, uid))
	}
	run := os.Getenv("JAIL_TEST_RUN")
	if run == "" {
		run = "."
	}
	cmd := exec.Command(bin, "-test.run", run, "-test.skip", "TestUnprivilegedServer|Benchmark", "-test.count=1", "-test.v")
	cmd.Dir = filepath.Join(base, "work")
	cmd.Env = []string{"JAIL_TEST_UNPRIVILEGED=1", "HOME=" + filepath.Join(base, "home"), "TMPDIR=" + filepath.Join(base, "tmp"), "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if strings.Contains(out.String(), "isolation unavailable here") && !strings.Contains(out.String(), "--- FAIL") {
		t.Skipf("unprivileged user namespaces are not available to uid %d: %s", uid, out.String())
	}
	require.NoError(t, err, "unprivileged run:\n%s", out.String())
	t.Logf("unprivileged run as uid %d passed:\n%s", uid, out.String())
}

func TestEgressListener(t *testing.T) {
	// dial3128 connects to the egress address from inside, sends a line and
	// prints what comes back.
	const dial3128 = "exec 3<>/dev/tcp/127.0.0.1/3128 || exit 7; echo ping-from-inside >&3; cat <&3"

	t.Run("a-command-reaches-the-host-side-listener", func(t *testing.T) {
		s := newSandbox(t, Config{Network: NetworkNone, Egress: true})
		ln := s.EgressListener()
		require.NotNil(t, ln)
		assert.Equal(t, EgressAddr, ln.Addr().String())
		got := make(chan string, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				got <- "accept: " + err.Error()
				return
			}
			defer c.Close()
			line := make([]byte, len("ping-from-inside\n"))
			_, err = io.ReadFull(c, line)
			if err != nil {
				got <- "read: " + err.Error()
				return
			}
			_, _ = c.Write([]byte("pong-from-the-host\n"))
			got <- string(line)
		}()
		r := run(t, s, dial3128)
		assert.Equal(t, "pong-from-the-host\n", r.stdout, r.stderr)
		assert.Equal(t, "ping-from-inside\n", <-got)
		// A second command reaches it too: the listener is the sandbox's.
		go func() {
			c, err := ln.Accept()
			if err == nil {
				_, _ = c.Write([]byte("again\n"))
				c.Close()
			}
		}()
		r = run(t, s, "exec 3<>/dev/tcp/127.0.0.1/3128 && cat <&3")
		assert.Equal(t, "again\n", r.stdout, r.stderr)
	})
	t.Run("a-command-cannot-take-over-the-egress-port", func(t *testing.T) {
		if _, err := os.Stat("/usr/bin/perl"); err != nil {
			t.Skip("needs /usr/bin/perl to bind a port")
		}
		s := newSandbox(t, Config{Network: NetworkNone, Egress: true})
		p, err := s.Start(context.Background(), Cmd{Path: "/usr/bin/perl", Args: []string{"-MIO::Socket::INET", "-MSocket", "-e",
			`IO::Socket::INET->new(LocalAddr => "127.0.0.1:3128", Listen => 5, ReuseAddr => 1, ReusePort => 1) or die "bind: $!\n"; print "bound\n"`}})
		require.NoError(t, err)
		r := collect(t, p)
		assert.NotContains(t, r.stdout, "bound")
		assert.Contains(t, r.stderr, "bind:")
		// The neighbour: another port binds fine.
		p, err = s.Start(context.Background(), Cmd{Path: "/usr/bin/perl", Args: []string{"-MIO::Socket::INET", "-e",
			`IO::Socket::INET->new(LocalAddr => "127.0.0.1:3129", Listen => 5) or die "bind: $!\n"; print "bound\n"`}})
		require.NoError(t, err)
		r = collect(t, p)
		assert.Equal(t, "bound\n", r.stdout, r.stderr)
	})
	t.Run("without-egress-nothing-listens-on-3128", func(t *testing.T) {
		s := newSandbox(t, Config{Network: NetworkNone})
		assert.Nil(t, s.EgressListener())
		r := run(t, s, dial3128)
		assert.Equal(t, 7, r.status.Code, r.stderr)
		assert.Contains(t, r.stderr, "Connection refused")
	})
	t.Run("close-closes-the-listener", func(t *testing.T) {
		if err := Check(); err != nil {
			t.Skipf("isolation unavailable here: %v", err)
		}
		s, err := New(context.Background(), Config{Dir: filepath.Join(t.TempDir(), "sandbox"), Egress: true})
		require.NoError(t, err)
		ln := s.EgressListener()
		accepted := make(chan error, 1)
		go func() {
			_, err := ln.Accept()
			accepted <- err
		}()
		require.NoError(t, s.Close())
		assert.ErrorIs(t, <-accepted, net.ErrClosed)
	})
	t.Run("egress-with-the-host-network-is-refused", func(t *testing.T) {
		if err := Check(); err != nil {
			t.Skipf("isolation unavailable here: %v", err)
		}
		_, err := New(context.Background(), Config{Dir: filepath.Join(t.TempDir(), "sandbox"), Network: NetworkHost, Egress: true})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "Egress needs NetworkNone")
	})
}

// TestSignalThatEndsTheCommandIsAnswered: a forwarded signal that ends the
// command (and with it the jail's init) is still acknowledged; Signal must
// not report "no answer" because the command died of it first.
func TestSignalThatEndsTheCommandIsAnswered(t *testing.T) {
	s := newSandbox(t, Config{})
	for i := range 40 {
		p, err := s.Start(context.Background(), Cmd{Path: "/bin/sleep", Args: []string{"1000"}})
		require.NoError(t, err)
		require.NoError(t, p.Signal(syscall.SIGTERM), "attempt %d", i)
		st, err := p.Wait()
		require.NoError(t, err)
		assert.Equal(t, "terminated", st.Signal)
	}
}
