package contracts

import "time"

// Contract is one agent task's sandbox contract with every default applied.
// It is written by a trusted author; nothing the agent sends can change it.
// The JSON field names are the contract file's keys (see schema.json).
type Contract struct {
	Version     int          `json:"version"`
	Task        Task         `json:"task"`
	Sandbox     Sandbox      `json:"sandbox"`
	Commands    Commands     `json:"commands"`
	Paths       Paths        `json:"paths"`
	Network     Network      `json:"network"`
	Credentials []Credential `json:"credentials"`
	Limits      Limits       `json:"limits"`
	Mac         *Mac         `json:"mac,omitempty"`
}

// Task identifies the work the contract governs.
type Task struct {
	ID     string  `json:"id"`              // appears in every log line, artifact name and record
	Owner  string  `json:"owner,omitempty"` // the human who owns failures and approvals
	Source *Source `json:"source,omitempty"`
}

// Source is the code revision the task works on.
type Source struct {
	Repo     string `json:"repo,omitempty"`
	Revision string `json:"revision,omitempty"`
}

// Backend names a sandbox backend.
type Backend string

// The sandbox backends.
const (
	BackendLocal Backend = "local" // the embedded E2B-compatible sandbox
	BackendE2B   Backend = "e2b"   // E2B's cloud
)

// OnExpiry says what happens to a sandbox at the end of its lifetime or task.
type OnExpiry string

// The expiry actions.
const (
	ExpiryKill  OnExpiry = "kill"
	ExpiryPause OnExpiry = "pause"
)

// Sandbox describes the sandbox the task runs in.
type Sandbox struct {
	Backend  Backend  `json:"backend"`   // default local
	Template string   `json:"template"`  // default "base"
	Lifetime Duration `json:"lifetime"`  // default 30m
	OnExpiry OnExpiry `json:"on_expiry"` // default kill
	Workdir  string   `json:"workdir"`   // default /home/user/work; relative paths resolve here
}

// Commands is the command policy of run_command.
type Commands struct {
	DefaultTimeout Duration      `json:"default_timeout"` // default 60s
	MaxTimeout     Duration      `json:"max_timeout"`     // default 10m
	Allow          []CommandRule `json:"allow"`
	Env            EnvPolicy     `json:"env"`
}

// CommandRule allows one program. Rules are referred to by their path in the
// contract, such as "commands.allow[2]".
type CommandRule struct {
	// Run is the program: a bare name ("pytest"), looked up on the sandbox's
	// PATH, or a path ("./scripts/test.sh", "/usr/bin/make") that matches only
	// itself after cleaning. Never a command line.
	Run string `json:"run"`
	// Subcommands, when set, limits the program's first non-flag argument
	// (git status, go test). Empty means any.
	Subcommands []string `json:"subcommands,omitempty"`
	// AllowFlags opts into flags the engine refuses by default because they run
	// or write something (find -exec, git -c, sed -i ...). Exact flag names.
	AllowFlags []string `json:"allow_flags,omitempty"`
	// Wrapper marks a program that runs another program (env, timeout, xargs,
	// nice ...) as allowed; the wrapped command is then checked against the
	// other rules. Without it a wrapper is always denied.
	Wrapper bool `json:"wrapper,omitempty"`
}

// EnvPolicy says which environment variables the agent may set.
type EnvPolicy struct {
	Pass []string `json:"pass"` // names the agent may set; never LD_*, GIT_*, PATH and kin
}

// Paths are the sandbox paths each file operation may touch. Each entry is an
// absolute, clean directory (or file) and covers everything below it.
type Paths struct {
	Read   []string `json:"read"`   // default: the workdir
	Write  []string `json:"write"`  // default: none
	Export []string `json:"export"` // default: none
}

// Egress is the network mode of a sandbox.
type Egress string

// The egress modes.
const (
	EgressNone      Egress = "none"
	EgressAllowlist Egress = "allowlist"
	EgressOpen      Egress = "open"
)

// Network is the sandbox's egress policy, enforced by the sandbox itself.
type Network struct {
	Egress Egress   `json:"egress"`          // default none
	Allow  []string `json:"allow,omitempty"` // host names, *.domain wildcards or CIDRs; allowlist only
}

// Credential is a named secret the server reads (never the agent) and injects
// into the commands its grant matches.
type Credential struct {
	Name  string  `json:"name"`  // the environment variable name inside the sandbox
	From  string  `json:"from"`  // env:VAR or file:/path, read by the server
	Grant []Grant `json:"grant"` // the commands that receive it
}

// Grant matches the commands a credential is injected into.
type Grant struct {
	Run         string   `json:"run"`
	Subcommands []string `json:"subcommands,omitempty"`
}

// Limits bound everything an agent can make large.
type Limits struct {
	OutputBytes   ByteSize `json:"output_bytes"`   // per stream of one command; default 1MiB
	FileBytes     ByteSize `json:"file_bytes"`     // write_file and read_file; default 10MiB
	ArtifactBytes ByteSize `json:"artifact_bytes"` // one exported artifact; default 200MiB
	Processes     int      `json:"processes"`      // live processes in the sandbox; default 256
	MemoryBytes   ByteSize `json:"memory_bytes"`   // sandbox memory; default 1GiB
}

// Mac is the runner and the named steps that handoff_to_mac may run.
type Mac struct {
	Runner      MacRunner          `json:"runner"`
	Approval    string             `json:"approval"`     // required | none; default required
	ApprovalTTL Duration           `json:"approval_ttl"` // how long an approval lasts; default 1h
	Steps       map[string]MacStep `json:"steps"`
}

// MacRunner is how the server reaches the Mac.
type MacRunner struct {
	SSH     string `json:"ssh"`      // user@host:port
	HostKey string `json:"host_key"` // pinned host-key fingerprint, "SHA256:..."
}

// MacStep is one predefined step; the agent names it and never changes it.
type MacStep struct {
	Argv    []string          `json:"argv"`
	Timeout Duration          `json:"timeout"` // default 30m
	Outputs []string          `json:"outputs,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// Duration is a time.Duration written as "30s", "10m" or "1h30m" in a contract.
type Duration time.Duration

// ByteSize is a size written as a number of bytes or with a unit: "512KiB",
// "10MiB", "1GiB" (also kB, MB, GB as powers of ten).
type ByteSize int64
