package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/mac/mactest"
)

// handoffContract is a task whose Mac runner is the loopback sshd. Steps
// are ordinary Linux commands standing in for Xcode.
const handoffContract = `version: 1
task:
  id: %[1]s
  owner: owner@example.com
  source: {repo: https://example.com/app, revision: 3f9c2a1}
sandbox:
  backend: local
  lifetime: 10m
  workdir: /home/user/work
commands:
  allow:
    - run: echo
    - run: printenv
paths:
  read: [/home/user/work]
  write: [/home/user/work]
  export: [/home/user/work]
network:
  egress: none
credentials:
  - name: CANARY_TOKEN
    from: env:SANDBOX_MCP_TEST_CANARY
    grant: [{run: printenv}]
mac:
  runner: {ssh: "%[2]s", host_key: "%[3]s"}
  approval: %[4]s
  approval_ttl: %[5]s
  steps:
    build:
      argv: [sh, -c, 'cat inputs/app.txt && mkdir -p dist/more && tr a-z A-Z < inputs/app.txt > dist/upper.txt && echo nested > dist/more/n.txt && echo built']
      timeout: 1m
      outputs: [dist/upper.txt, dist]
    slow:
      argv: [sh, -c, 'echo started; sleep %[6]s & sleep %[6]s; echo never']
      timeout: 2s
    leak:
      argv: [sh, -c, 'echo "the secret is $(cat inputs/secret.txt)"']
      timeout: 1m
    lines:
      argv: [sh, -c, 'for i in 1 2 3 4 5 6 7 8 9 10; do printf "line %%s %%0300d\n" $i 0; sleep 0.4; done']
      timeout: 1m
`

type handoffEnv struct {
	sshd     *mactest.SSHD
	contract string
	state    string
	taskID   string
	marker   string
}

// newHandoffEnv starts sshd and writes the contract; runner, if given,
// returns the contract's mac.runner ssh target and host key instead of the
// sshd's own.
func newHandoffEnv(t *testing.T, taskID, approval, ttl string, runner ...func(*mactest.SSHD) (string, string)) *handoffEnv {
	t.Helper()
	d := mactest.Start(t)
	marker := fmt.Sprintf("%d", 200000+time.Now().UnixNano()%700000)
	// The throwaway runner user's home is shared by every run on this
	// machine: a suffix keeps two runs' workspaces apart.
	taskID += "-" + marker
	target, hostKey := d.Target(), d.HostKey
	if len(runner) > 0 {
		target, hostKey = runner[0](d)
	}
	p := filepath.Join(t.TempDir(), "task.yaml")
	require.NoError(t, os.WriteFile(p, []byte(fmt.Sprintf(handoffContract, taskID, target, hostKey, approval, ttl, marker)), 0o600))
	return &handoffEnv{sshd: d, contract: p, state: t.TempDir(), taskID: taskID, marker: marker}
}

// elicitor answers the server's elicitation requests as a user would.
type elicitor struct {
	mu       sync.Mutex
	messages []string
	answer   mcp.ElicitationResponseAction
	approve  bool
}

func (e *elicitor) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.messages = append(e.messages, req.Params.Message)
	res := &mcp.ElicitationResult{}
	res.Action = e.answer
	if e.answer == mcp.ElicitationResponseActionAccept {
		res.Content = map[string]any{"approve": e.approve}
	}
	return res, nil
}

func (e *elicitor) asked() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.messages...)
}

// start runs the real binary over stdio with the Mac key in its
// environment; with el the client declares the elicitation capability.
func (h *handoffEnv) start(t *testing.T, el *elicitor) *stdioSession {
	t.Helper()
	env := []string{"SANDBOX_MCP_MAC_KEY_FILE=" + h.sshd.KeyFile}
	if el == nil {
		return startStdio(t, h.contract, h.state, env...)
	}
	return startStdioWith(t, h.contract, h.state, env, client.WithElicitationHandler(el))
}

// export writes content in the sandbox and exports it as name.
func export(t *testing.T, s *stdioSession, name, content string) map[string]any {
	t.Helper()
	structured(t, s.call(t, "write_file", map[string]any{"path": name, "content": content}))
	m := structured(t, s.call(t, "export_artifact", map[string]any{"path": name}))
	require.Equal(t, hexSHA(content), m["sha256"])
	return m
}

func hexSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func readResource(t *testing.T, s *stdioSession, uri string) string {
	t.Helper()
	rr, err := s.c.ReadResource(context.Background(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
	require.NoError(t, err, "read %s; server stderr:\n%s", uri, s.stderr.String())
	require.Len(t, rr.Contents, 1)
	tc, ok := rr.Contents[0].(mcp.TextResourceContents)
	require.True(t, ok, "%s is text", uri)
	return tc.Text
}

// record reads a handoff's record through its handoff:// resource.
func record(t *testing.T, s *stdioSession, uri string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(readResource(t, s, uri)), &m))
	return m
}

func handoff(t *testing.T, s *stdioSession, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res := s.callCtx(t, context.Background(), "handoff_to_mac", args, true)
	var m map[string]any
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, &m))
	}
	return res, m
}

func workspaces(t *testing.T, d *mactest.SSHD, taskID string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(d.Home, ".sandbox-mcp", "work", taskID+"-*"))
	require.NoError(t, err)
	return m
}

func checksByName(rec map[string]any) map[string]bool {
	out := map[string]bool{}
	for _, c := range rec["checks"].([]any) {
		c := c.(map[string]any)
		out[c["name"].(string)] = c["passed"].(bool)
	}
	return out
}

// TestHandoffE2EElicitedApprovalRunsAndReturnsOutputs is the whole story:
// an agent exports an artifact, hands it to the loopback Mac runner, the
// user approves through the client, and the step's outputs come back with
// hashes and a complete record. Refusals come first and make no connection.
func TestHandoffE2EElicitedApprovalRunsAndReturnsOutputs(t *testing.T) {
	requireE2E(t)
	env := newHandoffEnv(t, "e2e-handoff", "required", "1h")
	el := &elicitor{answer: mcp.ElicitationResponseActionAccept, approve: true}
	s := env.start(t, el)

	tools, err := s.c.ListTools(context.Background(), mcp.ListToolsRequest{})
	require.NoError(t, err)
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	assert.Contains(t, names, "handoff_to_mac")
	assert.Contains(t, names, "handoff_status")

	content := "hello mac\n"
	export(t, s, "app.txt", content)

	t.Run("refusals-happen-before-any-connection", func(t *testing.T) {
		before := env.sshd.Connections()
		for name, args := range map[string]map[string]any{
			"unknown-step":             {"step": "deploy", "artifacts": []any{"app.txt"}},
			"command-in-step-name":     {"step": "build; rm -rf ~", "artifacts": []any{"app.txt"}},
			"path-in-step-name":        {"step": "../../bin/sh", "artifacts": []any{"app.txt"}},
			"argv-as-step":             {"step": "sh -c id", "artifacts": []any{"app.txt"}},
			"artifact-of-another-task": {"step": "build", "artifacts": []any{"other-task/app.txt"}},
			"artifact-not-exported":    {"step": "build", "artifacts": []any{"secret.txt"}},
			"path-as-artifact":         {"step": "build", "artifacts": []any{"/etc/passwd"}},
			"env-smuggled-as-argument": {"step": "build", "artifacts": []any{"app.txt"}, "env": map[string]any{"DYLD_INSERT_LIBRARIES": "/tmp/x"}},
			"command-smuggled":         {"step": "build", "artifacts": []any{"app.txt"}, "argv": []any{"sh", "-c", "id"}},
		} {
			t.Run(name, func(t *testing.T) {
				res, _ := handoff(t, s, args)
				require.True(t, res.IsError, "refused: %s", resultText(res))
			})
		}
		assert.Equal(t, before, env.sshd.Connections(), "no refused call reached the Mac")
		assert.Empty(t, el.asked(), "nobody was asked to approve a refused call")
		assert.Empty(t, workspaces(t, env.sshd, env.taskID))
	})

	var id string
	t.Run("an-approved-handoff-runs-and-returns-hashed-outputs", func(t *testing.T) {
		before := env.sshd.Connections()
		res, m := handoff(t, s, map[string]any{"step": "build", "artifacts": []any{"app.txt"}, "note": "release build"})
		require.False(t, res.IsError, "%s\nserver stderr:\n%s", resultText(res), s.stderr.String())
		assert.Greater(t, env.sshd.Connections(), before, "the connection counter sees a handoff that runs")
		id = m["handoff_id"].(string)
		assert.Equal(t, "done", m["state"])
		assert.EqualValues(t, 0, m["exit_code"])

		asked := el.asked()
		require.Len(t, asked, 1, "the user was asked once")
		assert.Contains(t, asked[0], m["approval_digest"], "the question shows the digest it approves")
		assert.Contains(t, asked[0], hexSHA(content), "and the input's sha256")
		assert.Contains(t, asked[0], "Step build")

		outs := m["outputs"].([]any)
		require.Len(t, outs, 2)
		upper := outs[0].(map[string]any)
		assert.Equal(t, "build-upper.txt", upper["artifact"])
		assert.Equal(t, hexSHA("HELLO MAC\n"), upper["sha256"], "the output's hash matches the file the step wrote")
		assert.Equal(t, upper["sha256"], upper["remote_sha256"], "hashed on the Mac and again on arrival")
		assert.Equal(t, "HELLO MAC\n", readResource(t, s, upper["uri"].(string)))
		tarOut := outs[1].(map[string]any)
		assert.Equal(t, "build-dist.tar", tarOut["artifact"])
		assert.Equal(t, true, tarOut["archive"])
		assert.Equal(t, tarOut["sha256"], tarOut["remote_sha256"])

		assert.Empty(t, workspaces(t, env.sshd, env.taskID), "the workspace is gone afterwards")
		var progress []string
		s.mu.Lock()
		for _, p := range s.progress {
			progress = append(progress, p.msg)
		}
		s.mu.Unlock()
		assert.Contains(t, strings.Join(progress, ""), "built", "the step's log came back as progress")
	})

	t.Run("the-record-is-complete", func(t *testing.T) {
		require.NotEmpty(t, id)
		rec := record(t, s, "handoff://"+env.taskID+"/"+id)
		assert.Equal(t, id, rec["handoff_id"])
		assert.Equal(t, env.taskID, rec["task_id"])
		assert.Equal(t, "owner@example.com", rec["owner"])
		assert.Equal(t, "3f9c2a1", rec["source_revision"], "the contract's revision by default")
		assert.Equal(t, "done", rec["state"])
		appr := rec["approval"].(map[string]any)
		assert.Equal(t, "elicitation", appr["via"])
		assert.Contains(t, appr["by"], "MCP client e2e")
		assert.Equal(t, rec["approval_digest"], appr["digest"])
		assert.NotEmpty(t, appr["at"])
		in := rec["inputs"].([]any)[0].(map[string]any)
		assert.Equal(t, hexSHA(content), in["sha256"])
		assert.Contains(t, in["staged_path"], env.taskID+"-"+id+"/inputs/app.txt")
		runner := rec["runner"].(map[string]any)
		assert.Equal(t, env.sshd.HostKey, runner["host_key_fingerprint"])
		assert.Equal(t, env.sshd.Target(), runner["ssh"])
		assert.Equal(t, "sha256sum", runner["hash_tool"])
		assert.Equal(t, env.sshd.Signer.PublicKey().Type(), "ssh-ed25519")
		assert.NotEmpty(t, rec["credential_scope"].(map[string]any)["ssh_key_fingerprint"])
		assert.NotEmpty(t, rec["network_policy"])
		step := rec["steps"].([]any)[0].(map[string]any)
		assert.EqualValues(t, 0, step["exit_code"])
		assert.Len(t, step["log_sha256"], 64)
		assert.NotNil(t, step["duration_ms"])
		logText := readResource(t, s, step["log_artifact"].(string))
		assert.Equal(t, "hello mac\nbuilt\n", logText)
		assert.Equal(t, hexSHA(logText), step["log_sha256"], "the log hash is of the log as the Mac wrote it")
		for name, passed := range checksByName(rec) {
			assert.True(t, passed, "check %s passed", name)
		}
		assert.Contains(t, checksByName(rec), "inputs-verified-on-mac")
		assert.Contains(t, checksByName(rec), "host-key-pinned")
		assert.Contains(t, checksByName(rec), "workspace-removed")
		cl := rec["cleanup"].(map[string]any)
		assert.Equal(t, true, cl["workspace_removed"])
		assert.Equal(t, true, cl["processes_gone"])
		var states []string
		for _, h := range rec["history"].([]any) {
			states = append(states, h.(map[string]any)["state"].(string))
		}
		assert.Equal(t, []string{"requested", "pending_approval", "approved", "staging", "running", "cleaning", "done"}, states)

		auditLog, err := os.ReadFile(filepath.Join(env.state, "audit.jsonl"))
		require.NoError(t, err)
		for _, st := range states {
			assert.Contains(t, string(auditLog), `"handoff_id":"`+id+`","state":"`+st+`"`, "every state change is an audit line")
		}
	})

	t.Run("a-declined-approval-runs-nothing", func(t *testing.T) {
		el.mu.Lock()
		el.answer = mcp.ElicitationResponseActionDecline
		el.mu.Unlock()
		export(t, s, "app.txt", "second version\n")
		before := env.sshd.Connections()
		res, m := handoff(t, s, map[string]any{"step": "build", "artifacts": []any{"app.txt"}})
		require.True(t, res.IsError, resultText(res))
		assert.Equal(t, "denied", m["state"])
		assert.Contains(t, resultText(res), "nothing ran")
		assert.Equal(t, before, env.sshd.Connections(), "a declined handoff never connects")
		assert.Len(t, el.asked(), 2)
	})
	t.Run("a-cancelled-approval-runs-nothing", func(t *testing.T) {
		el.mu.Lock()
		el.answer = mcp.ElicitationResponseActionCancel
		el.mu.Unlock()
		before := env.sshd.Connections()
		res, m := handoff(t, s, map[string]any{"step": "build", "artifacts": []any{"app.txt"}})
		require.True(t, res.IsError, resultText(res))
		assert.Equal(t, "denied", m["state"])
		assert.Equal(t, before, env.sshd.Connections())
	})
}

// TestHandoffE2EOutOfBandApproval: a client without elicitation gets
// pending_approval; the owner approves with the CLI while the server runs;
// an input re-exported with other bytes after approval is refused; the
// renewed request runs once approved; deny and expiry run nothing.
func TestHandoffE2EOutOfBandApproval(t *testing.T) {
	requireE2E(t)
	env := newHandoffEnv(t, "e2e-handoff-cli", "required", "1h")
	s := env.start(t, nil)
	bin := buildBinary(t)
	export(t, s, "app.txt", "first\n")
	args := map[string]any{"step": "build", "artifacts": []any{"app.txt"}, "source_revision": "abc123"}
	before := env.sshd.Connections()

	res, m := handoff(t, s, args)
	require.False(t, res.IsError, resultText(res))
	assert.Equal(t, "pending_approval", m["state"])
	first := m["handoff_id"].(string)
	assert.Contains(t, m["message"], "sandbox-mcp handoff approve")

	st := structured(t, s.call(t, "handoff_status", map[string]any{"handoff_id": first}))
	assert.Equal(t, "pending_approval", st["state"])
	for _, bad := range []string{"h-000000000000", "../../store/state.db"} {
		res := s.call(t, "handoff_status", map[string]any{"handoff_id": bad})
		assert.True(t, res.IsError, bad)
		assert.Contains(t, resultText(res), "contract sha256:", "an error names the task and contract")
	}

	out, _, code := runBinary(t, bin, "handoff", "list", "--state", env.state)
	require.Equal(t, 0, code)
	assert.Contains(t, out, first)
	assert.Contains(t, out, "pending_approval")

	t.Run("an-approval-for-another-digest-is-refused-by-the-cli", func(t *testing.T) {
		_, errOut, code := runBinary(t, bin, "handoff", "approve", "--state", env.state, "--digest", "sha256:"+strings.Repeat("0", 64), first)
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "nothing was decided")
	})

	out, errOut, code := runBinary(t, bin, "handoff", "approve", "--state", env.state, "--as", "owner@example.com", first)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, m["approval_digest"])
	st = structured(t, s.call(t, "handoff_status", map[string]any{"handoff_id": first}))
	assert.Equal(t, "approved", st["state"], "the running server picked up the CLI's approval")
	assert.Equal(t, "owner@example.com", st["approved_by"])

	t.Run("an-input-re-exported-after-approval-is-refused", func(t *testing.T) {
		export(t, s, "app.txt", "tampered after approval\n")
		res, m := handoff(t, s, args)
		require.False(t, res.IsError, resultText(res))
		assert.Equal(t, "pending_approval", m["state"], "a new approval is needed")
		assert.NotEqual(t, first, m["handoff_id"])
		assert.Contains(t, m["message"], "artifact app.txt changed")
		old := structured(t, s.call(t, "handoff_status", map[string]any{"handoff_id": first}))
		assert.Equal(t, "expired", old["state"])
		assert.Equal(t, before, env.sshd.Connections(), "nothing reached the Mac")
	})

	var second string
	t.Run("the-renewed-request-runs-once-approved", func(t *testing.T) {
		_, m := handoff(t, s, args)
		second = m["handoff_id"].(string)
		assert.Equal(t, "pending_approval", m["state"], "calling again while pending just reports it")
		_, errOut, code := runBinary(t, bin, "handoff", "approve", "--state", env.state, second)
		require.Equal(t, 0, code, errOut)
		res, m := handoff(t, s, args)
		require.False(t, res.IsError, "%s\n%s", resultText(res), s.stderr.String())
		assert.Equal(t, second, m["handoff_id"])
		assert.Equal(t, "done", m["state"])
		up := m["outputs"].([]any)[0].(map[string]any)
		assert.Equal(t, hexSHA("TAMPERED AFTER APPROVAL\n"), up["sha256"], "the approved bytes ran")
		rec := record(t, s, "handoff://"+env.taskID+"/"+second)
		assert.Equal(t, "cli", rec["approval"].(map[string]any)["via"])
		assert.Equal(t, "abc123", rec["source_revision"])
	})

	t.Run("a-denied-handoff-runs-nothing", func(t *testing.T) {
		export(t, s, "other.txt", "x\n")
		_, m := handoff(t, s, map[string]any{"step": "build", "artifacts": []any{"other.txt"}})
		id := m["handoff_id"].(string)
		_, errOut, code := runBinary(t, bin, "handoff", "deny", "--state", env.state, "--reason", "not today", id)
		require.Equal(t, 0, code, errOut)
		n := env.sshd.Connections()
		st := structured(t, s.call(t, "handoff_status", map[string]any{"handoff_id": id}))
		assert.Equal(t, "denied", st["state"])
		assert.Contains(t, st["message"], "not today")
		assert.Equal(t, n, env.sshd.Connections())
		_, _, code = runBinary(t, bin, "handoff", "approve", "--state", env.state, id)
		assert.Equal(t, 1, code, "a denied handoff cannot be approved afterwards")
	})
	out, _, code = runBinary(t, bin, "handoff", "show", "--state", env.state, second)
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"state": "done"`)
}

func TestHandoffE2EExpiredApprovalRunsNothing(t *testing.T) {
	requireE2E(t)
	env := newHandoffEnv(t, "e2e-handoff-ttl", "required", "1s")
	s := env.start(t, nil)
	bin := buildBinary(t)
	export(t, s, "app.txt", "x\n")
	args := map[string]any{"step": "build", "artifacts": []any{"app.txt"}}
	_, m := handoff(t, s, args)
	id := m["handoff_id"].(string)
	_, errOut, code := runBinary(t, bin, "handoff", "approve", "--state", env.state, id)
	require.Equal(t, 0, code, errOut)
	before := env.sshd.Connections()
	time.Sleep(1500 * time.Millisecond) // past approval_ttl
	res, m := handoff(t, s, args)
	require.False(t, res.IsError, resultText(res))
	assert.Equal(t, "pending_approval", m["state"], "a new approval is needed")
	assert.Contains(t, m["message"], "expired")
	old := structured(t, s.call(t, "handoff_status", map[string]any{"handoff_id": id}))
	assert.Equal(t, "expired", old["state"])
	assert.Equal(t, before, env.sshd.Connections(), "an expired approval runs nothing")
}

// TestHandoffE2ETimeoutAndCanary runs without approval (mac.approval:
// none): a step over its timeout is killed on the Mac, and a credential that
// reaches the Mac's log never appears in what the server writes.
func TestHandoffE2ETimeoutAndCanary(t *testing.T) {
	requireE2E(t)
	env := newHandoffEnv(t, "e2e-handoff-none", "none", "1h")
	s := env.start(t, nil)
	export(t, s, "app.txt", "x\n")

	t.Run("a-step-over-its-timeout-is-killed-on-the-mac", func(t *testing.T) {
		res, m := handoff(t, s, map[string]any{"step": "slow", "artifacts": []any{"app.txt"}})
		require.True(t, res.IsError, resultText(res))
		assert.Equal(t, "failed", m["state"])
		assert.Equal(t, "agent", m["next_owner"])
		step := m["steps"].([]any)[0].(map[string]any)
		assert.Equal(t, true, step["timed_out"])
		assert.Contains(t, step["killed"], "no process of it is left")
		assert.False(t, checksByName(m)["step-within-timeout"])
		assert.NotContains(t, checksByName(m), "step-exit-zero", "a killed step has no exit code to judge")
		assert.True(t, checksByName(m)["workspace-removed"])
		out, _ := exec.Command("pgrep", "-f", "sleep "+env.marker).Output()
		assert.Empty(t, strings.TrimSpace(string(out)), "no process of the step is left on the Mac")
		assert.Empty(t, workspaces(t, env.sshd, env.taskID))
	})

	t.Run("a-canary-credential-never-appears-in-record-or-logs", func(t *testing.T) {
		// The agent gets the credential into a file (printenv is granted
		// it) and hands the file to the Mac, whose step prints it.
		structured(t, s.call(t, "run_command", map[string]any{"command": "printenv CANARY_TOKEN > secret.txt"}))
		structured(t, s.call(t, "export_artifact", map[string]any{"path": "secret.txt"}))
		res, m := handoff(t, s, map[string]any{"step": "leak", "artifacts": []any{"secret.txt"}})
		require.False(t, res.IsError, "%s\n%s", resultText(res), s.stderr.String())
		step := m["steps"].([]any)[0].(map[string]any)
		logText := readResource(t, s, step["log_artifact"].(string))
		assert.Contains(t, logText, "the secret is ", "the step ran and printed")
		assert.NotContains(t, logText, canary)

		rec := readResource(t, s, m["uri"].(string))
		auditLog, err := os.ReadFile(filepath.Join(env.state, "audit.jsonl"))
		require.NoError(t, err)
		s.mu.Lock()
		var progress strings.Builder
		for _, p := range s.progress {
			progress.WriteString(p.msg)
		}
		s.mu.Unlock()
		mirror, err := os.ReadFile(filepath.Join(env.state, "store", "handoffs", env.taskID, m["handoff_id"].(string)+".json"))
		require.NoError(t, err)
		keyBody := strings.Split(string(env.sshd.KeyPEM), "\n")[1]
		for name, text := range map[string]string{
			"record": rec, "audit-log": string(auditLog), "progress": progress.String(), "server-stderr": s.stderr.String(),
			"result": resultText(res), "record-file": string(mirror),
		} {
			assert.NotContains(t, text, canary, "%s holds the canary", name)
			assert.NotContains(t, text, keyBody, "%s holds the Mac key", name)
		}
		assert.Contains(t, progress.String(), "the secret is ", "progress did carry the log")
	})
}

// TestHandoffE2ERunnerFailures: a wrong host key fails before anything is
// sent, with the owner next; a connection cut mid-step is re-established and
// the record is still whole.
func TestHandoffE2ERunnerFailures(t *testing.T) {
	requireE2E(t)
	t.Run("a-wrong-host-key-is-refused", func(t *testing.T) {
		env := newHandoffEnv(t, "e2e-handoff-hostkey", "none", "1h", func(d *mactest.SSHD) (string, string) {
			return d.Target(), "SHA256:" + strings.Repeat("A", 43)
		})
		s := env.start(t, nil)
		export(t, s, "app.txt", "x\n")
		res, m := handoff(t, s, map[string]any{"step": "build", "artifacts": []any{"app.txt"}})
		require.True(t, res.IsError, resultText(res))
		assert.Equal(t, "failed", m["state"])
		assert.Equal(t, "owner@example.com", m["next_owner"], "a runner problem is the owner's")
		assert.False(t, checksByName(m)["host-key-pinned"])
		assert.NotContains(t, checksByName(m), "inputs-verified-on-mac", "no input was sent to an unidentified host")
		assert.Contains(t, resultText(res), "host key does not match")
		assert.Empty(t, workspaces(t, env.sshd, env.taskID), "nothing was created on the Mac")
		assert.NotContains(t, env.sshd.Log(), "Accepted publickey", "the server never authenticated to the wrong host")
	})

	t.Run("a-connection-cut-mid-step-still-ends-with-a-whole-record", func(t *testing.T) {
		var proxy *mactest.Proxy
		env := newHandoffEnv(t, "e2e-handoff-drop", "none", "1h", func(d *mactest.SSHD) (string, string) {
			proxy = mactest.NewProxy(t, d.Addr)
			return d.User + "@" + proxy.Addr, d.HostKey
		})
		s := env.start(t, nil)
		var once sync.Once
		cut := make(chan int, 1)
		s.c.OnNotification(func(n mcp.JSONRPCNotification) {
			msg, _ := n.Params.AdditionalFields["message"].(string)
			// Lines are long, so the redacting writer's hold-back (a few
			// hundred bytes) lets line 2 through while the step runs.
			if n.Method == "notifications/progress" && strings.Contains(msg, "line 2 ") {
				once.Do(func() { cut <- proxy.Cut() })
			}
		})
		export(t, s, "app.txt", "x\n")
		res, m := handoff(t, s, map[string]any{"step": "lines", "artifacts": []any{"app.txt"}})
		require.False(t, res.IsError, "%s\n%s", resultText(res), s.stderr.String())
		select {
		case n := <-cut:
			assert.Equal(t, 1, n, "the test cut the server's connection to the Mac mid-step")
		default:
			t.Fatal("the step's progress never showed line 2, so the connection was not cut")
		}
		assert.Equal(t, "done", m["state"])
		step := m["steps"].([]any)[0].(map[string]any)
		assert.GreaterOrEqual(t, step["reconnects"], float64(1), s.stderr.String())
		var want strings.Builder
		for i := 1; i <= 10; i++ {
			fmt.Fprintf(&want, "line %d %0300d\n", i, 0)
		}
		logText := readResource(t, s, step["log_artifact"].(string))
		assert.Equal(t, want.String(), logText, "every line once, in order")
		assert.Equal(t, hexSHA(want.String()), step["log_sha256"])
		assert.Empty(t, workspaces(t, env.sshd, env.taskID))
	})
}

func TestHandoffCLIAndServeRefuseBadUse(t *testing.T) {
	requireE2E(t)
	bin := buildBinary(t)
	state := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no-subcommand-is-a-usage-error", []string{"handoff"}, 2, "expected list, show, approve or deny"},
		{"state-is-required", []string{"handoff", "list"}, 2, "--state DIR is required"},
		{"unknown-subcommand", []string{"handoff", "run", "--state", state}, 2, `unknown subcommand "run"`},
		{"approve-needs-one-id", []string{"handoff", "approve", "--state", state}, 2, "exactly one HANDOFF_ID"},
		{"unknown-handoff", []string{"handoff", "approve", "--state", state, "h-000000000000"}, 1, "no such handoff"},
		{"show-unknown-handoff", []string{"handoff", "show", "--state", state, "h-000000000000"}, 1, "no such handoff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runBinary(t, bin, tc.args...)
			assert.Equal(t, tc.code, code, stderr)
			assert.Contains(t, stderr, tc.msg)
		})
	}
	t.Run("an-empty-state-lists-nothing", func(t *testing.T) {
		out, stderr, code := runBinary(t, bin, "handoff", "list", "--state", state)
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, 1, strings.Count(out, "\n"), "only the header")
	})

	contract := filepath.Join(t.TempDir(), "task.yaml")
	require.NoError(t, os.WriteFile(contract, []byte(fmt.Sprintf(handoffContract, "cli-task", "runner@127.0.0.1:1", "SHA256:"+strings.Repeat("A", 43), "required", "1h", "1")), 0o600))
	keyDir := t.TempDir()
	loose := filepath.Join(keyDir, "loose")
	require.NoError(t, os.WriteFile(loose, []byte("not read"), 0o644))
	garbage := filepath.Join(keyDir, "garbage")
	require.NoError(t, os.WriteFile(garbage, []byte("not a key"), 0o600))
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"a-mac-contract-without-a-key-does-not-start", nil, "--mac-key FILE or $SANDBOX_MCP_MAC_KEY_FILE"},
		{"a-key-readable-by-others-is-refused", []string{"--mac-key", loose}, "chmod 600"},
		{"a-file-that-is-no-key-is-refused", []string{"--mac-key", garbage}, "mac key " + garbage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"serve", "--contract", contract, "--state", t.TempDir()}, tc.args...)...)
			cmd.Env = append(os.Environ(), "SANDBOX_MCP_TEST_CANARY="+canary, "SANDBOX_MCP_MAC_KEY_FILE=")
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "serve must not start: %s", out)
			assert.Contains(t, string(out), tc.msg)
		})
	}
}
