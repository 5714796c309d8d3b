package contracts_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

func loadExample(t *testing.T, name string) (*contracts.Contract, []contracts.Warning) {
	t.Helper()
	c, w, err := contracts.Load(filepath.Join("examples", name))
	require.NoError(t, err)
	return c, w
}

func programs(c *contracts.Contract) map[string]contracts.CommandRule {
	m := map[string]contracts.CommandRule{}
	for _, r := range c.Commands.Allow {
		m[r.Run] = r
	}
	return m
}

func TestExamplesPointEditorsAtTheSchema(t *testing.T) {
	paths, err := filepath.Glob("examples/*.yaml")
	require.NoError(t, err)
	require.Len(t, paths, 4)
	for _, p := range paths {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		first, _, _ := strings.Cut(string(data), "\n")
		assert.Equal(t, "# yaml-language-server: $schema=../schema.json", first, p)
		_, err = os.Stat(filepath.Join(filepath.Dir(p), "../schema.json"))
		assert.NoError(t, err, "the $schema path must resolve from the example's directory")
	}
}

func TestExampleQuickstart(t *testing.T) {
	c, w := loadExample(t, "quickstart.yaml")
	assert.Equal(t, []contracts.Warning{
		{Path: "commands.allow[0]", Msg: "python3 is allowed: that is arbitrary code; network and file confinement rest on the sandbox alone"},
		{Path: "commands.allow[1]", Msg: "pytest runs code from the workdir, which paths.write[0] (/home/user/work) makes writable: the agent can write a test or build file and have it run (write-then-execute); confinement rests on the sandbox alone"},
	}, w)
	assert.Equal(t, contracts.BackendLocal, c.Sandbox.Backend)
	progs := programs(c)
	for _, p := range []string{"python3", "pytest", "ls", "cat", "grep", "head", "tail", "wc", "find", "echo"} {
		assert.Contains(t, progs, p)
	}
	for _, p := range []string{"pip", "curl", "sh", "bash", "git", "env", "xargs"} {
		assert.NotContains(t, progs, p, "quickstart must not allow %s", p)
	}
	assert.Empty(t, progs["find"].AllowFlags, "find must keep -exec and kin refused")
	for _, r := range c.Commands.Allow {
		assert.False(t, r.Wrapper, r.Run)
	}
	assert.Equal(t, []string{"/home/user/work"}, c.Paths.Write)
	assert.Empty(t, c.Paths.Export)
	assert.Equal(t, contracts.EgressNone, c.Network.Egress)
	assert.Empty(t, c.Credentials)
	assert.Nil(t, c.Mac)
}

func TestExamplePythonPyPI(t *testing.T) {
	c, w := loadExample(t, "python-pypi.yaml")
	assert.Len(t, w, 4, "python3 and pip are arbitrary code; pip and pytest run workdir code")
	assert.Equal(t, contracts.EgressAllowlist, c.Network.Egress)
	assert.Equal(t, []string{"pypi.org", "files.pythonhosted.org"}, c.Network.Allow)
	progs := programs(c)
	assert.Contains(t, progs["pip"].Subcommands, "install")
	assert.NotContains(t, progs["pip"].Subcommands, "uninstall")
	assert.Equal(t, []string{"/home/user/work/dist"}, c.Paths.Export)
	assert.Equal(t, contracts.ByteSize(50<<20), c.Limits.ArtifactBytes)
	assert.Empty(t, c.Credentials)
}

func TestExampleReviewReadonly(t *testing.T) {
	c, w := loadExample(t, "review-readonly.yaml")
	assert.Empty(t, w)
	assert.Equal(t, []string{"status", "diff", "log", "show"}, programs(c)["git"].Subcommands)
	assert.Empty(t, c.Paths.Write, "nothing is writable")
	assert.Empty(t, c.Paths.Export, "nothing is exportable")
	assert.Equal(t, []string{"/home/user/repo"}, c.Paths.Read)
	assert.Equal(t, contracts.EgressNone, c.Network.Egress)
	for _, r := range c.Commands.Allow {
		assert.Empty(t, r.AllowFlags, r.Run)
		assert.False(t, r.Wrapper, r.Run)
	}
}

func TestExampleIOSApp(t *testing.T) {
	c, w := loadExample(t, "ios-app.yaml")
	assert.Empty(t, w)
	assert.Equal(t, contracts.BackendE2B, c.Sandbox.Backend)
	assert.Equal(t, contracts.ExpiryPause, c.Sandbox.OnExpiry)
	require.NotNil(t, c.Mac)
	assert.Equal(t, "required", c.Mac.Approval)
	assert.Equal(t, "runner@127.0.0.1:2222", c.Mac.Runner.SSH)
	require.Len(t, c.Mac.Steps, 2)
	// Each step unpacks the staged input before building: a project is a
	// directory, an artifact is a file.
	assert.Equal(t, []string{"sh", "-c"}, c.Mac.Steps["build"].Argv[:2])
	assert.Contains(t, c.Mac.Steps["build"].Argv[2], "tar -xf inputs/App.tar && xcodebuild")
	assert.Equal(t, contracts.Duration(30*time.Minute), c.Mac.Steps["build"].Timeout)
	assert.Equal(t, contracts.Duration(45*time.Minute), c.Mac.Steps["test"].Timeout)
	assert.Equal(t, []string{"build/Logs/Test"}, c.Mac.Steps["test"].Outputs)
	assert.Equal(t, contracts.EgressNone, c.Network.Egress)
	assert.Equal(t, []string{"status", "diff", "log"}, programs(c)["git"].Subcommands)
	for _, w := range c.Paths.Write {
		assert.NotEqual(t, "/home/user/work", w, "the repository root (and so .git) must not be writable")
	}
}
