package policy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

// TestBadInput feeds the engine inputs built to hang, crash or confuse it:
// each must be a clear denial.
func TestBadInput(t *testing.T) {
	c := devContract()
	nested := func(open, close string, n int, inner string) string {
		return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
	}
	cases := []struct {
		name string
		cmd  string
		rule string
		why  string
	}{
		{"one-mebibyte-command-is-too-long", "ls " + strings.Repeat("a", 1<<20), "builtin.limits", "command too long"},
		{"ten-thousand-nested-subshells-are-too-deep", nested("( ", " )", 10000, "ls"), "builtin.limits", "nests deeper"},
		{"ten-thousand-nested-blocks-are-too-deep", nested("{ ", "; }", 10000, "ls"), "builtin.limits", "nests deeper"},
		{"ten-thousand-nested-ifs-are-too-deep", nested("if true; then ", "; fi", 3000, "ls"), "builtin.limits", "nests deeper"},
		{"ten-thousand-nested-substitutions-are-denied", "echo " + nested("$(", ")", 10000, "ls"), "builtin.substitution", ""},
		{"seventy-nested-wrappers-are-too-deep", strings.Repeat("timeout 5 ", 70) + "ls", "builtin.limits", ""},
		{"twelve-nested-sh-c-quotings-exceed-the-length-limit", deepShC(12), "builtin.limits", ""},
		{"too-many-simple-commands-are-denied", strings.Repeat("ls;", 300), "builtin.limits", "more than 256"},
		{"long-pipeline-is-denied", strings.Repeat("ls | ", 300) + "ls", "builtin.limits", ""},
		{"invalid-utf8-is-denied", "ls \xff\xfe", "builtin.input", "UTF-8"},
		{"nul-byte-is-denied", "ls\x00; rm -rf /", "builtin.input", "NUL"},
		{"carriage-return-is-denied", "ls\rrm", "builtin.input", "control character"},
		{"escape-character-is-denied", "ls \x1b[2J", "builtin.input", "control character"},
		{"empty-command-is-denied", "", "builtin.input", "empty"},
		{"blank-command-is-denied", " \n\t ", "builtin.input", "empty"},
		{"comment-only-command-is-denied", "# nothing", "builtin.input", "no program"},
		{"parse-error-is-denied-with-the-parser-message", "ls 'unterminated", "builtin.parse", "reached EOF"},
		{"unbalanced-paren-is-a-parse-error", "(ls", "builtin.parse", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideRun(c, RunCall{Command: tc.cmd})
			require.False(t, d.Allow, d.Reason)
			assert.Equal(t, tc.rule, d.Rule, d.Reason)
			if tc.why != "" {
				assert.Contains(t, d.Reason, tc.why)
			}
			assert.Less(t, len(d.Reason), 2000, "reasons stay short")
		})
	}
	t.Run("sixty-four-nested-subshells-are-allowed", func(t *testing.T) {
		d := DecideRun(c, RunCall{Command: nested("( ", " )", 60, "ls")})
		assert.True(t, d.Allow, d.Reason)
	})
	t.Run("two-hundred-fifty-six-commands-are-allowed", func(t *testing.T) {
		d := DecideRun(c, RunCall{Command: strings.Repeat("ls;", 255) + "ls"})
		assert.True(t, d.Allow, d.Reason)
	})
	t.Run("nil-contract-denies-everything", func(t *testing.T) {
		assert.False(t, DecideRun(nil, RunCall{Command: "ls"}).Allow)
		assert.False(t, DecideWrite(nil, WriteCall{Path: "/work/a"}).Allow)
		assert.False(t, DecideRead(nil, ReadCall{Path: "/work/a"}).Allow)
		assert.False(t, DecideExport(nil, ExportCall{Path: "/work/a"}).Allow)
		assert.False(t, DecideHandoff(nil, HandoffCall{Step: "build"}).Allow)
		ok, _ := HostAllowed(nil, "pypi.org")
		assert.False(t, ok)
		assert.Equal(t, NetworkPlan{}, NetworkPlanFor(nil))
		d, err := Decide(nil, ToolRunCommand, []byte(`{"command":"ls"}`))
		assert.NoError(t, err)
		assert.False(t, d.Allow)
	})
	t.Run("empty-contract-denies-everything", func(t *testing.T) {
		d := DecideRun(&contracts.Contract{}, RunCall{Command: "ls"})
		assert.False(t, d.Allow)
	})
}

func deepShC(n int) string {
	s := "ls"
	for i := 0; i < n; i++ {
		s = "sh -c " + shellQuote(s)
	}
	return s
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
