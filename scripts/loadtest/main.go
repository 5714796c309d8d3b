// Command loadtest measures sandbox-mcp over streamable HTTP as a user
// would run it: the real binary, the embedded sandbox, real commands.
//
//	go build -o /tmp/sandbox-mcp ./cmd/sandbox-mcp
//	go run ./scripts/loadtest -bin /tmp/sandbox-mcp
//
// It first exports a large artifact on the fresh server and reports the
// server's peak memory growth (VmHWM), then runs -sessions concurrent MCP
// sessions of -calls run_command calls each and reports errors, latency
// percentiles and the server's memory. It prints figures; it asserts
// nothing (timing is the machine's business), except that it exits 1 when
// a call failed.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

const contract = `version: 1
task: {id: loadtest}
sandbox: {backend: local, lifetime: 1h}
commands:
  allow: [{run: echo}, {run: head}]
paths:
  write: [/home/user/work]
  export: [/home/user/work]
limits: {artifact_bytes: 512MiB}
`

const token = "loadtest-token-0123456789"

func main() {
	bin := flag.String("bin", "", "the sandbox-mcp binary (required)")
	sessions := flag.Int("sessions", 64, "concurrent MCP sessions")
	calls := flag.Int("calls", 50, "run_command calls per session")
	exportMiB := flag.Int("export-mib", 200, "size of the artifact exported before the load (0 skips)")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "usage: loadtest -bin PATH [-sessions N] [-calls N] [-export-mib N]")
		os.Exit(2)
	}
	if err := run(*bin, *sessions, *calls, *exportMiB); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

func run(bin string, sessions, calls, exportMiB int) error {
	dir, err := os.MkdirTemp("", "loadtest-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cpath := filepath.Join(dir, "task.yaml")
	if err := os.WriteFile(cpath, []byte(contract), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(bin, "serve", "--contract", cpath, "--state", filepath.Join(dir, "state"), "--http", "127.0.0.1:0", "--log-level", "info")
	cmd.Env = append(os.Environ(), "SANDBOX_MCP_TOKEN="+token)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	url, err := waitURL(stderr)
	if err != nil {
		return err
	}
	ctx := context.Background()
	first, err := session(ctx, url)
	if err != nil {
		return err
	}
	if _, err := call(ctx, first, "run_command", map[string]any{"command": "echo warm"}); err != nil {
		return err
	}

	if exportMiB > 0 {
		rssBefore := procKB(cmd.Process.Pid, "VmRSS")
		if _, err := call(ctx, first, "run_command", map[string]any{
			"command": fmt.Sprintf("head -c %dM /dev/urandom > big.bin", exportMiB), "timeout_seconds": 120,
		}); err != nil {
			return err
		}
		start := time.Now()
		res, err := call(ctx, first, "export_artifact", map[string]any{"path": "big.bin"})
		if err != nil {
			return err
		}
		took := time.Since(start)
		hwm := procKB(cmd.Process.Pid, "VmHWM")
		fmt.Printf("export %d MiB: %v (%.0f MB/s); server RSS before %.1f MiB, peak %.1f MiB, growth %.1f MiB\n  %s\n",
			exportMiB, took.Round(time.Millisecond), float64(exportMiB)*1.048576/took.Seconds(),
			float64(rssBefore)/1024, float64(hwm)/1024, float64(hwm-rssBefore)/1024, firstLine(res))
	}

	var (
		mu        sync.Mutex
		latencies []time.Duration
		errs      []string
		wg        sync.WaitGroup
	)
	start := time.Now()
	for i := 0; i < sessions; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := session(ctx, url)
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
				return
			}
			defer c.Close()
			for j := 0; j < calls; j++ {
				t0 := time.Now()
				want := fmt.Sprintf("s%d-c%d", i, j)
				out, err := call(ctx, c, "run_command", map[string]any{"command": "echo " + want})
				d := time.Since(t0)
				mu.Lock()
				latencies = append(latencies, d)
				if err != nil {
					errs = append(errs, err.Error())
				} else if !strings.Contains(out, want) {
					errs = append(errs, "wrong output: "+firstLine(out))
				}
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	wall := time.Since(start)
	sort.Slice(latencies, func(a, b int) bool { return latencies[a] < latencies[b] })
	pct := func(p float64) time.Duration {
		if len(latencies) == 0 {
			return 0
		}
		return latencies[int(p*float64(len(latencies)-1))]
	}
	p50, p99 := pct(0.50), pct(0.99)
	fmt.Printf("load: %d sessions x %d calls = %d calls in %v (%.0f calls/s), %d errors\n",
		sessions, calls, len(latencies), wall.Round(time.Millisecond), float64(len(latencies))/wall.Seconds(), len(errs))
	fmt.Printf("latency p50 %v p90 %v p99 %v max %v; p99/p50 = %.1f\n",
		p50.Round(time.Microsecond), pct(0.90).Round(time.Microsecond), p99.Round(time.Microsecond),
		pct(1).Round(time.Microsecond), float64(p99)/float64(p50))
	fmt.Printf("server memory: RSS %.1f MiB, peak (VmHWM) %.1f MiB\n",
		float64(procKB(cmd.Process.Pid, "VmRSS"))/1024, float64(procKB(cmd.Process.Pid, "VmHWM"))/1024)
	if len(errs) > 0 {
		for i, e := range errs {
			if i == 5 {
				break
			}
			fmt.Println("error:", e)
		}
		return fmt.Errorf("%d calls failed", len(errs))
	}
	return nil
}

var listenRE = regexp.MustCompile(`url=(http://\S+)`)

func waitURL(stderr interface{ Read([]byte) (int, error) }) (string, error) {
	sc := bufio.NewScanner(stderr)
	urls := make(chan string, 1)
	go func() {
		for sc.Scan() {
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case u := <-urls:
		return u, nil
	case <-time.After(30 * time.Second):
		return "", fmt.Errorf("server did not start listening")
	}
}

func session(ctx context.Context, url string) (*client.Client, error) {
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "loadtest", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		return nil, err
	}
	return c, nil
}

func call(ctx context.Context, c *client.Client, tool string, args map[string]any) (string, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, ct := range res.Content {
		if tc, ok := mcp.AsTextContent(ct); ok {
			b.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("%s: %s", tool, b.String())
	}
	return b.String(), nil
}

// procKB reads a "Vm...: N kB" field of /proc/PID/status.
func procKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
