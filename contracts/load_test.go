package contracts_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

// minimal is the smallest valid contract; tests append sections to it.
const minimal = "version: 1\ntask: {id: t-1}\n"

func mustParse(t *testing.T, name, data string) (*contracts.Contract, []contracts.Warning) {
	t.Helper()
	c, w, err := contracts.Parse(name, []byte(data))
	require.NoError(t, err)
	require.NotNil(t, c)
	return c, w
}

func TestParseAppliesEveryDefault(t *testing.T) {
	c, w := mustParse(t, "min.yaml", minimal)
	assert.Empty(t, w)
	want := &contracts.Contract{
		Version: 1,
		Task:    contracts.Task{ID: "t-1"},
		Sandbox: contracts.Sandbox{
			Backend: contracts.BackendLocal, Template: "base", Lifetime: contracts.Duration(30 * time.Minute),
			OnExpiry: contracts.ExpiryKill, Workdir: "/home/user/work",
		},
		Commands: contracts.Commands{
			DefaultTimeout: contracts.Duration(time.Minute), MaxTimeout: contracts.Duration(10 * time.Minute),
			Allow: []contracts.CommandRule{}, Env: contracts.EnvPolicy{Pass: []string{}},
		},
		Paths:       contracts.Paths{Read: []string{"/home/user/work"}, Write: []string{}, Export: []string{}},
		Network:     contracts.Network{Egress: contracts.EgressNone},
		Credentials: []contracts.Credential{},
		Limits: contracts.Limits{
			OutputBytes: 1 << 20, FileBytes: 10 << 20, ArtifactBytes: 200 << 20, Processes: 256, MemoryBytes: 1 << 30,
		},
	}
	assert.Equal(t, want, c)
}

func TestParseDefaultsFollowTheFile(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, c *contracts.Contract)
	}{
		{"read-defaults-to-a-custom-workdir", "sandbox: {workdir: /src}\n", func(t *testing.T, c *contracts.Contract) {
			assert.Equal(t, []string{"/src"}, c.Paths.Read)
		}},
		{"an-explicit-empty-read-list-stays-empty", "paths: {read: []}\n", func(t *testing.T, c *contracts.Contract) {
			assert.Equal(t, []string{}, c.Paths.Read)
		}},
		{"default-timeout-shrinks-to-a-short-max", "commands: {max_timeout: 20s}\n", func(t *testing.T, c *contracts.Contract) {
			assert.Equal(t, contracts.Duration(20*time.Second), c.Commands.DefaultTimeout)
			assert.Equal(t, contracts.Duration(20*time.Second), c.Commands.MaxTimeout)
		}},
		{"max-timeout-grows-to-a-long-default", "commands: {default_timeout: 20m}\n", func(t *testing.T, c *contracts.Contract) {
			assert.Equal(t, contracts.Duration(20*time.Minute), c.Commands.MaxTimeout)
		}},
		{"mac-gets-approval-ttl-and-step-timeout", "mac:\n  runner: {ssh: m@127.0.0.1:22, host_key: \"SHA256:" + strings.Repeat("A", 43) + "\"}\n  steps: {build: {argv: [make]}}\n",
			func(t *testing.T, c *contracts.Contract) {
				require.NotNil(t, c.Mac)
				assert.Equal(t, "required", c.Mac.Approval)
				assert.Equal(t, contracts.Duration(time.Hour), c.Mac.ApprovalTTL)
				assert.Equal(t, contracts.Duration(30*time.Minute), c.Mac.Steps["build"].Timeout)
			}},
		{"sizes-accept-units-and-plain-bytes", "limits: {output_bytes: 512KiB, file_bytes: 1MB, artifact_bytes: 1GiB, memory_bytes: 4096}\n", func(t *testing.T, c *contracts.Contract) {
			assert.Equal(t, contracts.ByteSize(512<<10), c.Limits.OutputBytes)
			assert.Equal(t, contracts.ByteSize(1_000_000), c.Limits.FileBytes)
			assert.Equal(t, contracts.ByteSize(1<<30), c.Limits.ArtifactBytes)
			assert.Equal(t, contracts.ByteSize(4096), c.Limits.MemoryBytes)
		}},
		{"a-date-like-revision-stays-text", "task: {id: t-1, source: {revision: 2024-01-31}}\n", func(t *testing.T, c *contracts.Contract) {
			require.NotNil(t, c.Task.Source)
			assert.Equal(t, "2024-01-31", c.Task.Source.Revision)
		}},
		{"an-empty-source-is-dropped", "task: {id: t-1, source: {}}\n", func(t *testing.T, c *contracts.Contract) {
			assert.Nil(t, c.Task.Source)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := minimal + tt.yaml
			if strings.HasPrefix(tt.yaml, "task:") {
				data = "version: 1\n" + tt.yaml
			}
			c, _ := mustParse(t, "c.yaml", data)
			tt.check(t, c)
		})
	}
}

func TestParseReportsEveryProblemWithLineColumnAndPath(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "command-line-instead-of-program-names-the-rule",
			yaml: `version: 1
task:
  id: t-1
commands:
  allow:
  - run: pytest
  - run: git
    subcommands: [status]
  - run: /bin/sh -c
`,
			want: []string{`task.yaml:9:5: commands.allow[2].run: must be a program name, got "/bin/sh -c"`},
		},
		{
			name: "several-errors-are-reported-at-once-in-file-order",
			yaml: `version: 2
task: {id: "has space"}
sandbox:
  backend: docker
  lifetime: 30
  workdir: home/user
limits: {output_bytes: 10XB, processes: -1}
`,
			want: []string{
				`task.yaml:1:1: version: must be 1 (the only contract version), got 2`,
				`task.yaml:2:8: task.id: must be a task id: letters, digits, '.', '_' and '-', starting with a letter or digit, at most 128 characters, got "has space"`,
				`task.yaml:4:3: sandbox.backend: must be one of local, e2b; got "docker"`,
				`task.yaml:5:3: sandbox.lifetime: must be a positive duration such as 30s, 10m or 1h30m, got 30`,
				`task.yaml:6:3: sandbox.workdir: must be an absolute path, got "home/user"`,
				`task.yaml:7:10: limits.output_bytes: must be a size from 1 byte to 1TiB: a number of bytes or a value such as 512KiB, 10MiB or 1GiB, got "10XB"`,
				`task.yaml:7:30: limits.processes: must be at least 1, got -1`,
			},
		},
		{
			name: "unknown-keys-are-errors-with-a-suggestion",
			yaml: "version: 1\ntask: {id: t}\ncomands: {}\nsandbox: {lifetme: 1h}\n",
			want: []string{
				`task.yaml:3:1: comands: unknown key; did you mean "commands"? (allowed: commands, credentials, limits, mac, network, paths, sandbox, task, version)`,
				`task.yaml:4:11: sandbox.lifetme: unknown key; did you mean "lifetime"? (allowed: backend, lifetime, on_expiry, template, workdir)`,
			},
		},
		{
			name: "missing-required-keys-are-named",
			yaml: "sandbox: {}\ncredentials:\n  - name: TOKEN\n",
			want: []string{
				`task.yaml:1:1: missing required keys "version", "task"`,
				`task.yaml:3:5: credentials[0]: missing required keys "from", "grant"`,
			},
		},
		{
			name: "wrong-types-say-what-was-expected",
			yaml: "version: 1\ntask: {id: t}\ncommands: {allow: {run: ls}}\npaths: {read: /home}\nnetwork: {egress: [none]}\n",
			want: []string{
				`task.yaml:3:12: commands.allow: must be a list, got a mapping`,
				`task.yaml:4:9: paths.read: must be a list, got "/home"`,
				`task.yaml:5:11: network.egress: must be one of none, allowlist, open; got a list`,
			},
		},
		{
			name: "an-unquoted-number-where-text-belongs-says-to-quote-it",
			yaml: "version: 1\ntask: {id: 1842, owner: true}\ncommands: {allow: [{run: 7z}, {run: 42}]}\n",
			want: []string{
				`task.yaml:2:8: task.id: must be a task id: letters, digits, '.', '_' and '-', starting with a letter or digit, at most 128 characters, got 1842 (to mean the text, quote it: "1842")`,
				`task.yaml:2:18: task.owner: must be a string, got true (to mean the text, quote it: "true")`,
				`task.yaml:3:32: commands.allow[1].run: must be a program name, got 42 (to mean the text, quote it: "42")`,
			},
		},
		{
			name: "long-values-are-shortened-in-messages",
			yaml: "version: 1\ntask: {id: t}\nsandbox: {template: \"" + strings.Repeat("é", 100) + "\"}\n",
			want: []string{
				`task.yaml:3:11: sandbox.template: must be a template name: letters, digits, '.', '_', ':', '/' and '-', at most 128 characters, got "` + strings.Repeat("é", 77) + `..."`,
			},
		},
		{
			name: "durations-must-be-positive-and-fit",
			yaml: "version: 1\ntask: {id: t}\nsandbox: {lifetime: 0s}\ncommands: {default_timeout: 99999999999h, max_timeout: 10 minutes}\n",
			want: []string{
				`task.yaml:3:11: sandbox.lifetime: must be a positive duration such as 30s, 10m or 1h30m, got "0s"`,
				`task.yaml:4:12: commands.default_timeout: must be a positive duration such as 30s, 10m or 1h30m, got "99999999999h"`,
				`task.yaml:4:43: commands.max_timeout: must be a positive duration such as 30s, 10m or 1h30m, got "10 minutes"`,
			},
		},
		{
			name: "sizes-above-1tib-are-refused",
			yaml: "version: 1\ntask: {id: t}\nlimits: {memory_bytes: 2TiB, file_bytes: 2199023255552}\n",
			want: []string{
				`task.yaml:3:10: limits.memory_bytes: must be a size from 1 byte to 1TiB: a number of bytes or a value such as 512KiB, 10MiB or 1GiB, got "2TiB"`,
				`task.yaml:3:30: limits.file_bytes: must be a size from 1 byte to 1TiB: a number of bytes or a value such as 512KiB, 10MiB or 1GiB, got 2199023255552`,
			},
		},
		{
			name: "credential-from-and-name-are-checked",
			yaml: "version: 1\ntask: {id: t}\ncredentials:\n- {name: 1TOKEN, from: vault:x, grant: []}\n",
			want: []string{
				`task.yaml:4:4: credentials[0].name: must be an environment variable name: letters, digits and '_', not starting with a digit, got "1TOKEN"`,
				`task.yaml:4:18: credentials[0].from: must be env:NAME or file:/absolute/path, got "vault:x"`,
				`task.yaml:4:33: credentials[0].grant: must not be empty`,
			},
		},
		{
			name: "mac-runner-and-steps-are-checked",
			yaml: `version: 1
task: {id: t}
mac:
  runner: {ssh: mac-1.example.com, host_key: "MD5:aa"}
  approval: maybe
  steps:
    Build: {argv: [xcodebuild]}
    test: {argv: [], outputs: [/abs]}
`,
			want: []string{
				`task.yaml:4:12: mac.runner.ssh: must be user@host:port, such as runner@mac-1.example.com:22, got "mac-1.example.com"`,
				`task.yaml:4:36: mac.runner.host_key: must be a host-key fingerprint SHA256:<43 base64 characters>, as printed by ssh-keygen -lf, got "MD5:aa"`,
				`task.yaml:5:3: mac.approval: must be one of required, none; got "maybe"`,
				`task.yaml:7:5: mac.steps.Build: must be a step name: lower-case letters, digits, '_' and '-', starting with a letter, at most 63 characters, got "Build"`,
				`task.yaml:8:12: mac.steps.test.argv: must not be empty`,
				`task.yaml:8:32: mac.steps.test.outputs[0]: must be a relative path inside the step's workspace, got "/abs"`,
			},
		},
		{
			name: "duplicate-list-items-point-at-the-repeat",
			yaml: "version: 1\ntask: {id: t}\npaths:\n  read:\n  - /a\n  - /b\n  - /a\n",
			want: []string{`task.yaml:7:5: paths.read[2]: duplicate of paths.read[0]`},
		},
		{
			name: "default-timeout-above-max-is-refused",
			yaml: "version: 1\ntask: {id: t}\ncommands: {default_timeout: 5m, max_timeout: 1m}\n",
			want: []string{`task.yaml:3:12: commands.default_timeout: 5m is longer than commands.max_timeout (1m); a command may never ask for more than the maximum`},
		},
		{
			name: "paths-must-be-clean",
			yaml: "version: 1\ntask: {id: t}\nsandbox: {workdir: /home/user/work/}\npaths:\n  read: [/home/user/../etc, /tmp//x]\n",
			want: []string{
				`task.yaml:3:11: sandbox.workdir: must be a clean absolute path; did you mean "/home/user/work"?`,
				`task.yaml:5:10: paths.read[0]: must be a clean absolute path; did you mean "/home/etc"?`,
				`task.yaml:5:29: paths.read[1]: must be a clean absolute path; did you mean "/tmp/x"?`,
			},
		},
		{
			name: "export-outside-read-is-refused-and-the-prefix-is-separator-aware",
			yaml: "version: 1\ntask: {id: t}\npaths:\n  read: [/work]\n  export: [/work/dist, /work2/dist]\n",
			want: []string{`task.yaml:5:24: paths.export[1]: /work2/dist is not inside any paths.read entry; exporting a file reads it out of the sandbox, so it must be readable`},
		},
		{
			name: "program-paths-must-match-only-themselves",
			yaml: "version: 1\ntask: {id: t}\ncommands:\n  allow:\n  - run: ./scripts/../x\n  - run: ..\n  - run: bin/\n  - run: ./scripts/test.sh\n  - run: /usr/bin/make\n  - run: /\n",
			want: []string{
				`task.yaml:5:5: commands.allow[0].run: must be a clean path to a program (no '..', '//' or trailing '/'), got "./scripts/../x"`,
				`task.yaml:6:5: commands.allow[1].run: must be a program name, got ".."`,
				`task.yaml:7:5: commands.allow[2].run: must be a clean path to a program (no '..', '//' or trailing '/'), got "bin/"`,
				`task.yaml:10:5: commands.allow[5].run: must be a clean path to a program (no '..', '//' or trailing '/'), got "/"`,
			},
		},
		{
			name: "reserved-env-names-are-refused-for-pass-and-credentials",
			yaml: "version: 1\ntask: {id: t}\ncommands:\n  allow: [{run: git}]\n  env: {pass: [CI, LD_PRELOAD, PATH]}\ncredentials:\n- {name: GIT_ASKPASS, from: env:X, grant: [{run: git}]}\n",
			want: []string{
				`task.yaml:5:20: commands.env.pass[1]: LD_PRELOAD may never be set by the agent: it is reserved because it changes which program runs, what code it loads or where it connects (see ReservedEnvName)`,
				`task.yaml:5:32: commands.env.pass[2]: PATH may never be set by the agent: it is reserved because it changes which program runs, what code it loads or where it connects (see ReservedEnvName)`,
				`task.yaml:7:4: credentials[0].name: GIT_ASKPASS cannot be a credential name: it is reserved because it changes which program runs, what code it loads or where it connects (see ReservedEnvName)`,
			},
		},
		{
			name: "credentials-are-unique-granted-to-allowed-programs-and-not-agent-settable",
			yaml: `version: 1
task: {id: t}
commands:
  allow:
  - {run: git, subcommands: [fetch, status]}
  env: {pass: [TOKEN]}
credentials:
- {name: TOKEN, from: env:A, grant: [{run: git, subcommands: [push]}]}
- {name: TOKEN, from: "file:/run/../secret", grant: [{run: curl}]}
`,
			want: []string{
				`task.yaml:8:4: credentials[0].name: TOKEN is also in commands.env.pass; the agent could replace the credential with its own value`,
				`task.yaml:8:63: credentials[0].grant[0].subcommands[0]: git push is not allowed by commands.allow (allowed: fetch, status)`,
				`task.yaml:9:4: credentials[1].name: TOKEN is also in commands.env.pass; the agent could replace the credential with its own value`,
				`task.yaml:9:4: credentials[1].name: duplicate credential name TOKEN (also credentials[0])`,
				`task.yaml:9:17: credentials[1].from: must be a clean absolute path; did you mean "file:/secret"?`,
				`task.yaml:9:55: credentials[1].grant[0].run: curl is not in commands.allow; TOKEN can be granted only to an allowed program`,
			},
		},
		{
			name: "network-allow-needs-allowlist-and-real-hosts",
			yaml: "version: 1\ntask: {id: t}\nnetwork:\n  egress: allowlist\n  allow: [\"*\", 10.0.0.1, 10.0.0.1/8, \"*.com\", bücher.de, pypi.org]\n",
			want: []string{
				`task.yaml:5:11: network.allow[0]: must be a host name (pypi.org), a *.domain wildcard or a CIDR (10.0.0.0/8), got "*"`,
				`task.yaml:5:47: network.allow[4]: must be a host name (pypi.org), a *.domain wildcard or a CIDR (10.0.0.0/8), got "bücher.de"`,
			},
		},
		{
			name: "network-allow-semantics-after-the-schema",
			yaml: "version: 1\ntask: {id: t}\nnetwork:\n  egress: allowlist\n  allow: [10.0.0.1, 10.0.0.1/8, \"*.com\", pypi.org]\n",
			want: []string{
				`task.yaml:5:11: network.allow[0]: an IP address must be written as a CIDR, such as 10.0.0.1/32`,
				`task.yaml:5:21: network.allow[1]: CIDR has host bits set; did you mean "10.0.0.0/8"?`,
				`task.yaml:5:33: network.allow[2]: a wildcard must name a domain, such as *.example.com, got "*.com"`,
			},
		},
		{
			name: "allowlist-without-hosts-and-hosts-without-allowlist-are-refused",
			yaml: "version: 1\ntask: {id: t}\nnetwork: {egress: allowlist}\n",
			want: []string{`task.yaml:3:11: network.egress: allowlist needs at least one host in network.allow (or use egress: none)`},
		},
		{
			name: "hosts-without-allowlist-are-refused",
			yaml: "version: 1\ntask: {id: t}\nnetwork: {allow: [pypi.org]}\n",
			want: []string{`task.yaml:3:11: network.allow: is used only with egress: allowlist (egress is none)`},
		},
		{
			name: "mac-semantics-port-and-outputs",
			yaml: `version: 1
task: {id: t}
mac:
  runner: {ssh: m@127.0.0.1:70000, host_key: "SHA256:` + strings.Repeat("A", 43) + `"}
  steps:
    build: {argv: [make], outputs: [a/../../b, ok/dir]}
`,
			want: []string{
				`task.yaml:4:12: mac.runner.ssh: port must be between 1 and 65535, got "m@127.0.0.1:70000"`,
				`task.yaml:6:37: mac.steps.build.outputs[0]: must be a clean relative path inside the step's workspace, without '..', got "a/../../b"`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, strings.Join(tt.want, "\n"), parseErr(t, "task.yaml", tt.yaml))
		})
	}
}

func TestParseGivesJSONLineAndColumn(t *testing.T) {
	data := `{
  "version": 1,
  "task": {"id": "t"},
  "commands": {
    "allow": [
      {"run": "pytest"},
      {"run": "/bin/sh -c", "wrapper": "yes"}
    ]
  },
  "limits": {"procs": 3}
}`
	want := []string{
		`task.json:7:8: commands.allow[1].run: must be a program name, got "/bin/sh -c"`,
		`task.json:7:29: commands.allow[1].wrapper: must be true or false, got "yes"`,
		`task.json:10:14: limits.procs: unknown key (allowed: artifact_bytes, file_bytes, memory_bytes, output_bytes, processes)`,
	}
	assert.Equal(t, strings.Join(want, "\n"), parseErr(t, "task.json", data))
}

func TestParseTellsJSONFromYAML(t *testing.T) {
	t.Run("json-content-under-another-name-is-read-as-json", func(t *testing.T) {
		c, _ := mustParse(t, "contract", `{"version": 1, "task": {"id": "t"}}`)
		assert.Equal(t, "t", c.Task.ID)
	})
	t.Run("a-yaml-flow-mapping-is-read-as-yaml", func(t *testing.T) {
		c, _ := mustParse(t, "contract", `{version: 1, task: {id: t}}`)
		assert.Equal(t, "t", c.Task.ID)
	})
	t.Run("a-json-file-must-be-strict-json", func(t *testing.T) {
		assert.Equal(t, "c.json:1:2: invalid JSON: invalid character 'v' looking for beginning of object key string",
			parseErr(t, "c.json", `{version: 1, task: {id: t}}`))
	})
	t.Run("a-json-file-may-start-with-a-byte-order-mark", func(t *testing.T) {
		c, _ := mustParse(t, "c.json", "\ufeff"+`{"version": 1, "task": {"id": "t"}}`)
		assert.Equal(t, "t", c.Task.ID)
	})
	t.Run("a-json-schema-key-is-accepted-and-ignored", func(t *testing.T) {
		c, _ := mustParse(t, "c.json", `{"$schema": "../schema.json", "version": 1, "task": {"id": "t"}}`)
		plain, _ := mustParse(t, "c.json", `{"version": 1, "task": {"id": "t"}}`)
		assert.Equal(t, plain.Hash(), c.Hash())
	})
}

func TestHashIsStableAcrossSpellings(t *testing.T) {
	yamlDoc := `version: 1
task: {id: t-9, owner: a@example.com}
commands:
  allow:
  - {run: git, subcommands: [status, diff]}
  - run: pytest
limits: {output_bytes: 1MiB, processes: 256}
network: {egress: allowlist, allow: [pypi.org]}
`
	reordered := `network: {allow: [pypi.org], egress: allowlist}
limits: {processes: 256, output_bytes: 1048576}
commands:
  allow:
  - {subcommands: [status, diff], run: git}
  - run: pytest
task: {owner: a@example.com, id: t-9}
version: 1
`
	jsonDoc := `{"version": 1, "task": {"id": "t-9", "owner": "a@example.com"},
 "commands": {"allow": [{"run": "git", "subcommands": ["status", "diff"]}, {"run": "pytest"}]},
 "limits": {"output_bytes": "1MiB"}, "network": {"egress": "allowlist", "allow": ["pypi.org"]},
 "sandbox": {"backend": "local", "lifetime": "30m", "workdir": "/home/user/work"}}`
	a, _ := mustParse(t, "a.yaml", yamlDoc)
	b, _ := mustParse(t, "b.yaml", reordered)
	c, _ := mustParse(t, "c.json", jsonDoc)
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, a.Hash())
	assert.Equal(t, a.Hash(), b.Hash(), "key order must not matter")
	assert.Equal(t, a.Hash(), c.Hash(), "YAML and JSON, units and spelled-out defaults must not matter")

	changed, _ := mustParse(t, "d.yaml", strings.Replace(yamlDoc, "[status, diff]", "[status, diff, log]", 1))
	assert.NotEqual(t, a.Hash(), changed.Hash(), "a different contract must hash differently")
	reordered2, _ := mustParse(t, "e.yaml", strings.Replace(yamlDoc, "[status, diff]", "[diff, status]", 1))
	assert.NotEqual(t, a.Hash(), reordered2.Hash(), "list order is content (rules are referred to by index)")
}

func TestHashSurvivesAJSONRoundTrip(t *testing.T) {
	paths, err := filepath.Glob("examples/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			c, _, err := contracts.Load(p)
			require.NoError(t, err)
			out, err := json.Marshal(c)
			require.NoError(t, err)
			again, _, err := contracts.Parse("again.json", out)
			require.NoError(t, err, "%s", out)
			assert.Equal(t, c, again)
			assert.Equal(t, c.Hash(), again.Hash())
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	t.Run("a-file-loads", func(t *testing.T) {
		p := filepath.Join(dir, "ok.yaml")
		require.NoError(t, os.WriteFile(p, []byte(minimal), 0o600))
		c, _, err := contracts.Load(p)
		require.NoError(t, err)
		assert.Equal(t, "t-1", c.Task.ID)
	})
	t.Run("errors-name-the-file-as-given", func(t *testing.T) {
		p := filepath.Join(dir, "bad.yaml")
		require.NoError(t, os.WriteFile(p, []byte("version: 1\n"), 0o600))
		_, _, err := contracts.Load(p)
		assert.EqualError(t, err, p+`:1:1: missing required key "task"`)
	})
	t.Run("errors-as-finds-the-first-field-error", func(t *testing.T) {
		_, _, err := contracts.Parse("c.yaml", []byte("version: 1\ntask: {id: t}\nsandbox: {backend: x, on_expiry: y}\n"))
		var fe *contracts.FieldError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, contracts.FieldError{File: "c.yaml", Line: 3, Col: 11, Path: "sandbox.backend", Msg: `must be one of local, e2b; got "x"`}, *fe)
	})
	t.Run("a-missing-file-is-an-error", func(t *testing.T) {
		_, _, err := contracts.Load(filepath.Join(dir, "nope.yaml"))
		assert.ErrorIs(t, err, os.ErrNotExist)
	})
	t.Run("a-directory-is-refused", func(t *testing.T) {
		_, _, err := contracts.Load(dir)
		assert.EqualError(t, err, "contracts: "+dir+" is not a regular file")
	})
	t.Run("an-endless-device-is-refused-without-reading-it", func(t *testing.T) {
		_, _, err := contracts.Load("/dev/zero")
		assert.EqualError(t, err, "contracts: /dev/zero is not a regular file")
	})
	t.Run("a-file-over-the-limit-is-refused", func(t *testing.T) {
		p := filepath.Join(dir, "big.yaml")
		require.NoError(t, os.WriteFile(p, []byte(minimal+"#"+strings.Repeat("x", 2*contracts.MaxSize)), 0o600))
		_, _, err := contracts.Load(p)
		assert.EqualError(t, err, p+": contract is 1048577 bytes; the limit is 1048576 (1 MiB)")
	})
}

func TestHashOfTheJSONQuickstartMatchesTheYAML(t *testing.T) {
	y, _, err := contracts.Load("examples/quickstart.yaml")
	require.NoError(t, err)
	j, _, err := contracts.Load("../testdata/contracts/quickstart.json")
	require.NoError(t, err)
	assert.Equal(t, y, j)
	assert.Equal(t, y.Hash(), j.Hash())
}
