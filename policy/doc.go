// Package policy decides whether one agent tool call (run_command,
// write_file, read_file, export_artifact, handoff_to_mac) is allowed by a
// task's sandbox contract, and with which effective values: the cleaned path,
// the clamped timeout, the environment and credentials a command receives,
// the network plan a sandbox is created with.
//
// A decision is a value, not an error. The engine is default-deny and fails
// closed: a command line is parsed as a bash program and every simple command
// in it must match an allow rule; anything it cannot fully analyse (command
// substitution, parameter expansion, unknown wrappers, unparsable sed or awk
// scripts ...) is denied with a reason the agent can act on.
//
// policy is pure: it never performs I/O, never reads the clock, the
// environment or the file system, never logs and takes no context.
// deps_test.go keeps it that way. Its checks are necessary, not sufficient:
// symlinks, the real file system and the network are confined by the sandbox.
package policy
