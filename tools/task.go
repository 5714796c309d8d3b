package tools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
	"github.com/sandbox-mcp/sandbox-mcp/policy"
	"github.com/sandbox-mcp/sandbox-mcp/redact"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b"
	"github.com/sandbox-mcp/sandbox-mcp/store"
)

// Metadata keys the server puts on every sandbox it creates, so that
// `sandbox-mcp reap` can find the ones a crash left behind.
const (
	MetaTask     = "sandbox_mcp_task"
	MetaContract = "sandbox_mcp_contract"
)

// Options configure NewTask.
type Options struct {
	// Contract is the task's contract, with defaults applied. Required.
	Contract *contracts.Contract
	// E2B reaches the sandbox backend (E2B's cloud or the embedded local
	// sandbox). Required.
	E2B *e2b.Client
	// Store keeps the task record and its artifacts. Required.
	Store *store.Store
	// Credentials are the values of the contract's credentials, by name, as
	// the server read them. They are injected only where a grant matches and
	// redacted from everything that leaves.
	Credentials []redact.Secret
	// Mac runs handoff_to_mac's steps. If nil, handoff_to_mac is not
	// offered, even when the contract has a mac section.
	Mac MacRunner
	// Audit receives one line per decision and per side effect. If nil,
	// discarded.
	Audit *slog.Logger
	// Logger receives operator diagnostics. If nil, discarded.
	Logger *slog.Logger
	// MaxCommands is how many commands of the task run at once; more wait
	// their turn (a flood of calls queues instead of exhausting the
	// sandbox's process limit). If zero, 8.
	MaxCommands int
	// ProgressInterval is the least time between two progress notifications
	// of one call. If zero, 500ms.
	ProgressInterval time.Duration
	// Now is the clock. If nil, time.Now.
	Now func() time.Time
}

// Task is one agent task: its contract, its sandbox (created on first use
// and reused) and its records. It is safe for concurrent use.
type Task struct {
	c        *contracts.Contract
	hash     string
	e2b      *e2b.Client
	store    *store.Store
	secrets  map[string]string
	redactor *redact.Redactor
	audit    *slog.Logger
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time
	cmdSlots chan struct{} // one token per command running

	mu       sync.Mutex
	sb       *e2b.Sandbox
	notice   string // said once to the agent, e.g. that a previous sandbox was gone
	lastCmd  string
	lastExit int

	onArtifact func(store.Artifact) // set by Register

	mac MacRunner  // nil: no handoff_to_mac
	hmu sync.Mutex // one handoff of this task at a time
}

// NewTask returns the task the contract describes. It makes no call to the
// backend: the sandbox is created by the first tool call that needs it.
func NewTask(o Options) (*Task, error) {
	if o.Contract == nil || o.E2B == nil || o.Store == nil {
		return nil, errors.New("tools: contract, E2B client and store are required")
	}
	discard := slog.New(slog.DiscardHandler)
	t := &Task{
		c:        o.Contract,
		hash:     o.Contract.Hash(),
		e2b:      o.E2B,
		store:    o.Store,
		secrets:  map[string]string{},
		redactor: redact.New(o.Credentials),
		audit:    o.Audit,
		log:      o.Logger,
		interval: o.ProgressInterval,
		now:      o.Now,
		lastExit: -1,
		mac:      o.Mac,
	}
	for _, s := range o.Credentials {
		t.secrets[s.Name] = s.Value
	}
	if t.audit == nil {
		t.audit = discard
	}
	if t.log == nil {
		t.log = discard
	}
	if t.interval == 0 {
		t.interval = 500 * time.Millisecond
	}
	if t.now == nil {
		t.now = time.Now
	}
	if o.MaxCommands <= 0 {
		o.MaxCommands = 8
	}
	t.cmdSlots = make(chan struct{}, o.MaxCommands)
	t.audit = t.audit.With("task_id", t.c.Task.ID, "contract", t.hash)
	t.log = t.log.With("task_id", t.c.Task.ID)
	return t, nil
}

// Contract returns the task's contract.
func (t *Task) Contract() *contracts.Contract { return t.c }

// Hash returns the contract's hash, as every result carries it.
func (t *Task) Hash() string { return t.hash }

// Redactor returns the task's redactor.
func (t *Task) Redactor() *redact.Redactor { return t.redactor }

// sandbox returns the task's sandbox, creating it on first use. After a
// restart it reconnects to the sandbox the store recorded, if it still
// exists; if not, it creates a new one and says so once in the next result.
func (t *Task) sandbox(ctx context.Context) (*e2b.Sandbox, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sb != nil {
		return t.sb, nil
	}
	rec, err := t.store.GetTask(ctx, t.c.Task.ID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if err == nil && rec.SandboxID != "" {
		sb, err := t.reconnect(ctx, rec)
		if sb != nil || err != nil {
			return sb, err
		}
	}
	plan := policy.NetworkPlanFor(t.c)
	sb, err := t.e2b.Create(ctx, e2b.CreateParams{
		Template:      t.c.Sandbox.Template,
		Timeout:       time.Duration(t.c.Sandbox.Lifetime),
		OnExpiry:      string(t.c.Sandbox.OnExpiry),
		AllowInternet: plan.AllowInternet,
		AllowOut:      plan.AllowOut,
		DenyOut:       plan.DenyOut,
		Metadata:      map[string]string{MetaTask: t.c.Task.ID, MetaContract: t.hash},
	})
	if err != nil {
		return nil, err
	}
	if err := sb.MakeDir(ctx, t.c.Sandbox.Workdir); err != nil && !errors.Is(err, e2b.ErrConflict) {
		_ = t.e2b.Kill(context.WithoutCancel(ctx), sb.ID)
		return nil, fmt.Errorf("create workdir: %w", err)
	}
	now := t.now()
	if _, err := t.store.PutTask(ctx, store.Task{
		ID: t.c.Task.ID, ContractHash: t.hash, SandboxID: sb.ID, Backend: string(t.c.Sandbox.Backend),
		Status: store.StatusRunning, CreatedAt: now, UpdatedAt: now,
	}); err != nil {
		_ = t.e2b.Kill(context.WithoutCancel(ctx), sb.ID)
		return nil, err
	}
	t.sb = sb
	t.log.Info("sandbox created", "sandbox_id", sb.ID)
	t.audit.Info("sandbox created", "sandbox_id", sb.ID, "allow_internet", plan.AllowInternet)
	return sb, nil
}

// reconnect attaches to the sandbox a previous run of the server recorded.
// It returns (nil, nil) when there is none to attach to, having set the
// notice that tells the agent its earlier files are gone.
func (t *Task) reconnect(ctx context.Context, rec store.Task) (*e2b.Sandbox, error) {
	live := rec.Status == store.StatusRunning || rec.Status == store.StatusPaused
	remaining := rec.CreatedAt.Add(time.Duration(t.c.Sandbox.Lifetime)).Sub(t.now())
	switch {
	case rec.ContractHash != t.hash:
		t.notice = fmt.Sprintf("the contract changed since sandbox %s was created; a new sandbox was created and files written before are not in it", rec.SandboxID)
		if live {
			// The old sandbox ran under other rules: end it rather than
			// leave it for reap.
			_ = t.e2b.Kill(ctx, rec.SandboxID)
		}
	case live && remaining > time.Second:
		sb, err := t.e2b.Connect(ctx, rec.SandboxID, remaining)
		if err == nil {
			t.sb = sb
			t.notice = fmt.Sprintf("reconnected to this task's sandbox %s", sb.ID)
			t.log.Info("sandbox reconnected", "sandbox_id", sb.ID)
			t.audit.Info("sandbox reconnected", "sandbox_id", sb.ID)
			return sb, t.setStatus(ctx, rec, store.StatusRunning)
		}
		if !errors.Is(err, e2b.ErrSandboxGone) {
			return nil, err
		}
		t.notice = fmt.Sprintf("this task's previous sandbox %s no longer exists; a new one was created and files written before are gone", rec.SandboxID)
	default:
		t.notice = fmt.Sprintf("this task's previous sandbox %s no longer exists (%s); a new one was created and files written before are gone", rec.SandboxID, rec.Status)
	}
	t.log.Warn("recorded sandbox not reused", "sandbox_id", rec.SandboxID, "status", rec.Status)
	t.audit.Info("sandbox not reused", "sandbox_id", rec.SandboxID, "status", string(rec.Status))
	return nil, nil
}

func (t *Task) setStatus(ctx context.Context, rec store.Task, status store.Status) error {
	rec.Status = status
	rec.UpdatedAt = t.now()
	_, err := t.store.PutTask(ctx, rec)
	return err
}

// takeNotice returns the pending notice for the agent, once.
func (t *Task) takeNotice() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.notice
	t.notice = ""
	return n
}

// Close ends the task's sandbox as the contract says (kill or pause) and
// records the outcome. It is called when the server stops.
func (t *Task) Close(ctx context.Context) error {
	t.mu.Lock()
	sb := t.sb
	t.sb = nil
	t.mu.Unlock()
	if sb == nil {
		return nil
	}
	rec, err := t.store.GetTask(ctx, t.c.Task.ID)
	if err != nil {
		return err
	}
	action, status := t.e2b.Kill, store.StatusKilled
	if t.c.Sandbox.OnExpiry == contracts.ExpiryPause {
		action, status = t.e2b.Pause, store.StatusPaused
	}
	err = action(ctx, sb.ID)
	if errors.Is(err, e2b.ErrSandboxGone) {
		err, status = nil, store.StatusGone
	}
	t.audit.Info("sandbox ended", "sandbox_id", sb.ID, "status", string(status), "error", errString(err))
	t.log.Info("sandbox ended", "sandbox_id", sb.ID, "status", status, "error", errString(err))
	if err != nil {
		return fmt.Errorf("end sandbox %s: %w", sb.ID, err)
	}
	return t.setStatus(ctx, rec, status)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
