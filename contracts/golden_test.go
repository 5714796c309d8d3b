package contracts_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// TestExamplesGolden pins each example's defaulted contract, warnings and
// hash. A change to defaults, lint or canonical form shows up as a diff of
// testdata/golden; review it like code and refresh with -update.
func TestExamplesGolden(t *testing.T) {
	paths, err := filepath.Glob("examples/*.yaml")
	require.NoError(t, err)
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".yaml")
		t.Run(name, func(t *testing.T) {
			c, w, err := contracts.Load(p)
			require.NoError(t, err)
			warnings := make([]string, len(w))
			for i, x := range w {
				warnings[i] = x.String()
			}
			got, err := json.MarshalIndent(map[string]any{"hash": c.Hash(), "warnings": warnings, "contract": c}, "", "  ")
			require.NoError(t, err)
			got = append(got, '\n')
			golden := filepath.Join("testdata", "golden", name+".json")
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
				require.NoError(t, os.WriteFile(golden, got, 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test ./contracts -run TestExamplesGolden -update")
			assert.Equal(t, string(want), string(got))
		})
	}
}
