package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/sandbox-mcp/sandbox-mcp/policy"
	"github.com/sandbox-mcp/sandbox-mcp/store"
)

type handoffArgs struct {
	Step           string   `json:"step"`
	Artifacts      []string `json:"artifacts"`
	SourceRevision string   `json:"source_revision,omitempty"`
	Note           string   `json:"note,omitempty"`
}

// HandoffResult is handoff_to_mac's and handoff_status's structured result.
type HandoffResult struct {
	HandoffID      string                 `json:"handoff_id"`
	State          string                 `json:"state"`
	URI            string                 `json:"uri"`
	Step           string                 `json:"step"`
	ApprovalDigest string                 `json:"approval_digest"`
	ApprovedBy     string                 `json:"approved_by,omitempty"`
	ExitCode       *int                   `json:"exit_code,omitempty"`
	Outputs        []store.HandoffOutput  `json:"outputs,omitempty"`
	Checks         []store.HandoffCheck   `json:"checks,omitempty"`
	Cleanup        *store.HandoffCleanup  `json:"cleanup,omitempty"`
	NextOwner      string                 `json:"next_owner,omitempty"`
	Message        string                 `json:"message"`
	TaskID         string                 `json:"task_id"`
	ContractHash   string                 `json:"contract_hash"`
	Inputs         []store.HandoffInput   `json:"inputs"`
	Steps          []store.HandoffStepRun `json:"steps,omitempty"`
}

const handoffInputSchema = `{
  "type": "object",
  "properties": {
    "step": {"type": "string", "minLength": 1, "maxLength": 256, "description": "A step name from the contract's mac.steps. Never a command."},
    "artifacts": {"type": "array", "maxItems": 256, "items": {"type": "string", "maxLength": 256}, "description": "Names of artifacts exported in this task with export_artifact; they become the step's inputs/ on the Mac."},
    "source_revision": {"type": "string", "maxLength": 4096, "description": "The source revision the artifacts were built from (default: the contract's task.source.revision)."},
    "note": {"type": "string", "maxLength": 4096, "description": "A note for the human approving the handoff."}
  },
  "required": ["step", "artifacts"],
  "additionalProperties": false
}`

const handoffOutputSchema = `{
  "type": "object",
  "properties": {
    "handoff_id": {"type": "string"},
    "state": {"type": "string", "enum": ["requested", "pending_approval", "approved", "staging", "running", "cleaning", "done", "failed", "denied", "expired"]},
    "uri": {"type": "string"},
    "step": {"type": "string"},
    "approval_digest": {"type": "string"},
    "approved_by": {"type": "string"},
    "exit_code": {"type": "integer"},
    "outputs": {"type": "array"},
    "checks": {"type": "array"},
    "cleanup": {"type": "object"},
    "next_owner": {"type": "string"},
    "message": {"type": "string"},
    "task_id": {"type": "string"},
    "contract_hash": {"type": "string"},
    "inputs": {"type": "array"},
    "steps": {"type": "array"}
  },
  "required": ["handoff_id", "state", "uri", "step", "approval_digest", "message", "task_id", "contract_hash", "inputs"]
}`

func (t *Task) handoffToMacTool() mcpserver.ServerTool {
	steps := make([]string, 0, len(t.c.Mac.Steps))
	for name := range t.c.Mac.Steps {
		steps = append(steps, name)
	}
	slices.Sort(steps)
	desc := fmt.Sprintf("Hand exported artifacts to a real Mac and run one predefined step there (steps: %s). "+
		"The server freezes the artifacts by sha256; ", strings.Join(steps, ", "))
	if t.c.Mac.Approval == "none" {
		desc += "the contract runs steps without approval. "
	} else {
		desc += "a human approves exactly those bytes and that step (asked through the client if it supports elicitation; otherwise the result is pending_approval: " +
			"check handoff_status, then call handoff_to_mac again with the same arguments once it is approved). "
	}
	desc += "Returns the step's exit code, its outputs as artifacts with sha256, and a handoff:// record."
	tool := newTool("handoff_to_mac", desc, handoffInputSchema, handoffOutputSchema, hints{
		title:    "Run a predefined step on the Mac runner",
		readOnly: false, destructive: false, idempotent: false, openWorld: true,
	})
	return mcpserver.ServerTool{Tool: tool, Handler: t.handoffToMac}
}

func (t *Task) handoffToMac(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	const tool = "handoff_to_mac"
	var a handoffArgs
	if err := decodeArgs(req, &a); err != nil {
		return t.badArgs(ctx, tool, err), nil
	}
	arts, err := t.store.ListArtifacts(ctx, t.c.Task.ID)
	if err != nil {
		return t.failed(ctx, tool, err), nil
	}
	known := make([]string, len(arts))
	for i, art := range arts {
		known[i] = art.Name
	}
	d := policy.DecideHandoff(t.c, policy.HandoffCall{Step: a.Step, Artifacts: a.Artifacts, Known: known, SourceRevision: a.SourceRevision, Note: a.Note})
	t.decided(ctx, tool, d)
	if !d.Allow {
		return t.denied(d), nil
	}
	eff, fail := effective[policy.HandoffEffective](ctx, t, tool, d)
	if fail != nil {
		return fail, nil
	}
	revision := eff.SourceRevision
	if revision == "" && t.c.Task.Source != nil {
		revision = t.c.Task.Source.Revision
	}
	if !t.hmu.TryLock() {
		return mcp.NewToolResultError(fmt.Sprintf("handoff_to_mac: another handoff of this task is in progress; wait for it (handoff_status) and retry (task %s, contract %s)", t.c.Task.ID, t.hash)), nil
	}
	defer t.hmu.Unlock()

	t.applyDecisions(ctx)
	inputs, err := t.freeze(ctx, eff.Artifacts)
	if err != nil {
		return t.failed(ctx, tool, err), nil
	}
	draft := t.draft(ctx, eff.Step, revision, eff.Note, inputs)

	// The same request made before: pending, approved (maybe since by the
	// owner), or approved for other bytes.
	var h *store.Handoff
	var notice []string
	hs, err := t.store.ListHandoffs(ctx, t.c.Task.ID)
	if err != nil {
		return t.failed(ctx, tool, err), nil
	}
	for i := len(hs) - 1; i >= 0; i-- {
		prev := hs[i]
		if (prev.State != store.HandoffPending && prev.State != store.HandoffApproved) || !sameRequest(prev, eff.Step, revision, eff.Artifacts) {
			continue
		}
		switch {
		case prev.ApprovalDigest != draft.ApprovalDigest:
			what, was := changes(prev, draft), prev.State
			prev.NextOwner = "agent"
			t.transition(ctx, &prev, store.HandoffExpired, "superseded: "+what+"; a new approval is needed")
			notice = append(notice, fmt.Sprintf("handoff %s (%s) no longer matches this request: %s; nothing of it ran and it needs a new approval", prev.ID, was, what))
		case h == nil:
			p := prev
			h = &p
		}
	}
	if h != nil && h.State == store.HandoffApproved && !t.now().Before(h.Approval.ExpiresAt) {
		h.NextOwner = "agent"
		t.transition(ctx, h, store.HandoffExpired, "the approval expired at "+h.Approval.ExpiresAt.Format(time.RFC3339)+" before the step ran")
		notice = append(notice, fmt.Sprintf("the approval of handoff %s expired at %s; nothing ran; a new approval is needed", h.ID, h.Approval.ExpiresAt.Format(time.RFC3339)))
		h = nil
	}
	if h != nil && h.State == store.HandoffPending && t.c.Mac.Approval == "none" {
		// Requested under a contract that required approval; this one does not.
		t.approve(ctx, h, "contract (mac.approval: none)", "contract", t.now())
	}
	if h != nil && h.State == store.HandoffPending {
		// Ask again if the client can; otherwise report it still waiting.
		if ok, _ := canElicit(ctx); !ok {
			return t.handoffResult(*h, false, joinNotice(notice, "still waiting for the owner's approval; nothing has run. "+approveHint(*h))), nil
		}
	}
	if h == nil {
		n := draft
		n.ID = newHandoffID()
		h = &n
		t.transition(ctx, h, store.HandoffRequested, fmt.Sprintf("step %s with %d input(s)", h.Step.Name, len(h.Inputs)))
		if !h.ApprovalRequired {
			t.approve(ctx, h, "contract (mac.approval: none)", "contract", t.now())
		} else {
			t.transition(ctx, h, store.HandoffPending, "waiting for approval of digest "+h.ApprovalDigest)
		}
	}
	if h.State == store.HandoffPending {
		ok, client := canElicit(ctx)
		if !ok {
			msg := "waiting for the owner's approval; nothing has run. " + approveHint(*h)
			return t.handoffResult(*h, false, joinNotice(notice, msg)), nil
		}
		approved, action, err := t.elicit(ctx, *h)
		switch {
		case err != nil:
			t.log.Warn("elicitation failed; the handoff stays pending", "handoff_id", h.ID, "error", err)
			msg := "could not ask the user through the client (" + err.Error() + "); waiting for the owner's approval; nothing has run. " + approveHint(*h)
			return t.handoffResult(*h, false, joinNotice(notice, msg)), nil
		case !approved:
			h.NextOwner = "agent"
			t.transition(ctx, h, store.HandoffDenied, "the user answered "+action+" through the client "+client)
			return t.handoffResult(*h, true, joinNotice(notice, "the user did not approve ("+action+"); nothing ran")), nil
		}
		t.approve(ctx, h, "user of MCP client "+orNone(client)+" (session "+orNone(sessionID(ctx))+")", "elicitation", t.now())
	}
	return t.runHandoff(ctx, req, h, notice), nil
}

func approveHint(h store.Handoff) string {
	return fmt.Sprintf("The owner approves it with `sandbox-mcp handoff approve --state <state dir> %s` (digest %s); then call handoff_to_mac again with the same arguments, or watch handoff_status.", h.ID, h.ApprovalDigest)
}

func joinNotice(notice []string, msg string) string {
	if len(notice) == 0 {
		return msg
	}
	return strings.Join(notice, "; ") + ". " + msg
}

// runHandoff re-checks the frozen inputs against the approval and carries
// out an approved handoff: staging, running, bringing outputs back and
// cleaning up, recording each state.
func (t *Task) runHandoff(ctx context.Context, req mcp.CallToolRequest, h *store.Handoff, notice []string) *mcp.CallToolResult {
	// Between the approval and now the agent may have re-exported an input,
	// or the contract changed: the approval covers the digest only.
	names := make([]string, len(h.Inputs))
	for i, in := range h.Inputs {
		names[i] = in.Name
	}
	var why string
	if now, err := t.freeze(ctx, names); err != nil {
		why = "the inputs cannot be read back: " + err.Error()
	} else if d := t.draft(ctx, h.Step.Name, h.SourceRevision, h.Note, now); d.ApprovalDigest != h.ApprovalDigest {
		why = changes(*h, d)
	} else if h.Approval == nil || h.Approval.Digest != h.ApprovalDigest {
		why = "the approval is for another digest"
	} else if !t.now().Before(h.Approval.ExpiresAt) {
		why = "the approval expired at " + h.Approval.ExpiresAt.Format(time.RFC3339)
	}
	if why != "" {
		h.NextOwner = "agent"
		t.transition(ctx, h, store.HandoffExpired, "refused before staging: "+why)
		return t.handoffResult(*h, true, joinNotice(notice, "refused before anything reached the Mac: "+why+"; call handoff_to_mac again to request a new approval"))
	}

	_, step := resolveStep(t.c, h.Step.Name)
	owner := orNone(t.c.Task.Owner)
	fail := func(next, msg string) *mcp.CallToolResult {
		h.NextOwner, h.Error = next, t.redactor.String(msg)
		t.transition(ctx, h, store.HandoffFailed, msg)
		return t.handoffResult(*h, true, joinNotice(notice, msg))
	}
	check := func(name string, passed bool, detail string) {
		h.Checks = append(h.Checks, store.HandoffCheck{Name: name, Passed: passed, Detail: t.redactor.String(detail)})
	}

	t.transition(ctx, h, store.HandoffStaging, "uploading "+fmt.Sprint(len(h.Inputs))+" input(s)")
	job := MacJob{TaskID: t.c.Task.ID, HandoffID: h.ID}
	for _, in := range h.Inputs {
		sum := in.SHA256
		job.Inputs = append(job.Inputs, MacInput{Name: in.Name, SHA256: in.SHA256, Size: in.Size,
			Open: func(ctx context.Context) (io.ReadCloser, error) {
				rc, _, err := t.store.OpenBlob(ctx, sum)
				return rc, err
			}})
	}
	ws, err := t.mac.Prepare(ctx, job)
	h.Runner.Workspace, h.Runner.System, h.Runner.HashTool = ws.Dir, ws.System, ws.HashTool
	for i := range h.Inputs {
		h.Inputs[i].StagedPath = ws.Staged[h.Inputs[i].Name]
	}
	check("host-key-pinned", !errors.Is(err, ErrMacHostKey), "pinned "+h.Runner.HostKey)
	if errors.Is(err, ErrMacHostKey) {
		// Refused before login: there is nothing on the Mac to clean up,
		// and nothing should be sent to a host we cannot identify.
		h.Cleanup = &store.HandoffCleanup{WorkspaceRemoved: true, ProcessesGone: true, At: t.now().UTC()}
		check("workspace-removed", true, "nothing was created: the connection was refused before login")
		return fail(owner, "staging failed: "+err.Error())
	}
	if err != nil {
		check("inputs-verified-on-mac", false, err.Error())
		t.cleanup(ctx, h, ws)
		return fail(owner, "staging failed: "+err.Error())
	}
	check("inputs-verified-on-mac", true, fmt.Sprintf("%d input(s) re-hashed with %s on the Mac", len(h.Inputs), ws.HashTool))

	t.transition(ctx, h, store.HandoffRunning, "step "+step.Name)
	logName := artifactName(step.Name, "log.txt")
	sink := t.newLogSink(ctx, req, logName)
	res, runErr := t.mac.Run(ctx, ws, step, sink)
	logArt, logErr := sink.close()
	run := store.HandoffStepRun{Name: step.Name, ExitCode: res.ExitCode, StartedAt: res.StartedAt.UTC(), EndedAt: res.EndedAt.UTC(),
		DurationMS: res.EndedAt.Sub(res.StartedAt).Milliseconds(), TimedOut: res.TimedOut, LogSHA256: res.LogSHA256,
		LogBytes: res.LogBytes, Reconnects: res.Reconnects}
	if res.KillDetail != "" {
		run.Killed = res.KillDetail
	}
	if logErr == nil {
		run.LogArtifact = logArt.URI
	} else {
		t.log.Warn("step log not stored", "handoff_id", h.ID, "error", logErr)
	}
	h.Steps = append(h.Steps, run)
	if res.TimedOut {
		check("step-within-timeout", false, fmt.Sprintf("ran over %s; %s", step.Timeout, res.KillDetail))
	} else if runErr == nil || errors.Is(runErr, ErrMacOutputMissing) {
		check("step-within-timeout", true, step.Timeout.String())
	}
	if runErr != nil && !errors.Is(runErr, ErrMacOutputMissing) {
		t.cleanup(ctx, h, ws)
		if ctx.Err() != nil {
			return fail("agent", "the call was cancelled; the step was stopped on the Mac ("+res.KillDetail+")")
		}
		return fail(owner, "the step could not be followed: "+runErr.Error())
	}
	if !res.TimedOut {
		check("step-exit-zero", res.ExitCode == 0, fmt.Sprintf("exit code %d", res.ExitCode))
	}

	// Outputs: hashed on the Mac, downloaded, hashed again on arrival.
	allOut := true
	for _, o := range res.Outputs {
		out := store.HandoffOutput{Path: o.Path, RemoteSHA256: o.SHA256, Size: o.Size, Archive: o.Dir, Missing: o.Missing}
		if o.Missing {
			allOut = false
			h.Outputs = append(h.Outputs, out)
			continue
		}
		base := path.Base(o.Path)
		if o.Dir {
			base += ".tar"
		}
		art, err := t.download(ctx, ws, o, artifactName(step.Name, base))
		if err != nil {
			allOut = false
			check("output-downloaded:"+o.Path, false, err.Error())
		} else {
			out.Artifact, out.URI, out.SHA256, out.Size = art.Name, art.URI, art.SHA256, art.Size
			check("output-hash-matches:"+o.Path, art.SHA256 == o.SHA256, "mac "+o.SHA256+", server "+art.SHA256)
			if art.SHA256 != o.SHA256 {
				allOut = false
			}
		}
		h.Outputs = append(h.Outputs, out)
	}
	if len(step.Outputs) > 0 && !res.TimedOut {
		check("outputs-present", !errors.Is(runErr, ErrMacOutputMissing), errString(runErr))
	}

	t.cleanup(ctx, h, ws)
	switch {
	case res.TimedOut:
		return fail("agent", fmt.Sprintf("step %s ran over its timeout of %s and was killed (%s)", step.Name, step.Timeout, res.KillDetail))
	case res.ExitCode != 0:
		return fail("agent", fmt.Sprintf("step %s exited with code %d; its log is %s", step.Name, res.ExitCode, run.LogArtifact))
	case !allOut:
		return fail("agent", "some declared outputs are missing or did not arrive intact: "+errString(runErr))
	case h.Cleanup != nil && h.Cleanup.Error != "":
		return fail(owner, "the step succeeded but cleanup on the Mac failed: "+h.Cleanup.Error)
	}
	t.transition(ctx, h, store.HandoffDone, fmt.Sprintf("exit code 0, %d output(s)", len(h.Outputs)))
	return t.handoffResult(*h, false, joinNotice(notice, fmt.Sprintf("step %s ran on the Mac: exit code 0, %d output(s) stored as artifacts", step.Name, len(h.Outputs))))
}

// cleanup releases the workspace (always, with its own deadline) and
// records what was confirmed.
func (t *Task) cleanup(ctx context.Context, h *store.Handoff, ws MacWorkspace) {
	t.transition(ctx, h, store.HandoffCleaning, "removing workspace "+ws.Dir)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	c := t.mac.Release(cctx, ws)
	h.Cleanup = &store.HandoffCleanup{WorkspaceRemoved: c.WorkspaceRemoved, ProcessesGone: c.ProcessesGone, Error: t.redactor.String(c.Error), At: t.now().UTC()}
	h.Checks = append(h.Checks, store.HandoffCheck{Name: "workspace-removed", Passed: c.WorkspaceRemoved && c.ProcessesGone, Detail: t.redactor.String(c.Error)})
}

// download streams one output into the artifact store.
func (t *Task) download(ctx context.Context, ws MacWorkspace, o MacOutput, name string) (store.Artifact, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := t.mac.Download(ctx, ws, o, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	art, err := t.store.PutArtifact(ctx, t.c.Task.ID, name, pr, int64(t.c.Limits.ArtifactBytes), store.ArtifactMeta{
		SourcePath: "mac:" + ws.Dir + "/" + o.Path, Command: "handoff step", ExitCode: 0, ContractHash: t.hash,
	})
	pr.CloseWithError(errors.New("download abandoned"))
	derr := <-done
	if err == nil && derr != nil {
		err = derr
	}
	if err != nil {
		return store.Artifact{}, err
	}
	if t.onArtifact != nil {
		t.onArtifact(art)
	}
	return art, nil
}

var badNameChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// artifactName is "<step>-<base>", made a valid artifact name.
func artifactName(step, base string) string {
	n := badNameChars.ReplaceAllString(step+"-"+base, "_")
	n = strings.ReplaceAll(n, "..", "_")
	if len(n) > 128 {
		n = n[:128]
	}
	return n
}

// logSink streams the step's log, redacted, to progress notifications and
// into an artifact. It never fails the step: a full store only loses the
// copy.
type logSink struct {
	red  io.WriteCloser
	pw   *io.PipeWriter
	werr error // the pipe's error, seen by the writer only
	done chan struct{}
	art  store.Artifact // set by the storing goroutine before done closes
	err  error
	prog *progress
	stop chan struct{}
}

func (t *Task) newLogSink(ctx context.Context, req mcp.CallToolRequest, name string) *logSink {
	pr, pw := io.Pipe()
	s := &logSink{pw: pw, done: make(chan struct{}), stop: make(chan struct{}), prog: newProgress(progressFunc(ctx, req), t.interval, t.now)}
	s.red = t.redactor.Writer(writerFunc(func(b []byte) (int, error) {
		s.prog.add(b)
		if s.werr == nil {
			_, s.werr = pw.Write(b)
		}
		return len(b), nil
	}))
	go func() {
		defer close(s.done)
		art, err := t.store.PutArtifact(context.WithoutCancel(ctx), t.c.Task.ID, name, pr, int64(t.c.Limits.ArtifactBytes), store.ArtifactMeta{
			SourcePath: "mac log", Command: "handoff step", ContractHash: t.hash,
		})
		pr.CloseWithError(err)
		s.art, s.err = art, err
		if err == nil && t.onArtifact != nil {
			t.onArtifact(art)
		}
	}()
	if s.prog.send != nil {
		go func() {
			tick := time.NewTicker(t.interval)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					s.prog.tick()
				case <-s.stop:
					return
				}
			}
		}()
	}
	return s
}

func (s *logSink) Write(p []byte) (int, error) {
	s.red.Write(p)
	return len(p), nil
}

// close flushes the log and returns the stored artifact.
func (s *logSink) close() (store.Artifact, error) {
	close(s.stop)
	s.red.Close()
	// The tail of the log, which the throttle held back.
	if s.prog.send != nil {
		s.prog.mu.Lock()
		if len(s.prog.pending) > 0 {
			s.prog.flushLocked()
		}
		s.prog.mu.Unlock()
	}
	s.pw.Close()
	<-s.done
	return s.art, s.err
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// handoffResult is the agent's view of h.
func (t *Task) handoffResult(h store.Handoff, isErr bool, msg string) *mcp.CallToolResult {
	out := HandoffResult{
		HandoffID: h.ID, State: string(h.State), URI: store.HandoffURI(h.TaskID, h.ID), Step: h.Step.Name,
		ApprovalDigest: h.ApprovalDigest, Outputs: h.Outputs, Checks: h.Checks, Cleanup: h.Cleanup,
		NextOwner: h.NextOwner, Message: msg, TaskID: t.c.Task.ID, ContractHash: t.hash, Inputs: h.Inputs, Steps: h.Steps,
	}
	if h.Approval != nil {
		out.ApprovedBy = h.Approval.By
	}
	if n := len(h.Steps); n > 0 {
		code := h.Steps[n-1].ExitCode
		out.ExitCode = &code
	}
	text := fmt.Sprintf("handoff %s: %s. %s (record %s; task %s, contract %s)", h.ID, h.State, msg, out.URI, t.c.Task.ID, t.hash)
	res := t.structured(out, text)
	res.IsError = isErr
	return res
}
