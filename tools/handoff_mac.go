package tools

import (
	"context"
	"errors"
	"io"
	"time"
)

// MacRunner is the subset of a Mac runner that handoff_to_mac uses: a fresh
// workspace with verified inputs, one predefined step, its outputs, and a
// cleanup that is always attempted. runner/mac implements it over SSH.
type MacRunner interface {
	// KeyFingerprint is the SHA256 fingerprint of the client key the runner
	// logs in with: the credential scope of every handoff.
	KeyFingerprint() string
	// Prepare creates the job's workspace on the Mac, uploads the inputs
	// and has the Mac re-hash them; a mismatch is an error wrapping
	// ErrMacInputMismatch and nothing runs.
	Prepare(ctx context.Context, job MacJob) (MacWorkspace, error)
	// Run runs the step detached in the workspace, writes its log to log as
	// it grows (surviving dropped connections), kills it at its timeout and
	// hashes its declared outputs on the Mac.
	Run(ctx context.Context, ws MacWorkspace, step MacStep, log io.Writer) (MacStepResult, error)
	// Download writes the output (one of Run's) to w.
	Download(ctx context.Context, ws MacWorkspace, out MacOutput, w io.Writer) error
	// Release removes the workspace and any process left of the step, and
	// reports what it confirmed gone.
	Release(ctx context.Context, ws MacWorkspace) MacCleanup
}

// Errors a MacRunner wraps so that the record can name the failed check.
var (
	// ErrMacHostKey: the Mac presented a host key other than the pinned one.
	ErrMacHostKey = errors.New("mac host key does not match the pinned fingerprint")
	// ErrMacInputMismatch: an uploaded input hashed differently on the Mac.
	ErrMacInputMismatch = errors.New("mac input hash mismatch")
	// ErrMacOutputMissing: a declared output was not produced.
	ErrMacOutputMissing = errors.New("mac output missing")
)

// MacJob is one frozen, approved handoff as the runner receives it.
type MacJob struct {
	TaskID    string
	HandoffID string
	Inputs    []MacInput
}

// MacInput is one frozen input: its bytes come only from Open and must hash
// to SHA256.
type MacInput struct {
	Name   string // a store.ValidName; the file name in the workspace's inputs/
	SHA256 string // lower-case hex
	Size   int64
	Open   func(ctx context.Context) (io.ReadCloser, error)
}

// MacStep is a contract step, resolved: nothing in it comes from the agent.
type MacStep struct {
	Name    string
	Argv    []string
	Env     map[string]string
	Timeout time.Duration
	Outputs []string // clean relative paths in the workspace
}

// MacWorkspace is a prepared workspace on the Mac.
type MacWorkspace struct {
	// Dir is the workspace directory on the Mac (relative to the runner
	// user's home when not absolute). Inputs are in Dir/inputs; steps run
	// in Dir.
	Dir string
	// HashTool is the program the Mac verified hashes with (sha256sum or
	// shasum).
	HashTool string
	// System is what `uname -srm` printed on the Mac.
	System string
	// Staged maps each input name to its path on the Mac.
	Staged map[string]string
}

// MacStepResult is how a step ended.
type MacStepResult struct {
	ExitCode   int // -1 when the step was killed or its exit code was lost
	TimedOut   bool
	Killed     bool // the process group was killed and confirmed gone
	KillDetail string
	StartedAt  time.Time
	EndedAt    time.Time
	LogSHA256  string // of every log byte written to the writer
	LogBytes   int64
	Reconnects int // connections re-established while the step ran
	Outputs    []MacOutput
}

// MacOutput is a declared output as the Mac hashed it.
type MacOutput struct {
	Path    string // as declared
	SHA256  string // hashed on the Mac; for a directory, of its tar archive
	Size    int64
	Dir     bool // a directory, downloaded as a tar archive
	Missing bool
	Remote  string // the file Download reads, relative to the workspace
}

// MacCleanup is what Release confirmed.
type MacCleanup struct {
	WorkspaceRemoved bool   `json:"workspace_removed"`
	ProcessesGone    bool   `json:"processes_gone"`
	Error            string `json:"error,omitempty"`
}
