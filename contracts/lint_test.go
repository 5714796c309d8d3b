package contracts_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

func TestLintWarnsAboutRiskyChoicesAndNotTheirNeighbours(t *testing.T) {
	const key = "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	tests := []struct {
		name string
		yaml string
		want []contracts.Warning
	}{
		{
			name: "read-only-tools-and-no-write-raise-nothing",
			yaml: "commands:\n  allow: [{run: ls}, {run: cat}, {run: git, subcommands: [status, diff]}, {run: pytest}]\n",
			want: nil,
		},
		{
			name: "an-interpreter-is-arbitrary-code",
			yaml: "commands:\n  allow: [{run: ls}, {run: python3.12}, {run: /usr/bin/bash}, {run: sudo}, {run: eval}]\n",
			want: []contracts.Warning{
				{Path: "commands.allow[1]", Msg: "python3.12 is allowed: that is arbitrary code; network and file confinement rest on the sandbox alone"},
				{Path: "commands.allow[2]", Msg: "/usr/bin/bash is allowed: that is arbitrary code; network and file confinement rest on the sandbox alone"},
				{Path: "commands.allow[3]", Msg: "sudo is allowed: that is arbitrary code; network and file confinement rest on the sandbox alone"},
				{Path: "commands.allow[4]", Msg: "eval is allowed: that is arbitrary code; network and file confinement rest on the sandbox alone"},
			},
		},
		{
			name: "a-package-manager-is-arbitrary-code-unless-limited-to-read-only-subcommands",
			yaml: "commands:\n  allow: [{run: npm, subcommands: [ls, view]}, {run: pip, subcommands: [install]}, {run: go}]\n",
			want: []contracts.Warning{
				{Path: "commands.allow[1]", Msg: "pip is allowed: it installs or runs package and project code (install scripts, build scripts, tests), which is arbitrary code; confinement rests on the sandbox alone"},
				{Path: "commands.allow[2]", Msg: "go is allowed: it installs or runs package and project code (install scripts, build scripts, tests), which is arbitrary code; confinement rests on the sandbox alone"},
			},
		},
		{
			name: "a-test-runner-with-a-writable-workdir-is-write-then-execute",
			yaml: "commands:\n  allow: [{run: pytest}, {run: make}]\npaths:\n  write: [/home/user/work/src]\n",
			want: []contracts.Warning{
				{Path: "commands.allow[0]", Msg: "pytest runs code from the workdir, which paths.write[0] (/home/user/work/src) makes writable: the agent can write a test or build file and have it run (write-then-execute); confinement rests on the sandbox alone"},
				{Path: "commands.allow[1]", Msg: "make runs code from the workdir, which paths.write[0] (/home/user/work/src) makes writable: the agent can write a test or build file and have it run (write-then-execute); confinement rests on the sandbox alone"},
			},
		},
		{
			name: "a-test-runner-with-only-an-unrelated-writable-path-raises-nothing",
			yaml: "commands:\n  allow: [{run: pytest}]\npaths:\n  read: [/home/user/work, /tmp/out]\n  write: [/tmp/out]\n",
			want: nil,
		},
		{
			name: "a-program-path-under-a-write-path-is-write-then-execute",
			yaml: "commands:\n  allow: [{run: ./scripts/test.sh}, {run: /usr/bin/ls}]\npaths:\n  write: [/home/user/work/scripts]\n",
			want: []contracts.Warning{
				{Path: "commands.allow[0].run", Msg: "./scripts/test.sh is inside writable paths.write[0] (/home/user/work/scripts): the agent can rewrite it and then run it (write-then-execute)"},
			},
		},
		{
			name: "wrappers-and-exec-flags-are-named",
			yaml: "commands:\n  allow: [{run: timeout, wrapper: true}, {run: find, allow_flags: [-exec, -delete]}, {run: find2}]\n",
			want: []contracts.Warning{
				{Path: "commands.allow[0].wrapper", Msg: "timeout may wrap other programs: each wrapped command is still checked against the other rules, but every allowed program can now be run through timeout, with the arguments and environment it supplies"},
				{Path: "commands.allow[1].allow_flags[0]", Msg: "find -exec is opted in: that flag runs programs or writes files where the command policy cannot see"},
				{Path: "commands.allow[1].allow_flags[1]", Msg: "find -delete is opted in: that flag runs programs or writes files where the command policy cannot see"},
			},
		},
		{
			name: "open-egress-and-broad-allowlist-entries-are-named",
			yaml: "network: {egress: open}\n",
			want: []contracts.Warning{
				{Path: "network.egress", Msg: "open: the sandbox can reach any host, so anything the agent can read can leave; prefer an allowlist"},
			},
		},
		{
			name: "allowlist-entries-that-are-open-or-shared-are-named-and-pypi-is-not",
			yaml: "network: {egress: allowlist, allow: [pypi.org, 0.0.0.0/0, \"*.amazonaws.com\", github.com]}\n",
			want: []contracts.Warning{
				{Path: "network.allow[1]", Msg: "0.0.0.0/0 covers every address: that is open egress"},
				{Path: "network.allow[2]", Msg: "*.amazonaws.com stores anyone's uploads: an agent can send data out through it"},
				{Path: "network.allow[3]", Msg: "github.com stores anyone's uploads: an agent can send data out through it"},
			},
		},
		{
			name: "a-credential-given-to-a-program-that-can-print-it-is-named-and-git-is-not",
			yaml: `commands:
  allow: [{run: git, subcommands: [fetch]}, {run: printenv}, {run: python3}]
credentials:
- {name: GH_TOKEN, from: env:GH, grant: [{run: git, subcommands: [fetch]}, {run: printenv}, {run: python3}]}
`,
			want: []contracts.Warning{
				{Path: "commands.allow[2]", Msg: "python3 is allowed: that is arbitrary code; network and file confinement rest on the sandbox alone"},
				{Path: "credentials[0].grant[1]", Msg: "GH_TOKEN is given to printenv, which can print it or send it anywhere; scrubbing the output is then the only defence"},
				{Path: "credentials[0].grant[2]", Msg: "GH_TOKEN is given to python3, which can print it or send it anywhere; scrubbing the output is then the only defence"},
			},
		},
		{
			name: "timeouts-longer-than-the-sandbox-are-named",
			yaml: "sandbox: {lifetime: 5m}\ncommands: {default_timeout: 1m, max_timeout: 10m}\n",
			want: []contracts.Warning{
				{Path: "commands.max_timeout", Msg: "10m is longer than sandbox.lifetime (5m): a command would be killed with its sandbox first"},
			},
		},
		{
			name: "git-with-a-writable-dot-git-is-write-then-execute-and-with-writable-sources-is-not",
			yaml: "commands:\n  allow: [{run: git, subcommands: [status]}]\npaths:\n  write: [/home/user/work/src, /home/user/work]\n",
			want: []contracts.Warning{
				{Path: "commands.allow[0]", Msg: "git reads /home/user/work/.git/config and runs its hooks, which paths.write[1] (/home/user/work) makes writable: the agent can set core.fsmonitor, core.pager or a hook and have even git status run it (write-then-execute); make only the source directories writable"},
			},
		},
		{
			name: "git-with-only-source-directories-writable-raises-nothing",
			yaml: "commands:\n  allow: [{run: git, subcommands: [status]}]\npaths:\n  write: [/home/user/work/src, /home/user/work/.github]\n",
			want: nil,
		},
		{
			name: "writing-system-directories-or-the-home-directory-is-named",
			yaml: "paths:\n  write: [/usr/local/bin, /etc, /home, /var/tmp, /home/user/work]\n",
			want: []contracts.Warning{
				{Path: "paths.write[0]", Msg: "/usr/local/bin overlaps /usr, which holds programs and libraries: the agent can replace an allowed program (write-then-execute)"},
				{Path: "paths.write[1]", Msg: "/etc overlaps /etc, which holds configuration every program obeys (/etc/ld.so.preload loads code into all of them)"},
				{Path: "paths.write[2]", Msg: "/home covers the home directory /home/user: the agent can write dotfiles (.bashrc, .gitconfig, .npmrc, pip.conf) that allowed programs read and obey"},
			},
		},
		{
			name: "a-rule-made-moot-by-a-wider-rule-for-the-same-program-is-named",
			yaml: "commands:\n  allow: [{run: git, subcommands: [status]}, {run: git}, {run: ls}, {run: ls}, {run: go, subcommands: [test]}, {run: go, subcommands: [build]}]\n",
			want: []contracts.Warning{
				{Path: "commands.allow[4]", Msg: "go is allowed: it installs or runs package and project code (install scripts, build scripts, tests), which is arbitrary code; confinement rests on the sandbox alone"},
				{Path: "commands.allow[0]", Msg: "has no effect: commands.allow[1] already allows git at least as widely"},
				{Path: "commands.allow[3]", Msg: "has no effect: commands.allow[2] already allows ls at least as widely"},
			},
		},
		{
			name: "mac-without-approval-is-named",
			yaml: "mac:\n  runner: {ssh: m@127.0.0.1:22, host_key: \"" + key + "\"}\n  approval: none\n  steps: {build: {argv: [make]}}\n",
			want: []contracts.Warning{
				{Path: "mac.approval", Msg: "none: steps run on the Mac with no human approving their inputs"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, w := mustParse(t, "lint.yaml", minimal+tt.yaml)
			assert.Equal(t, tt.want, w)
		})
	}
}
