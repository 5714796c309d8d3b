package policy

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forbiddenImports are the standard packages policy must never use
// directly: it is pure, with no I/O, processes, logging or system calls.
var forbiddenImports = []string{"os", "net", "os/exec", "log", "log/slog", "io/fs", "syscall", "net/http", "time/tzdata", "context", "unsafe"}

// TestPolicyImportsNoIO parses the package's non-test files and fails if
// any imports a forbidden standard package.
func TestPolicyImportsNoIO(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			assert.NotContains(t, forbiddenImports, path, "%s imports %s", name, path)
		}
		checked++
	}
	require.Greater(t, checked, 3, "no source files found")
}

// TestPolicyDependencies lists policy's transitive dependencies with the go
// tool: inside the module only contracts (the types and the reserved-name
// list; its file loader is never called from policy) is allowed, outside it
// only the shell parser, IDNA and the contracts loader's own modules.
func TestPolicyDependencies(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH")
	}
	cmd := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	allowed := []string{
		"github.com/sandbox-mcp/sandbox-mcp/policy",
		"github.com/sandbox-mcp/sandbox-mcp/contracts",
		"mvdan.cc/sh/v3/syntax",
		"mvdan.cc/sh/v3/fileutil",
		"golang.org/x/net/idna",
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "golang.org/x/text/") {
			continue // idna's tables
		}
		if strings.HasPrefix(dep, "github.com/sandbox-mcp/sandbox-mcp/contracts") && dep != "github.com/sandbox-mcp/sandbox-mcp/contracts" {
			t.Errorf("policy depends on %s", dep)
			continue
		}
		if !contains(allowed, dep) && !strings.HasPrefix(dep, "github.com/santhosh-tekuri/") && !strings.HasPrefix(dep, "go.yaml.in/") {
			// contracts' own loader dependencies are allowed; anything
			// else reaching policy must be reviewed.
			t.Errorf("policy depends on %s; review and add it to the allowed list if it is pure", dep)
		}
	}
}
