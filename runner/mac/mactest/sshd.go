// Package mactest starts a real OpenSSH server on loopback that stands in
// for a Mac runner in tests, and a TCP proxy that can cut its connections.
// It is test support only: it runs /usr/sbin/sshd as root with a throwaway
// user, its own host key and an authorized_keys file in a temporary
// directory. It must never touch the machine's own sshd configuration or
// keys.
package mactest

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// User is the throwaway account steps run as.
const User = "smcp-runner"

// SSHD is a running sshd.
type SSHD struct {
	Addr      string     // 127.0.0.1:port
	User      string     // the account to log in as
	Home      string     // its home directory
	HostKey   string     // the host key's SHA256 fingerprint
	Signer    ssh.Signer // a client key sshd accepts
	KeyPEM    []byte     // the same key, as an OpenSSH private key file
	KeyFile   string     // KeyPEM written to a 0600 file
	Dir       string
	stderr    *lockedBuffer
	cmd       *exec.Cmd
	probePort string
}

// Target is user@addr, as a contract's mac.runner.ssh.
func (s *SSHD) Target() string { return s.User + "@" + s.Addr }

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var userOnce sync.Mutex

// ensureUser creates the throwaway account if it is missing and unlocks it
// for key logins (a useradd'd account has a locked '!' password, which
// sshd treats as locked).
func ensureUser(t testing.TB) string {
	userOnce.Lock()
	defer userOnce.Unlock()
	if _, err := user.Lookup(User); err != nil {
		out, err := exec.Command("useradd", "-m", "-s", "/bin/sh", User).CombinedOutput()
		if err != nil && !strings.Contains(string(out), "already exists") {
			t.Fatalf("useradd %s: %v: %s", User, err, out)
		}
	}
	if out, err := exec.Command("usermod", "-p", "*", User).CombinedOutput(); err != nil {
		t.Fatalf("usermod %s: %v: %s", User, err, out)
	}
	u, err := user.Lookup(User)
	if err != nil {
		t.Fatalf("lookup %s: %v", User, err)
	}
	return u.HomeDir
}

// Options change the stand-in Mac.
type Options struct {
	// Hide lists programs the runner user's sessions must not find on
	// PATH, to look like macOS: "sha256sum" (macOS has shasum), "setsid"
	// (macOS has none).
	Hide []string
}

// Start starts sshd on a free loopback port and stops it when the test
// ends. It skips the test when not root or when sshd is not installed.
func Start(t testing.TB) *SSHD { return StartWith(t, Options{}) }

// StartWith is Start with options.
func StartWith(t testing.TB, o Options) *SSHD {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mactest: starting sshd with a throwaway user needs root; run the tests as root (CI does)")
	}
	sshd := "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil {
		t.Skip("mactest: /usr/sbin/sshd is not installed (apt-get install openssh-server)")
	}
	home := ensureUser(t)
	// sshd reads authorized_keys as the user: the directory must be
	// traversable, so not t.TempDir (0700).
	dir, err := os.MkdirTemp("", "smcp-sshd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	must(t, os.MkdirAll("/run/sshd", 0o755))

	hostKey := filepath.Join(dir, "host_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "smcp-test-host", "-f", hostKey).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pub, err := os.ReadFile(hostKey + ".pub")
	must(t, err)
	hk, _, _, _, err := ssh.ParseAuthorizedKey(pub)
	must(t, err)

	_, priv, err := ed25519.GenerateKey(rand.Reader)
	must(t, err)
	signer, err := ssh.NewSignerFromKey(priv)
	must(t, err)
	block, err := ssh.MarshalPrivateKey(priv, "smcp-test-client")
	must(t, err)
	keyPEM := pem.EncodeToMemory(block)
	keyFile := filepath.Join(dir, "client_key")
	must(t, os.WriteFile(keyFile, keyPEM, 0o600))
	authKeys := filepath.Join(dir, "authorized_keys")
	must(t, os.WriteFile(authKeys, ssh.MarshalAuthorizedKey(signer.PublicKey()), 0o644))

	setEnv := ""
	if len(o.Hide) > 0 {
		setEnv = "SetEnv PATH=" + macLikePath(t, dir, o.Hide) + "\n"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(dir, "sshd_config")
	must(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`ListenAddress %s
HostKey %s
PidFile %s
AuthorizedKeysFile %s
AllowUsers %s
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin no
X11Forwarding no
AllowTcpForwarding no
PrintMotd no
LogLevel VERBOSE
MaxStartups 100
MaxSessions 100
%s`, addr, hostKey, filepath.Join(dir, "sshd.pid"), authKeys, User, setEnv)), 0o644))

	s := &SSHD{Addr: addr, User: User, Home: home, HostKey: ssh.FingerprintSHA256(hk), Signer: signer,
		KeyPEM: keyPEM, KeyFile: keyFile, Dir: dir, stderr: &lockedBuffer{}}
	s.cmd = exec.Command(sshd, "-D", "-e", "-f", cfg)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Skipf("mactest: cannot start sshd: %v", err)
	}
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_, s.probePort, _ = net.SplitHostPort(c.LocalAddr().String())
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd did not listen on %s: %s", addr, s.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// Log returns what sshd has logged.
func (s *SSHD) Log() string { return s.stderr.String() }

// Connections counts the TCP connections sshd logged since Start, not
// counting Start's own readiness probe.
func (s *SSHD) Connections() int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(s.Log()))
	for sc.Scan() {
		l := sc.Text()
		if strings.Contains(l, "Connection from ") && !strings.Contains(l, " port "+s.probePort+" on ") {
			n++
		}
	}
	return n
}

// macLikePath makes a directory of symlinks to every program in /usr/bin
// and /bin except the hidden ones, and returns it as the only PATH entry.
func macLikePath(t testing.TB, dir string, hide []string) string {
	bin := filepath.Join(dir, "bin")
	must(t, os.Mkdir(bin, 0o755))
	hidden := map[string]bool{}
	for _, h := range hide {
		hidden[h] = true
	}
	for _, src := range []string{"/usr/bin", "/bin"} {
		entries, err := os.ReadDir(src)
		must(t, err)
		for _, e := range entries {
			if hidden[e.Name()] {
				continue
			}
			if _, err := os.Lstat(filepath.Join(bin, e.Name())); err == nil {
				continue
			}
			must(t, os.Symlink(filepath.Join(src, e.Name()), filepath.Join(bin, e.Name())))
		}
	}
	return bin
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Proxy forwards loopback TCP connections to a target and can cut every
// open one, as a network failure would.
type Proxy struct {
	Addr   string
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	target string
}

// NewProxy listens on a free loopback port and forwards to target until
// the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	p := &Proxy{Addr: ln.Addr().String(), ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.Cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	return p
}

// Close stops accepting connections and cuts the open ones: the Mac is
// unreachable from then on.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut()
}

// Cut closes every connection open through the proxy and returns how many
// client connections it cut.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	n := len(p.conns) / 2
	p.conns = nil
	return n
}
