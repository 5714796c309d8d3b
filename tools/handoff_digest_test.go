package tools

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
	"github.com/sandbox-mcp/sandbox-mcp/store"
)

const digestContract = `version: 1
task: {id: task-d, owner: o@example.com}
commands: {allow: [{run: echo}]}
mac:
  runner: {ssh: "runner@mac.example.com:22", host_key: "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}
  steps:
    build: {argv: [xcodebuild, build], timeout: 30m, outputs: [build/App.app], env: {CONFIG: Release}}
    test: {argv: [xcodebuild, test]}
`

func parseDigestContract(t *testing.T, edit func(*contracts.Contract)) *contracts.Contract {
	t.Helper()
	c, _, err := contracts.Parse("task.yaml", []byte(digestContract))
	require.NoError(t, err)
	if edit != nil {
		edit(c)
	}
	return c
}

func TestApprovalDigestCoversWhatTheApprovalBinds(t *testing.T) {
	inputs := func() []store.HandoffInput {
		return []store.HandoffInput{{Name: "app.zip", Version: 1, SHA256: "aa", Size: 10}}
	}
	base := approvalDigest(parseDigestContract(t, nil), "build", "r1", inputs(), "SHA256:key")
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, base)

	changed := map[string]func() string{
		"input-bytes": func() string {
			in := inputs()
			in[0].SHA256 = "bb"
			return approvalDigest(parseDigestContract(t, nil), "build", "r1", in, "SHA256:key")
		},
		"input-added": func() string {
			in := append(inputs(), store.HandoffInput{Name: "b", SHA256: "cc", Size: 1})
			return approvalDigest(parseDigestContract(t, nil), "build", "r1", in, "SHA256:key")
		},
		"source-revision": func() string {
			return approvalDigest(parseDigestContract(t, nil), "build", "r2", inputs(), "SHA256:key")
		},
		"another-step": func() string {
			return approvalDigest(parseDigestContract(t, nil), "test", "r1", inputs(), "SHA256:key")
		},
		"step-argv": func() string {
			return approvalDigest(parseDigestContract(t, func(c *contracts.Contract) {
				s := c.Mac.Steps["build"]
				s.Argv = []string{"xcodebuild", "archive"}
				c.Mac.Steps["build"] = s
			}), "build", "r1", inputs(), "SHA256:key")
		},
		"step-env-value": func() string {
			return approvalDigest(parseDigestContract(t, func(c *contracts.Contract) {
				c.Mac.Steps["build"].Env["CONFIG"] = "Debug"
			}), "build", "r1", inputs(), "SHA256:key")
		},
		"step-timeout": func() string {
			return approvalDigest(parseDigestContract(t, func(c *contracts.Contract) {
				s := c.Mac.Steps["build"]
				s.Timeout *= 2
				c.Mac.Steps["build"] = s
			}), "build", "r1", inputs(), "SHA256:key")
		},
		"step-outputs": func() string {
			return approvalDigest(parseDigestContract(t, func(c *contracts.Contract) {
				s := c.Mac.Steps["build"]
				s.Outputs = []string{"build"}
				c.Mac.Steps["build"] = s
			}), "build", "r1", inputs(), "SHA256:key")
		},
		"runner-host-key": func() string {
			return approvalDigest(parseDigestContract(t, func(c *contracts.Contract) {
				c.Mac.Runner.HostKey = "SHA256:BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
			}), "build", "r1", inputs(), "SHA256:key")
		},
		"runner-address": func() string {
			return approvalDigest(parseDigestContract(t, func(c *contracts.Contract) {
				c.Mac.Runner.SSH = "runner@mac-2.example.com:22"
			}), "build", "r1", inputs(), "SHA256:key")
		},
		"client-key": func() string {
			return approvalDigest(parseDigestContract(t, nil), "build", "r1", inputs(), "SHA256:other")
		},
	}
	for name, f := range changed {
		t.Run(name+"-changes-the-digest", func(t *testing.T) {
			assert.NotEqual(t, base, f())
		})
	}

	same := map[string]func() string{
		"same-bytes-re-exported": func() string {
			in := inputs()
			in[0].Version = 7
			return approvalDigest(parseDigestContract(t, nil), "build", "r1", in, "SHA256:key")
		},
		"unrelated-contract-section": func() string {
			return approvalDigest(parseDigestContract(t, func(c *contracts.Contract) {
				c.Commands.Allow = append(c.Commands.Allow, contracts.CommandRule{Run: "ls"})
			}), "build", "r1", inputs(), "SHA256:key")
		},
		"another-step-edited": func() string {
			return approvalDigest(parseDigestContract(t, func(c *contracts.Contract) {
				s := c.Mac.Steps["test"]
				s.Argv = []string{"true"}
				c.Mac.Steps["test"] = s
			}), "build", "r1", inputs(), "SHA256:key")
		},
	}
	for name, f := range same {
		t.Run(name+"-keeps-the-digest", func(t *testing.T) {
			assert.Equal(t, base, f())
		})
	}
}

func TestArtifactNameIsAlwaysValid(t *testing.T) {
	for in, want := range map[[2]string]string{
		{"build", "App.app"}:                "build-App.app",
		{"build", "my file (1).txt"}:        "build-my_file_1_.txt",
		{"build", "..hidden"}:               "build-_hidden",
		{"test", "ünïcode.log"}:             "test-_n_code.log",
		{"sign", string(make([]byte, 300))}: "sign-_",
	} {
		got := artifactName(in[0], in[1])
		assert.Equal(t, want, got)
		assert.True(t, store.ValidName.MatchString(got), got)
	}
}

func TestChangesNamesWhatMoved(t *testing.T) {
	h := store.Handoff{Inputs: []store.HandoffInput{{Name: "a", Version: 1, SHA256: "1111111111111111"}, {Name: "b", Version: 1, SHA256: "22"}},
		Step: store.HandoffStepDef{Name: "build", SHA256: "s1"}}
	d := h
	d.Inputs = []store.HandoffInput{{Name: "a", Version: 2, SHA256: "3333333333333333"}, {Name: "b", Version: 1, SHA256: "22"}}
	d.Step.SHA256 = "s2"
	got := changes(h, d)
	assert.Contains(t, got, "artifact a changed (version 1 sha256 111111111111, now version 2 sha256 333333333333)")
	assert.NotContains(t, got, "artifact b")
	assert.Contains(t, got, "step build changed")
}
