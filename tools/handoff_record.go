package tools

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
	"github.com/sandbox-mcp/sandbox-mcp/store"
)

// macNetworkPolicy is what the record says about the Mac's network: the
// contract's network section confines the sandbox, not the Mac.
const macNetworkPolicy = "the Mac runner's own network; the contract's network section applies to the sandbox only"

// registerHandoff adds handoff_to_mac, handoff_status and the
// handoff://<task-id>/<handoff-id> records, when the contract has a mac
// section and the server has a runner for it.
func (t *Task) registerHandoff(s *mcpserver.MCPServer) {
	if t.c.Mac == nil || t.mac == nil {
		return
	}
	t.recoverHandoffs(context.Background())
	s.AddTools(t.handoffToMacTool(), t.handoffStatusTool())
	s.AddResourceTemplate(mcp.NewResourceTemplate(store.HandoffURIScheme+"{task}/{handoff}", "handoff",
		mcp.WithTemplateDescription("The record of one handoff_to_mac: approval, inputs, runner, step, checks, outputs and cleanup."),
		mcp.WithTemplateMIMEType("application/json"),
	), t.readHandoff)
}

// recoverHandoffs closes the records of handoffs a previous run of the
// server left in flight: their step's outcome was not recorded.
func (t *Task) recoverHandoffs(ctx context.Context) {
	hs, err := t.store.ListHandoffs(ctx, t.c.Task.ID)
	if err != nil {
		t.log.Error("list handoffs", "error", err)
		return
	}
	for i := range hs {
		h := &hs[i]
		switch h.State {
		case store.HandoffStaging, store.HandoffRunning, store.HandoffCleaning:
			h.NextOwner = orNone(t.c.Task.Owner)
			h.Error = fmt.Sprintf("the server stopped while the handoff was %s; its outcome is unknown and workspace %s may remain on the Mac (the step's own watchdog ends it after its timeout)", h.State, orNone(h.Runner.Workspace))
			t.transition(ctx, h, store.HandoffFailed, h.Error)
		case store.HandoffRequested:
			h.NextOwner = "agent"
			t.transition(ctx, h, store.HandoffExpired, "the server stopped before the request was recorded as pending")
		}
	}
}

// readHandoff serves resources/read for handoff URIs of this task.
func (t *Task) readHandoff(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	uri := req.Params.URI
	id, ok := strings.CutPrefix(uri, store.HandoffURIScheme+t.c.Task.ID+"/")
	if !ok || !store.ValidName.MatchString(id) {
		return nil, fmt.Errorf("no handoff %q in task %s", uri, t.c.Task.ID)
	}
	if t.hmu.TryLock() {
		t.applyDecisions(ctx)
		t.hmu.Unlock()
	}
	h, err := t.store.GetHandoff(ctx, t.c.Task.ID, id)
	if err != nil {
		return nil, fmt.Errorf("handoff %q: %w", uri, err)
	}
	body, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return nil, err
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: "application/json", Text: string(t.redactor.Bytes(body))}}, nil
}

// stepDef is the contract step as the digest covers it.
type stepDef struct {
	Name    string            `json:"name"`
	Argv    []string          `json:"argv"`
	Env     map[string]string `json:"env"`
	Timeout string            `json:"timeout"`
	Outputs []string          `json:"outputs"`
}

func resolveStep(c *contracts.Contract, name string) (stepDef, MacStep) {
	s := c.Mac.Steps[name]
	env := map[string]string{}
	for k, v := range s.Env {
		env[k] = v
	}
	d := stepDef{Name: name, Argv: slices.Clone(s.Argv), Env: env, Timeout: time.Duration(s.Timeout).String(), Outputs: slices.Clone(s.Outputs)}
	if d.Outputs == nil {
		d.Outputs = []string{}
	}
	return d, MacStep{Name: name, Argv: d.Argv, Env: env, Timeout: time.Duration(s.Timeout), Outputs: d.Outputs}
}

// digestInput is everything an approval covers. Changing any part of it,
// an input's bytes, the step's definition, the runner or its key, needs a
// new approval. Struct fields marshal in a fixed order and map keys sorted,
// so its JSON is canonical.
type digestInput struct {
	Version        int               `json:"v"`
	TaskID         string            `json:"task_id"`
	SourceRevision string            `json:"source_revision"`
	Inputs         []digestFile      `json:"inputs"`
	Step           stepDef           `json:"step"`
	Runner         digestRunner      `json:"runner"`
	Credentials    digestCredentials `json:"credential_scope"`
	Network        string            `json:"network"`
}

type digestFile struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

type digestRunner struct {
	SSH     string `json:"ssh"`
	HostKey string `json:"host_key"`
}

type digestCredentials struct {
	SSHKey  string   `json:"ssh_key"`
	Secrets []string `json:"secrets"`
	Signing string   `json:"signing"`
}

func sha256JSON(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		// Only strings, numbers, slices and maps of strings: cannot happen.
		panic("tools: marshal digest input: " + err.Error())
	}
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// freeze reads each named artifact's current version from the store,
// re-hashing its blob, and returns the input manifest.
func (t *Task) freeze(ctx context.Context, names []string) ([]store.HandoffInput, error) {
	inputs := make([]store.HandoffInput, 0, len(names))
	for _, name := range names {
		a, err := t.store.GetArtifact(ctx, t.c.Task.ID, name)
		if err != nil {
			return nil, err
		}
		rc, size, err := t.store.OpenBlob(ctx, a.SHA256)
		if err != nil {
			return nil, err
		}
		// The verifying reader fails at EOF if the bytes no longer hash to
		// the recorded digest: the server has hashed them itself.
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("hash artifact %s: %w", name, err)
		}
		if n != size || n != a.Size {
			return nil, fmt.Errorf("hash artifact %s: %w: %d bytes, recorded %d", name, store.ErrCorrupt, n, a.Size)
		}
		inputs = append(inputs, store.HandoffInput{Name: name, Version: a.Version, SHA256: a.SHA256, Size: a.Size, SourcePath: a.SourcePath})
	}
	return inputs, nil
}

// approvalDigest is the digest an approval binds: the task, the source
// revision, the inputs' names, sizes and sha256 (not their versions: the
// same bytes re-exported stay approved), the step's whole definition, the
// runner and its host key, and the key the server logs in with.
func approvalDigest(c *contracts.Contract, step, revision string, inputs []store.HandoffInput, keyFingerprint string) string {
	def, _ := resolveStep(c, step)
	files := make([]digestFile, len(inputs))
	for i, in := range inputs {
		files[i] = digestFile{in.Name, in.SHA256, in.Size}
	}
	return sha256JSON(digestInput{
		Version: 1, TaskID: c.Task.ID, SourceRevision: revision, Inputs: files, Step: def,
		Runner:      digestRunner{SSH: c.Mac.Runner.SSH, HostKey: c.Mac.Runner.HostKey},
		Credentials: digestCredentials{SSHKey: keyFingerprint, Secrets: []string{}, Signing: "none"},
		Network:     macNetworkPolicy,
	})
}

// draft builds the record of a new request (without id or state) and its
// approval digest.
func (t *Task) draft(ctx context.Context, step, revision, note string, inputs []store.HandoffInput) store.Handoff {
	def, _ := resolveStep(t.c, step)
	key := t.mac.KeyFingerprint()
	envNames := make([]string, 0, len(def.Env))
	for k := range def.Env {
		envNames = append(envNames, k)
	}
	slices.Sort(envNames)
	return store.Handoff{
		TaskID: t.c.Task.ID, Owner: t.c.Task.Owner, RequestedBy: "agent (MCP session " + orNone(sessionID(ctx)) + ")",
		Note: note, ContractHash: t.hash, SourceRevision: revision,
		Step: store.HandoffStepDef{Name: step, Argv: def.Argv, Env: envNames, Timeout: def.Timeout,
			Outputs: def.Outputs, SHA256: sha256JSON(def)},
		Inputs:           inputs,
		Runner:           store.HandoffRunner{Kind: "ssh", SSH: t.c.Mac.Runner.SSH, HostKey: t.c.Mac.Runner.HostKey},
		Credentials:      store.HandoffCredentials{SSHKey: key, Secrets: []string{}, Signing: "none"},
		NetworkPolicy:    macNetworkPolicy,
		ApprovalRequired: t.c.Mac.Approval != "none",
		ApprovalDigest:   approvalDigest(t.c, step, revision, inputs, key),
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// sameRequest: h asks for the same step on the same artifact names and
// revision (whatever their bytes).
func sameRequest(h store.Handoff, step, revision string, names []string) bool {
	if h.Step.Name != step || h.SourceRevision != revision || len(h.Inputs) != len(names) {
		return false
	}
	a := make([]string, len(h.Inputs))
	for i, in := range h.Inputs {
		a[i] = in.Name
	}
	b := slices.Clone(names)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// changes says how draft d differs from an earlier record h of the same
// request.
func changes(h, d store.Handoff) string {
	var out []string
	old := map[string]store.HandoffInput{}
	for _, in := range h.Inputs {
		old[in.Name] = in
	}
	for _, in := range d.Inputs {
		if o := old[in.Name]; o.SHA256 != in.SHA256 {
			out = append(out, fmt.Sprintf("artifact %s changed (version %d sha256 %s, now version %d sha256 %s)", in.Name, o.Version, short(o.SHA256), in.Version, short(in.SHA256)))
		}
	}
	if h.Step.SHA256 != d.Step.SHA256 {
		out = append(out, "the contract's definition of step "+d.Step.Name+" changed")
	}
	if h.Runner.SSH != d.Runner.SSH || h.Runner.HostKey != d.Runner.HostKey {
		out = append(out, "the runner changed")
	}
	if h.Credentials.SSHKey != d.Credentials.SSHKey {
		out = append(out, "the server's runner key changed")
	}
	if len(out) == 0 {
		out = append(out, "the approval digest changed")
	}
	return strings.Join(out, "; ")
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

func newHandoffID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "h-" + hex.EncodeToString(b[:])
}

// transition moves h to state, records and audits it.
func (t *Task) transition(ctx context.Context, h *store.Handoff, state store.HandoffState, detail string) {
	h.State = state
	h.History = append(h.History, store.HandoffTransition{State: state, At: t.now().UTC(), Detail: t.redactor.String(detail)})
	saved, err := t.store.PutHandoff(context.WithoutCancel(ctx), *h)
	if err != nil {
		t.log.Error("handoff record not saved", "handoff_id", h.ID, "error", err)
	} else {
		*h = saved
	}
	t.audit.Info("handoff", "session_id", sessionID(ctx), "tool", "handoff_to_mac", "handoff_id", h.ID,
		"state", string(state), "step", h.Step.Name, "approval_digest", h.ApprovalDigest, "detail", t.redactor.String(detail))
}

// approve records an approval of h's digest.
func (t *Task) approve(ctx context.Context, h *store.Handoff, by, via string, at time.Time) {
	h.Approval = &store.Approval{By: by, Via: via, Digest: h.ApprovalDigest, At: at.UTC(), ExpiresAt: at.UTC().Add(time.Duration(t.c.Mac.ApprovalTTL))}
	t.transition(ctx, h, store.HandoffApproved, fmt.Sprintf("approved by %s via %s until %s", by, via, h.Approval.ExpiresAt.Format(time.RFC3339)))
}

// applyDecisions takes the owner's out-of-band decisions (sandbox-mcp
// handoff approve|deny) on this task's pending handoffs. A decision on
// another digest than the record's is refused and the handoff stays pending.
func (t *Task) applyDecisions(ctx context.Context) {
	hs, err := t.store.ListHandoffs(ctx, t.c.Task.ID)
	if err != nil {
		t.log.Error("list handoffs", "error", err)
		return
	}
	for i := range hs {
		h := &hs[i]
		if h.State != store.HandoffPending {
			continue
		}
		d, err := t.store.TakeDecision(h.ID)
		if err != nil {
			t.log.Error("read handoff decision", "handoff_id", h.ID, "error", err)
			continue
		}
		switch {
		case d == nil:
		case d.TaskID != h.TaskID || d.Digest != h.ApprovalDigest:
			t.audit.Info("handoff decision refused", "handoff_id", h.ID, "by", d.By,
				"reason", "the decision names digest "+d.Digest+" but the request's digest is "+h.ApprovalDigest)
		case d.Approve:
			t.approve(ctx, h, d.By, "cli", d.At)
		default:
			h.NextOwner = "agent"
			t.transition(ctx, h, store.HandoffDenied, "denied by "+d.By+" via cli"+reasonSuffix(d.Reason))
		}
	}
}

func reasonSuffix(r string) string {
	if r == "" {
		return ""
	}
	return ": " + r
}

// canElicit reports whether the client declared the elicitation capability.
func canElicit(ctx context.Context) (bool, string) {
	s := mcpserver.ClientSessionFromContext(ctx)
	ci, ok := s.(mcpserver.SessionWithClientInfo)
	if !ok {
		return false, ""
	}
	info := ci.GetClientInfo()
	return ci.GetClientCapabilities().Elicitation != nil, strings.TrimSpace(info.Name + " " + info.Version)
}

// approvalMessage is what the user is asked to approve.
func (t *Task) approvalMessage(h store.Handoff) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Approve handoff %s of task %s to the Mac runner %s (host key %s)?\n", h.ID, h.TaskID, h.Runner.SSH, h.Runner.HostKey)
	fmt.Fprintf(&b, "Step %s: %s (timeout %s", h.Step.Name, strings.Join(h.Step.Argv, " "), h.Step.Timeout)
	if len(h.Step.Outputs) > 0 {
		fmt.Fprintf(&b, "; outputs %s", strings.Join(h.Step.Outputs, ", "))
	}
	b.WriteString(")\nInputs (hashed by the server):\n")
	for _, in := range h.Inputs {
		fmt.Fprintf(&b, "  %s  %d bytes  sha256 %s\n", in.Name, in.Size, in.SHA256)
	}
	if h.SourceRevision != "" {
		fmt.Fprintf(&b, "Source revision: %q\n", h.SourceRevision)
	}
	if h.Note != "" {
		fmt.Fprintf(&b, "Agent's note (untrusted): %q\n", h.Note)
	}
	fmt.Fprintf(&b, "Approval digest: %s\nThe approval lasts %s and covers exactly these bytes and this step.", h.ApprovalDigest, time.Duration(t.c.Mac.ApprovalTTL))
	return t.redactor.String(b.String())
}

var approvalSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"approve": map[string]any{"type": "boolean", "title": "Run this step on the Mac", "description": "true runs it; anything else runs nothing"},
	},
	"required": []string{"approve"},
}

// elicit asks the user through the client. It returns whether the user
// approved, or an error when asking failed (the handoff then stays pending).
func (t *Task) elicit(ctx context.Context, h store.Handoff) (approved bool, action string, err error) {
	srv := mcpserver.ServerFromContext(ctx)
	if srv == nil {
		return false, "", errors.New("no MCP server in context")
	}
	ctx, cancel := context.WithTimeout(ctx, handoffApprovalWait)
	defer cancel()
	res, err := srv.RequestElicitation(ctx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{
		Message: t.approvalMessage(h), RequestedSchema: approvalSchema,
	}})
	if err != nil {
		return false, "", err
	}
	if res.Action != mcp.ElicitationResponseActionAccept {
		return false, string(res.Action), nil
	}
	m, _ := res.Content.(map[string]any)
	ok, _ := m["approve"].(bool)
	if !ok {
		return false, "accept without approve: true", nil
	}
	return true, "accept", nil
}

// handoffApprovalWait bounds how long one call waits for the user to
// answer an elicitation.
const handoffApprovalWait = 10 * time.Minute
