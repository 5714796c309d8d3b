package sdktest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2blocal"
)

// installHint is how node_modules gets here (what .ci/run runs).
const installHint = "npm ci --prefix runner/e2blocal/sdktest"

// fakeAPIKey is obviously not a real E2B key.
const fakeAPIKey = "e2b_sdktest_0000000000000000000000000000"

// TestOfficialJSSDK runs the official E2B JS SDK's suite (sdk.test.mjs)
// against an in-process e2blocal on a loopback TCP port.
func TestOfficialJSSDK(t *testing.T) {
	ci := os.Getenv("CI") == "true"
	missing := func(format string, args ...any) {
		t.Helper()
		if ci {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed: the official E2B JS SDK suite needs Node 20+")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "e2b", "package.json")); err != nil {
		missing("the E2B JS SDK is not installed (node_modules/e2b missing): run `%s` from the repository root", installHint)
	}

	srv, err := e2blocal.New(e2blocal.Options{Dir: t.TempDir(), APIKey: fakeAPIKey})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serving e2blocal: %v", err)
		}
		if err := srv.Close(ctx); err != nil {
			t.Errorf("closing e2blocal: %v", err)
		}
	})
	base := "http://" + ln.Addr().String()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "sdk.test.mjs")
	cmd.Env = append(os.Environ(),
		"E2B_API_URL="+base,
		"E2B_SANDBOX_URL="+base,
		"E2B_API_KEY="+fakeAPIKey,
		"E2B_DEBUG=false",
		"NO_COLOR=1",
	)
	cmd.WaitDelay = 10 * time.Second
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var wg sync.WaitGroup
	for _, r := range []io.Reader{stdout, stderr} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				t.Log(sc.Text())
			}
		}()
	}
	wg.Wait()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the E2B JS SDK suite failed against e2blocal (%v); its output is above", err)
	}
}
