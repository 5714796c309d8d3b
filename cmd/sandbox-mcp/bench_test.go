package main

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2blocal"
)

const benchContract = `version: 1
task: {id: bench}
sandbox: {backend: local, lifetime: 30m}
commands:
  allow: [{run: "true"}]
`

// BenchmarkStdioRunCommandTrue is one run_command "true" through the whole
// product: an MCP client over stdio to the real binary, the policy, the
// audit log (fsync'd), the E2B client and the embedded sandbox.
// Compare with BenchmarkBackendRunTrue: the difference is what the MCP
// layer and the policy add.
func BenchmarkStdioRunCommandTrue(b *testing.B) {
	p := filepath.Join(b.TempDir(), "bench.yaml")
	if err := os.WriteFile(p, []byte(benchContract), 0o600); err != nil {
		b.Fatal(err)
	}
	s := startStdio(b, p, b.TempDir())
	defer s.c.Close()
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_command"
	req.Params.Arguments = map[string]any{"command": "true"}
	ctx := context.Background()
	if res, err := s.c.CallTool(ctx, req); err != nil || res.IsError {
		b.Fatalf("warm-up call: %v %v", err, res)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := s.c.CallTool(ctx, req)
		if err != nil || res.IsError {
			b.Fatalf("call: %v %v", err, res)
		}
	}
}

// BenchmarkBackendRunTrue runs "true" through the E2B client against an
// in-process embedded sandbox: the backend alone, without MCP or policy.
func BenchmarkBackendRunTrue(b *testing.B) {
	const key = "e2b_bench_0000000000000000000000000000000000"
	srv, err := e2blocal.New(e2blocal.Options{Dir: b.TempDir(), APIKey: key})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	defer srv.Close(context.Background())
	c, err := e2b.New(e2b.Options{APIURL: ts.URL, SandboxURL: ts.URL, APIKey: key})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	sb, err := c.Create(ctx, e2b.CreateParams{Timeout: 30 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	run := func() {
		res, err := sb.Run(ctx, e2b.RunParams{Command: "true", Timeout: time.Minute}, func([]byte) {}, func([]byte) {})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("run: %v %+v", err, res)
		}
	}
	run()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run()
	}
}

// BenchmarkStdioDeniedCall is a run_command the policy refuses: the whole
// MCP round trip over stdio, the decision and its fsync'd audit line, with
// no sandbox work. It is the MCP layer's and the policy's own cost, which
// the comparison above cannot resolve under the noise of starting a jailed
// process.
func BenchmarkStdioDeniedCall(b *testing.B) {
	p := filepath.Join(b.TempDir(), "bench.yaml")
	if err := os.WriteFile(p, []byte(benchContract), 0o600); err != nil {
		b.Fatal(err)
	}
	s := startStdio(b, p, b.TempDir())
	defer s.c.Close()
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_command"
	req.Params.Arguments = map[string]any{"command": "true && curl https://example.com"}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := s.c.CallTool(ctx, req)
		if err != nil || !res.IsError {
			b.Fatalf("call: %v %v", err, res)
		}
	}
}
