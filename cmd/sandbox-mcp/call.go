package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

func init() {
	commands["call"] = command{
		summary: "start the server on stdio, call one tool as an MCP client would, print the result",
		run:     runCall,
	}
}

// runCall is local stdio testing in one line: it starts `sandbox-mcp serve`
// as a child process, speaks MCP to it over stdio, calls one tool, prints
// the result and stops the server (which ends the sandbox). Exit code 0 for
// a result, 3 for an isError result (a denial or a failure), 1 otherwise.
func runCall(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	contract := fs.String("contract", "", "the task's contract `FILE`; required")
	state := fs.String("state", "", "state `DIR` passed to serve (default: a temporary directory, removed afterwards)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up on the call after this long")
	quiet := fs.Bool("quiet", false, "do not print progress notifications to stderr")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sandbox-mcp call --contract FILE [--state DIR] TOOL ARGS_JSON")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitCode(2, "")
	}
	if *contract == "" || fs.NArg() != 2 {
		fs.Usage()
		return exitCode(2, "call: --contract FILE, a tool name and its JSON arguments are required")
	}
	tool, rawArgs := fs.Arg(0), fs.Arg(1)
	var toolArgs map[string]any
	if err := json.Unmarshal([]byte(rawArgs), &toolArgs); err != nil {
		return exitCode(1, fmt.Sprintf("call: ARGS_JSON must be a JSON object: %v", err))
	}

	stateDir := *state
	if stateDir == "" {
		dir, err := os.MkdirTemp("", "sandbox-mcp-call-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		stateDir = dir
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	tr := transport.NewStdioWithOptions(exe, nil,
		[]string{"serve", "--contract", *contract, "--state", stateDir, "--log-level", "warn"},
		transport.WithCommandStderrWriter(stderr))
	if err := tr.Start(ctx); err != nil {
		return fmt.Errorf("call: start server: %w", err)
	}
	c := client.NewClient(tr)
	defer c.Close()
	if !*quiet {
		c.OnNotification(func(n mcp.JSONRPCNotification) {
			if n.Method == "notifications/progress" {
				if msg, ok := n.Params.AdditionalFields["message"].(string); ok && msg != "" {
					fmt.Fprint(stderr, msg)
				}
			}
		})
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "sandbox-mcp call", Version: version}
	if _, err := c.Initialize(ctx, init); err != nil {
		return fmt.Errorf("call: initialize: %w", err)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = toolArgs
	req.Params.Meta = &mcp.Meta{ProgressToken: "call"}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return fmt.Errorf("call: %s: %w", tool, err)
	}
	printResult(stdout, res)
	if res.IsError {
		return exitCode(3, "")
	}
	return nil
}

// printResult prints the structured content as indented JSON when there is
// some, else the text blocks.
func printResult(w io.Writer, res *mcp.CallToolResult) {
	if res.StructuredContent != nil && !res.IsError {
		b, err := json.MarshalIndent(res.StructuredContent, "", "  ")
		if err == nil {
			fmt.Fprintln(w, string(b))
			return
		}
	}
	for _, c := range res.Content {
		if t, ok := mcp.AsTextContent(c); ok {
			fmt.Fprintln(w, t.Text)
		}
	}
}
