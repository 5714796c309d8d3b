package policy

import (
	"time"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

// devContract is a quickstart-like contract built in Go: everyday tools,
// git read-only, workdir writable, allowlisted network, one credential.
func devContract() *contracts.Contract {
	return &contracts.Contract{
		Version: 1,
		Task:    contracts.Task{ID: "task-test"},
		Sandbox: contracts.Sandbox{Backend: contracts.BackendLocal, Workdir: "/work"},
		Commands: contracts.Commands{
			DefaultTimeout: contracts.Duration(60 * time.Second),
			MaxTimeout:     contracts.Duration(10 * time.Minute),
			Allow: []contracts.CommandRule{
				{Run: "pytest"}, // 0
				{Run: "git", Subcommands: []string{"status", "diff", "log", "show", "fetch", "clone", "grep"}}, // 1
				{Run: "python3"},                // 2
				{Run: "ls"},                     // 3
				{Run: "grep"},                   // 4
				{Run: "find"},                   // 5
				{Run: "echo"},                   // 6
				{Run: "cat"},                    // 7
				{Run: "sort"},                   // 8
				{Run: "head"},                   // 9
				{Run: "sed"},                    // 10
				{Run: "awk"},                    // 11
				{Run: "tar"},                    // 12
				{Run: "rg"},                     // 13
				{Run: "curl"},                   // 14
				{Run: "./scripts/test.sh"},      // 15
				{Run: "env", Wrapper: true},     // 16
				{Run: "timeout", Wrapper: true}, // 17
				{Run: "xargs", Wrapper: true},   // 18
				{Run: "bash", Wrapper: true},    // 19
				{Run: "nice"},                   // 20: not a wrapper rule
				{Run: "pip", Subcommands: []string{"install", "list"}}, // 21
				{Run: "tee"},   // 22
				{Run: "wc"},    // 23
				{Run: "rsync"}, // 24
				{Run: "npm", Subcommands: []string{"install", "test", "ci"}}, // 25
				{Run: "wget"},              // 26
				{Run: "sh", Wrapper: true}, // 27
				{Run: "test"},              // 28
				{Run: "/usr/bin/make"},     // 29
				{Run: "ssh"},               // 30
				{Run: "printf"},            // 31
			},
			Env: contracts.EnvPolicy{Pass: []string{"CI", "PYTHONPATH", "LD_PRELOAD"}},
		},
		Paths: contracts.Paths{
			Read:   []string{"/work", "/opt/data"},
			Write:  []string{"/work"},
			Export: []string{"/work/dist"},
		},
		Network: contracts.Network{Egress: contracts.EgressAllowlist, Allow: []string{"pypi.org", "files.pythonhosted.org", "*.github.com", "github.com", "10.1.0.0/16", "2001:db8::/32"}},
		Credentials: []contracts.Credential{
			{Name: "GITHUB_TOKEN", From: "env:TASK_GITHUB_TOKEN", Grant: []contracts.Grant{{Run: "git", Subcommands: []string{"fetch", "clone"}}}},
		},
		Limits: contracts.Limits{FileBytes: 1 << 20, OutputBytes: 1 << 20},
		Mac: &contracts.Mac{
			Steps: map[string]contracts.MacStep{
				"build": {Argv: []string{"xcodebuild", "build"}},
				"test":  {Argv: []string{"xcodebuild", "test"}},
			},
		},
	}
}

// offlineContract is devContract with egress none.
func offlineContract() *contracts.Contract {
	c := devContract()
	c.Network = contracts.Network{Egress: contracts.EgressNone}
	return c
}
