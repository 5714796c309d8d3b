package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

// TestWrapperOptions pins how the option-taking wrappers read their
// options: each allowed form runs the wrapped (allowed) program, and every
// way of hiding a program or an unknown option behind a wrapper is denied.
func TestWrapperOptions(t *testing.T) {
	c := devContract()
	for _, w := range []string{"nice", "stdbuf", "ionice", "setsid"} {
		c.Commands.Allow = append(c.Commands.Allow, contracts.CommandRule{Run: w, Wrapper: true})
	}
	c.Commands.Allow[20].Wrapper = true // nice
	cases := []struct {
		name, cmd string
		allow     bool
	}{
		{"timeout-with-duration-runs-allowed-program", "timeout 5 echo hi", true},
		{"timeout-with-signal-and-kill-after", "timeout -s KILL -k 2 5s echo hi", true},
		{"timeout-joined-forms", "timeout -sKILL --kill-after=1 --preserve-status 5 echo hi", true},
		{"timeout-double-dash-ends-options", "timeout -- 5 echo hi", true},
		{"timeout-hides-a-denied-program", "timeout 5 rm -rf /", false},
		{"timeout-without-duration-is-denied", "timeout echo hi", false},
		{"timeout-value-option-at-the-end-is-denied", "timeout -s", false},
		{"timeout-unknown-option-is-denied", "timeout --frobnicate 5 echo hi", false},
		{"nice-with-adjustment", "nice -n 10 echo hi", true},
		{"nice-joined-and-numeric-forms", "nice -n5 echo hi", true},
		{"nice-old-numeric-form", "nice -10 echo hi", true},
		{"nice-hides-a-denied-program", "nice -n 5 curl-evil", false},
		{"nice-unknown-option-is-denied", "nice --help echo", false},
		{"nice-needs-a-program", "nice -n 5", false},
		{"stdbuf-modes", "stdbuf -oL -e0 --input=0 echo hi", true},
		{"stdbuf-separate-mode", "stdbuf -o L echo hi", true},
		{"stdbuf-hides-a-denied-program", "stdbuf -oL rm x", false},
		{"stdbuf-unknown-option-is-denied", "stdbuf -x echo hi", false},
		{"ionice-class-and-level", "ionice -c 2 -n 7 echo hi", true},
		{"ionice-joined-forms", "ionice -c3 -t echo hi", true},
		{"ionice-acting-on-another-process-is-denied", "ionice -p 1", false},
		{"ionice-hides-a-denied-program", "ionice -c 2 rm x", false},
		{"setsid-flags", "setsid -fw echo hi", true},
		{"setsid-long-flags", "setsid --fork --wait -- echo hi", true},
		{"setsid-unknown-option-is-denied", "setsid -x echo hi", false},
		{"setsid-needs-a-program", "setsid -f", false},
		{"setsid-hides-a-denied-program", "setsid rm x", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideRun(c, RunCall{Command: tc.cmd})
			assert.Equal(t, tc.allow, d.Allow, "%s: %s", tc.cmd, d.Reason)
		})
	}
}
