package egress_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEgressImportsOnlyTheStandardLibrary keeps the package cheap for the
// jail's namespace holder to import: no module outside the standard
// library, not even this module's policy (the decision comes in through
// Options.Allow).
func TestEgressImportsOnlyTheStandardLibrary(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	require.NoError(t, err, string(out))
	var nonStd []string
	for _, l := range strings.Fields(string(out)) {
		if l != "github.com/sandbox-mcp/sandbox-mcp/runner/egress" {
			nonStd = append(nonStd, l)
		}
	}
	assert.Empty(t, nonStd)
}
