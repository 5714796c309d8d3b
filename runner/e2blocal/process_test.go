package e2blocal

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/api"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/process"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/process/processconnect"
)

func marker(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	// A sleep duration nobody else uses: "1000.<8 random digits>"; fixed
	// width, so one marker is never a substring of another.
	return fmt.Sprintf("1000.%08d", (uint32(b[0])<<16|uint32(b[1])<<8|uint32(b[2]))%100000000)
}

func TestProcessStart(t *testing.T) {
	requireJail(t)
	ctx := context.Background()
	e := newEnv(t)
	sb := e.create(api.NewSandbox{EnvVars: &api.EnvVars{"SANDBOX_VAR": "from-sandbox", "OVERRIDDEN": "sandbox"}})

	for _, codec := range []struct {
		name string
		json bool
	}{{"connect-json", true}, {"connect-binary", false}} {
		pc := e.processClient(sb, codec.json)
		t.Run(codec.name, func(t *testing.T) {
			t.Run("echo-hi-streams-start-data-end", func(t *testing.T) {
				r := run(ctx, pc, "echo hi")
				require.NoError(t, r.err)
				assert.Equal(t, "hi\n", r.stdout)
				assert.Equal(t, []string{"start", "data", "end"}, r.events)
				assert.NotZero(t, r.pid)
				require.NotNil(t, r.end)
				assert.Equal(t, int32(0), r.end.ExitCode)
				assert.True(t, r.end.Exited)
				assert.Equal(t, "exit status 0", r.end.Status)
				assert.Nil(t, r.end.Error)
			})
			t.Run("stdout-stderr-and-exit-code-are-kept-apart", func(t *testing.T) {
				r := run(ctx, pc, "echo out; echo err >&2; exit 3")
				require.NoError(t, r.err)
				assert.Equal(t, "out\n", r.stdout)
				assert.Equal(t, "err\n", r.stderr)
				assert.Equal(t, int32(3), r.end.ExitCode)
				assert.Equal(t, "exit status 3", r.end.Status)
				require.NotNil(t, r.end.Error)
			})
			t.Run("environment-layers-in-order", func(t *testing.T) {
				r := run(ctx, pc, `echo "$HOME $USER $LOGNAME $SANDBOX_VAR $OVERRIDDEN $REQ"; id -un; env | grep -c '^PATH='; printenv PATH`, func(req *connect.Request[process.StartRequest]) {
					req.Msg.Process.Envs = map[string]string{"OVERRIDDEN": "request", "REQ": "r", "PATH": "/opt/x:/usr/bin:/bin"}
					// Not a login shell: /etc/profile would reset PATH.
					req.Msg.Process.Args = req.Msg.Process.Args[1:]
				})
				require.NoError(t, r.err)
				assert.Equal(t, "/home/user user user from-sandbox request r\nuser\n1\n/opt/x:/usr/bin:/bin\n", r.stdout)
			})
			t.Run("cwd-resolves-relative-to-home", func(t *testing.T) {
				r := run(ctx, pc, "mkdir -p sub && echo ok")
				require.NoError(t, r.err)
				r = run(ctx, pc, "pwd", func(req *connect.Request[process.StartRequest]) { req.Msg.Process.Cwd = ptr("sub") })
				require.NoError(t, r.err)
				assert.Equal(t, "/home/user/sub\n", r.stdout)
			})
			t.Run("large-output-arrives-whole-in-chunks-of-at-most-32KiB", func(t *testing.T) {
				stream, err := pc.Start(ctx, connect.NewRequest(&process.StartRequest{
					Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", "head -c 1000000 /dev/zero"}},
				}))
				require.NoError(t, err)
				total := 0
				for stream.Receive() {
					if d := stream.Msg().GetEvent().GetData(); d != nil {
						assert.LessOrEqual(t, len(d.GetStdout()), 32<<10)
						total += len(d.GetStdout())
					}
				}
				require.NoError(t, stream.Err())
				assert.Equal(t, 1000000, total)
			})
		})
	}

	pc := e.processClient(sb, true)
	t.Run("first-data-arrives-before-the-command-ends", func(t *testing.T) {
		stream, err := pc.Start(ctx, connect.NewRequest(&process.StartRequest{
			Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", "echo first; read -t 30 x; echo second"}},
			Tag:     ptr("waiter"),
		}))
		require.NoError(t, err)
		defer stream.Close()
		require.True(t, stream.Receive())
		pid := stream.Msg().GetEvent().GetStart().GetPid()
		require.NotZero(t, pid)
		require.True(t, stream.Receive())
		assert.Equal(t, "first\n", string(stream.Msg().GetEvent().GetData().GetStdout()), "data must stream while the command still runs")

		list, err := pc.List(ctx, connect.NewRequest(&process.ListRequest{}))
		require.NoError(t, err)
		require.Len(t, list.Msg.Processes, 1)
		assert.Equal(t, "waiter", list.Msg.Processes[0].GetTag())
		assert.Equal(t, pid, list.Msg.Processes[0].GetPid())

		// Re-attach by tag, then feed stdin (stdin defaults to open).
		attached, err := pc.Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: "waiter"}}}))
		require.NoError(t, err)
		defer attached.Close()
		require.True(t, attached.Receive())
		assert.Equal(t, pid, attached.Msg().GetEvent().GetStart().GetPid())

		_, err = pc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{
			Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}},
			Input:   &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("go\n")}},
		}))
		require.NoError(t, err)
		var rest strings.Builder
		var end *process.ProcessEvent_EndEvent
		for stream.Receive() {
			rest.Write(stream.Msg().GetEvent().GetData().GetStdout())
			if en := stream.Msg().GetEvent().GetEnd(); en != nil {
				end = en
			}
		}
		require.NoError(t, stream.Err())
		assert.Equal(t, "second\n", rest.String())
		require.NotNil(t, end)
		var attachedOut strings.Builder
		for attached.Receive() {
			attachedOut.Write(attached.Msg().GetEvent().GetData().GetStdout())
		}
		assert.Equal(t, "second\n", attachedOut.String(), "the re-attached stream sees the same output")
	})

	t.Run("send-signal-kills-and-reports-signal", func(t *testing.T) {
		m := marker(t)
		stream, err := pc.Start(ctx, connect.NewRequest(&process.StartRequest{
			Process: &process.ProcessConfig{Cmd: "/bin/sleep", Args: []string{m}},
		}))
		require.NoError(t, err)
		defer stream.Close()
		require.True(t, stream.Receive())
		pid := stream.Msg().GetEvent().GetStart().GetPid()
		_, err = pc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{
			Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}},
			Signal:  process.Signal_SIGNAL_SIGKILL,
		}))
		require.NoError(t, err)
		var end *process.ProcessEvent_EndEvent
		for stream.Receive() {
			if en := stream.Msg().GetEvent().GetEnd(); en != nil {
				end = en
			}
		}
		require.NotNil(t, end)
		assert.Equal(t, int32(-1), end.ExitCode)
		assert.False(t, end.Exited)
		assert.Equal(t, "signal: killed", end.Status)
		waitGone(t, m)

		_, err = pc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{
			Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}},
			Signal:  process.Signal_SIGNAL_SIGKILL,
		}))
		assert.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "a finished process is not_found")
	})

	t.Run("deadline-kills-the-command-and-its-background-children", func(t *testing.T) {
		m := marker(t)
		// The header alone, no client-side deadline: the server must
		// enforce it and report deadline_exceeded, never a plain end.
		done := make(chan result, 1)
		go func() {
			done <- run(ctx, pc, fmt.Sprintf("sleep 1%s & sleep %s", m, m), func(req *connect.Request[process.StartRequest]) {
				req.Header().Set("Connect-Timeout-Ms", "1500")
			})
		}()
		require.Eventually(t, func() bool { return len(procsWith(m)) >= 2 }, 10*time.Second, 10*time.Millisecond,
			"the command and its background child must both start")
		r := <-done
		assert.Equal(t, connect.CodeDeadlineExceeded, connect.CodeOf(r.err), "%v", r.err)
		waitGone(t, m)
	})

	t.Run("client-disconnect-does-not-kill-the-command", func(t *testing.T) {
		m := marker(t)
		cctx, cancel := context.WithCancel(ctx)
		stream, err := pc.Start(cctx, connect.NewRequest(&process.StartRequest{
			Process: &process.ProcessConfig{Cmd: "/bin/sleep", Args: []string{m}},
		}))
		require.NoError(t, err)
		require.True(t, stream.Receive())
		pid := stream.Msg().GetEvent().GetStart().GetPid()
		cancel()
		stream.Close()
		require.Never(t, func() bool { return len(procsWith(m)) == 0 }, 300*time.Millisecond, 20*time.Millisecond)
		_, err = pc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{
			Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}},
			Signal:  process.Signal_SIGNAL_SIGTERM,
		}))
		require.NoError(t, err)
		waitGone(t, m)
	})

	t.Run("keepalives-fill-silence", func(t *testing.T) {
		r := run(ctx, pc, "sleep 2.5; echo done", func(req *connect.Request[process.StartRequest]) {
			req.Header().Set("Keepalive-Ping-Interval", "1")
		})
		require.NoError(t, r.err)
		assert.GreaterOrEqual(t, r.keepalives, 1)
		assert.Equal(t, "start", r.events[0])
		assert.Equal(t, "end", r.events[len(r.events)-1])
	})

	t.Run("bad-input-is-an-error-not-a-crash", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			req  *process.StartRequest
			code connect.Code
		}{
			{"empty-cmd", &process.StartRequest{Process: &process.ProcessConfig{}}, connect.CodeInvalidArgument},
			{"no-process", &process.StartRequest{}, connect.CodeInvalidArgument},
			{"missing-program", &process.StartRequest{Process: &process.ProcessConfig{Cmd: "/nonexistent/prog"}}, connect.CodeInvalidArgument},
			{"missing-cwd", &process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/true", Cwd: ptr("/home/user/nope")}}, connect.CodeInvalidArgument},
			{"bad-env-name", &process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/true", Envs: map[string]string{"A=B": "c"}}}, connect.CodeInvalidArgument},
			{"pty", &process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/true"}, Pty: &process.PTY{}}, connect.CodeUnimplemented},
			{"command-over-1MiB", &process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/true", Args: []string{strings.Repeat("a", 2<<20)}}}, connect.CodeInvalidArgument},
			{"message-over-4MiB", &process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/true", Args: []string{strings.Repeat("a", 5<<20)}}}, connect.CodeResourceExhausted},
		} {
			t.Run(tc.name, func(t *testing.T) {
				stream, err := pc.Start(ctx, connect.NewRequest(tc.req))
				if err == nil {
					for stream.Receive() {
					}
					err = stream.Err()
				}
				assert.Equal(t, tc.code, connect.CodeOf(err), "%v", err)
			})
		}
	})
}

func TestProcessUsers(t *testing.T) {
	requireJail(t)
	ctx := context.Background()
	e := newEnv(t)
	sb := e.create(api.NewSandbox{})
	for _, tc := range []struct {
		name string
		user string
		code connect.Code
	}{
		{"no-user-means-user", "", 0},
		{"user-is-accepted", "user", 0},
		{"root-is-refused-with-a-reason", "root", connect.CodePermissionDenied},
		{"unknown-user-is-unauthenticated", "mallory", connect.CodeUnauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := processconnect.NewProcessClient(&http.Client{Transport: envdTransport{id: sb.SandboxID, token: tokenOf(sb), user: tc.user}}, e.ts.URL)
			r := run(ctx, pc, "id -un")
			if tc.code == 0 {
				require.NoError(t, r.err)
				assert.Equal(t, "user\n", r.stdout)
				return
			}
			assert.Equal(t, tc.code, connect.CodeOf(r.err), "%v", r.err)
		})
	}
}

func TestEnvdAccess(t *testing.T) {
	requireJail(t)
	ctx := context.Background()
	e := newEnv(t)
	sb := e.create(api.NewSandbox{})
	for _, tc := range []struct {
		name  string
		id    string
		token string
		code  connect.Code
	}{
		{"right-token-passes", sb.SandboxID, tokenOf(sb), 0},
		{"missing-token-is-unauthenticated", sb.SandboxID, "", connect.CodeUnauthenticated},
		{"another-token-is-unauthenticated", sb.SandboxID, strings.Repeat("0", 64), connect.CodeUnauthenticated},
		{"unknown-sandbox-is-unavailable", "i00000000000000000000", tokenOf(sb), connect.CodeUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := processconnect.NewProcessClient(&http.Client{Transport: envdTransport{id: tc.id, token: tc.token, user: "user"}}, e.ts.URL, connect.WithProtoJSON())
			r := run(ctx, pc, "echo hi")
			if tc.code == 0 {
				require.NoError(t, r.err)
				return
			}
			assert.Equal(t, tc.code, connect.CodeOf(r.err), "%v", r.err)
		})
	}

	t.Run("host-form-reaches-envd", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, e.ts.URL+"/health", nil)
		require.NoError(t, err)
		req.Host = "49983-" + sb.SandboxID + ".localhost"
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	})
	t.Run("other-ports-are-not-open", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, e.ts.URL+"/health", nil)
		require.NoError(t, err)
		req.Header.Set("E2b-Sandbox-Id", sb.SandboxID)
		req.Header.Set("E2b-Sandbox-Port", "8080")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	})
}

func TestSendInputToAProcessThatDoesNotRead(t *testing.T) {
	requireJail(t)
	ctx := context.Background()
	e := newEnv(t)
	sb := e.create(api.NewSandbox{})
	pc := e.processClient(sb, false)
	stream, err := pc.Start(ctx, connect.NewRequest(&process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "/bin/sleep", Args: []string{"60"}},
	}))
	require.NoError(t, err)
	defer stream.Close()
	require.True(t, stream.Receive())
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: stream.Msg().GetEvent().GetStart().GetPid()}}

	_, err = pc.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel, Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("small\n")}}}))
	require.NoError(t, err, "a write that fits the pipe succeeds")

	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = pc.SendInput(cctx, connect.NewRequest(&process.SendInputRequest{Process: sel, Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: make([]byte, 3<<20)}}}))
	require.Error(t, err, "a write the process never reads must end at the deadline")

	// The server's write gives up at the client's deadline too; without that
	// it would hold stdin forever and this call would never return.
	cctx2, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	_, err = pc.CloseStdin(cctx2, connect.NewRequest(&process.CloseStdinRequest{Process: sel}))
	require.NoError(t, err, "stdin is usable again after the stuck write gave up")
	_, err = pc.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: sel, Signal: process.Signal_SIGNAL_SIGKILL}))
	require.NoError(t, err)
}
