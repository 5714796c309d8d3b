package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostConfigRE finds the README's host configuration snippets: a marker
// comment, then a fenced block.
var hostConfigRE = regexp.MustCompile("(?s)<!-- host-config: ([a-z-]+) -->\n```(json|toml|sh)\n(.*?)```")

type launch struct {
	command string
	args    []string
	env     map[string]string
}

// parseHostConfig reads what a host would launch from one snippet.
func parseHostConfig(t *testing.T, lang, body string) launch {
	t.Helper()
	switch lang {
	case "json":
		var cfg struct {
			MCPServers map[string]struct {
				Command string            `json:"command"`
				Args    []string          `json:"args"`
				Env     map[string]string `json:"env"`
			} `json:"mcpServers"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &cfg))
		s, ok := cfg.MCPServers["sandbox"]
		require.True(t, ok)
		return launch{s.Command, s.Args, s.Env}
	case "toml":
		cmd := regexp.MustCompile(`(?m)^command = "(.*)"$`).FindStringSubmatch(body)
		args := regexp.MustCompile(`(?m)^args = (\[.*\])$`).FindStringSubmatch(body)
		require.NotNil(t, cmd)
		require.NotNil(t, args)
		var a []string
		require.NoError(t, json.Unmarshal([]byte(args[1]), &a))
		return launch{command: cmd[1], args: a}
	case "sh":
		_, after, ok := strings.Cut(strings.TrimSpace(body), " -- ")
		require.True(t, ok, "claude mcp add NAME -- COMMAND ARGS")
		f := strings.Fields(after)
		return launch{command: f[0], args: f[1:]}
	}
	t.Fatalf("unknown snippet language %q", lang)
	return launch{}
}

// TestReadmeHostConfigsStartAWorkingServer starts the server exactly as each
// host snippet in the README says (with the example paths pointed at this
// checkout) and lists its tools over MCP, as the host would.
func TestReadmeHostConfigsStartAWorkingServer(t *testing.T) {
	requireE2E(t)
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	matches := hostConfigRE.FindAllStringSubmatch(string(readme), -1)
	names := []string{}
	for _, m := range matches {
		names = append(names, m[1])
	}
	require.ElementsMatch(t, []string{"claude-desktop", "claude-code", "cursor", "codex", "deepseek"}, names)

	bin := buildBinary(t)
	contract, err := filepath.Abs("../../contracts/examples/quickstart.yaml")
	require.NoError(t, err)
	for _, m := range matches {
		t.Run(m[1], func(t *testing.T) {
			l := parseHostConfig(t, m[2], m[3])
			require.Equal(t, "/home/you/.local/bin/sandbox-mcp", l.command)
			state := t.TempDir()
			args := make([]string, len(l.args))
			for i, a := range l.args {
				switch {
				case a == "/home/you/task.yaml":
					a = contract
				case strings.HasPrefix(a, "/home/you/.local/state/"):
					a = state
				}
				args[i] = a
			}
			if !contains(args, "--state") {
				// The default state dir is under $XDG_STATE_HOME; keep it
				// inside the test.
				l.env = map[string]string{"XDG_STATE_HOME": state}
			}
			var env []string
			for k, v := range l.env {
				env = append(env, k+"="+v)
			}
			listTools(t, bin, env, args)
		})
	}
}

// TestReadmeFirstSetupCommandServes runs the README's first set-up command
// from the repository root, as a newcomer would, and talks MCP to it.
func TestReadmeFirstSetupCommandServes(t *testing.T) {
	requireE2E(t)
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?m)^(go run ./cmd/sandbox-mcp serve [^#\n]*?)\\s+#").FindStringSubmatch(string(readme))
	require.NotNil(t, m, "the README's first set-up command")
	f := strings.Fields(m[1])
	require.Equal(t, []string{"go", "run"}, f[:2])
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	tr := transport.NewStdioWithOptions("go", []string{"XDG_STATE_HOME=" + t.TempDir()}, f[1:],
		transport.WithCommandFunc(func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
			c := exec.CommandContext(ctx, command, args...)
			c.Env = append(os.Environ(), env...)
			c.Dir = root
			return c, nil
		}))
	c := client.NewClient(tr)
	require.NoError(t, c.Start(context.Background()))
	defer c.Close()
	assertTools(t, c)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func listTools(t *testing.T, command string, env, args []string) {
	t.Helper()
	c := client.NewClient(transport.NewStdio(command, env, args...))
	require.NoError(t, c.Start(context.Background()))
	defer c.Close()
	assertTools(t, c)
}

func assertTools(t *testing.T, c *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "readme", Version: "1"}
	_, err := c.Initialize(ctx, init)
	require.NoError(t, err)
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	require.NoError(t, err)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	assert.ElementsMatch(t, []string{"run_command", "write_file", "read_file", "export_artifact"}, names)
}
