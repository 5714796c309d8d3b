package policy

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

var update = flag.Bool("update", false, "rewrite the decisions in testdata/decisions from the current engine")

// goldenFile is one example contract with calls and the decisions the
// engine made for them, reviewed like code. To add a call, append it with
// "decision": null and run `go test ./policy -run Golden -update`.
type goldenFile struct {
	Contract string       `json:"contract"` // relative to the module root
	Cases    []goldenCase `json:"cases"`
}

type goldenCase struct {
	Tool     string          `json:"tool"`
	Args     json.RawMessage `json:"args"`
	Known    []string        `json:"known,omitempty"` // handoff_to_mac: artifacts exported so far
	Decision json.RawMessage `json:"decision"`
}

func TestGoldenDecisions(t *testing.T) {
	files, err := filepath.Glob("../testdata/decisions/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no golden files")
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			var g goldenFile
			require.NoError(t, json.Unmarshal(data, &g))
			c, _, err := contracts.Load(filepath.Join("..", g.Contract))
			require.NoError(t, err)
			for i := range g.Cases {
				gc := &g.Cases[i]
				got := goldenDecide(t, c, gc)
				if *update {
					gc.Decision = got
					continue
				}
				assert.JSONEq(t, string(gc.Decision), string(got), "%s %s", gc.Tool, gc.Args)
			}
			if *update {
				var buf bytes.Buffer
				enc := json.NewEncoder(&buf)
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false)
				require.NoError(t, enc.Encode(g))
				require.NoError(t, os.WriteFile(file, buf.Bytes(), 0o644))
			}
		})
	}
}

func goldenDecide(t *testing.T, c *contracts.Contract, gc *goldenCase) json.RawMessage {
	t.Helper()
	var d Decision
	var err error
	if gc.Tool == ToolHandoffToMac && gc.Known != nil {
		var a struct {
			Step      string   `json:"step"`
			Artifacts []string `json:"artifacts"`
		}
		require.NoError(t, json.Unmarshal(gc.Args, &a))
		d = DecideHandoff(c, HandoffCall{Step: a.Step, Artifacts: a.Artifacts, Known: gc.Known})
	} else {
		d, err = Decide(c, gc.Tool, gc.Args)
	}
	if err != nil {
		out, _ := json.Marshal(map[string]string{"error": err.Error()})
		return out
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(d))
	return bytes.TrimSpace(buf.Bytes())
}
