package server

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"

	mcpserver "github.com/mark3labs/mcp-go/server"
)

// Options configure New. The zero value of each field is usable.
type Options struct {
	// Name and Version are reported to clients in initialize. If zero,
	// "sandbox-mcp" and "dev".
	Name, Version string
	// Instructions tell the model the rules of this task up front.
	Instructions string
	// Logger receives transport diagnostics. If nil, they are discarded.
	Logger *slog.Logger
}

// Server is an MCP server with the transports sandbox-mcp offers.
type Server struct {
	mcp    *mcpserver.MCPServer
	logger *slog.Logger
}

// New returns a server with recovery and input-schema validation on, and
// tool, resource and logging capabilities declared. Register tools and
// resources on MCP() before serving.
func New(o Options) *Server {
	if o.Name == "" {
		o.Name = "sandbox-mcp"
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opts := []mcpserver.ServerOption{
		// A panic in a handler becomes an error response instead of killing
		// the process: nothing a client sends may crash the server.
		mcpserver.WithRecovery(),
		mcpserver.WithResourceRecovery(),
		// Wrong types and unknown fields become isError results the model
		// can read, before a handler runs.
		mcpserver.WithInputSchemaValidation(),
		mcpserver.WithToolCapabilities(false),
		mcpserver.WithResourceCapabilities(false, true),
		mcpserver.WithLogging(),
		mcpserver.WithElicitation(),
	}
	if o.Instructions != "" {
		opts = append(opts, mcpserver.WithInstructions(o.Instructions))
	}
	return &Server{
		mcp:    mcpserver.NewMCPServer(o.Name, o.Version, opts...),
		logger: logger,
	}
}

// MCP returns the underlying mcp-go server, to register tools and resources.
func (s *Server) MCP() *mcpserver.MCPServer { return s.mcp }

// ServeStdio serves one client over in and out until in reaches EOF or ctx
// is done. Only JSON-RPC is written to out.
//
// mcp-go keeps the stdio session in a package variable, so a process must
// not run two stdio servers at once.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	std := mcpserver.NewStdioServer(s.mcp)
	std.SetErrorLogger(log.New(slogWriter{s.logger}, "", 0))
	err := std.Listen(ctx, in, out)
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// slogWriter adapts mcp-go's *log.Logger diagnostics to slog.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	msg := string(p)
	if n := len(msg); n > 0 && msg[n-1] == '\n' {
		msg = msg[:n-1]
	}
	w.l.Warn("mcp transport", "detail", msg)
	return len(p), nil
}
