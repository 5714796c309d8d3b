// Package tools implements the MCP tools an agent calls — run_command,
// write_file, read_file and export_artifact — one file each, and the task
// they act on.
//
// Every call follows one path: decode the arguments strictly, ask package
// policy for a decision, write the decision to the audit log, and only when
// allowed act on the sandbox with the decision's effective parameters (never
// the raw arguments). Results carry the task id and the contract hash; a
// denial is an isError result that names the rule and what is allowed. Every
// byte that leaves (results, progress, logs, manifests) passes the task's
// redactor first, so a credential's value never reaches the agent.
//
// The package never reads flags, the environment or files of the host: cmd
// hands it the contract, the credential values, the E2B client, the store
// and the loggers.
package tools
