// Package policy decides whether one agent tool call (run_command,
// write_file, read_file, export_artifact, handoff_to_mac) is allowed by a
// task's sandbox contract, and with which effective values: the cleaned path,
// the clamped timeout, the environment and credentials a command receives,
// the network plan a sandbox is created with.
//
// A decision is a value, not an error. The engine is default-deny and fails
// closed: anything it cannot fully analyse is denied with a reason the agent
// can act on.
//
// # Commands
//
// A command line is parsed as a bash program (mvdan.cc/sh); the backend
// must run it with bash. Every simple command anywhere in it (pipelines,
// lists, subshells, blocks, if/while/for/case bodies, sh -c strings) must
// match a commands.allow rule. The choices the design left open:
//
//   - No parameter expansion at all: the "small safe set" is empty. Values
//     are written literally or passed in the env argument.
//   - Command and process substitution, arithmetic, functions, background
//     jobs, coprocesses, [[ ]], arrays, ANSI-C and locale quoting, brace
//     expansion, extended globs and shell variable assignments are refused.
//   - Globs are allowed in arguments only when the pattern starts with a
//     literal character other than '-' (src/*.py, ./*), so a file name can
//     never become a flag; never in program names or redirection targets.
//   - cd is a builtin allowed to a literal directory inside paths.read,
//     outside loops; every directory a command may run in is tracked and
//     relative paths must be allowed from each. true, false and ':' are
//     always allowed. Builtins that change the shell (eval, source, exec,
//     export, declare, set, trap, alias, printf -v, read ...) never are.
//   - Wrappers (env, timeout, nice, nohup, stdbuf, setsid, ionice, time,
//     xargs, busybox, sh/bash/dash -c) need a rule with wrapper: true; the
//     wrapped command is extracted and checked like any other. Behind xargs,
//     which appends arguments nobody can see, programs with built-in flag
//     knowledge and wrappers are refused. Other wrappers (sudo, su, watch,
//     zsh ...) are always refused.
//   - Built-in knowledge of exec-capable flags (find -exec, git -c, sed e,
//     awk system(), tar -I, rg --pre, curl -K ...) refuses them unless the
//     rule lists the flag in allow_flags; long options are matched with
//     getopt's abbreviations, short options inside clusters.
//   - A credential is injected only if every simple command (wrappers
//     included; cd, true, false and ':' excepted) matches one of its grants.
//   - Writes stay inside paths.write whichever way they are made:
//     write_file, redirections, and the destinations of tee, dd, sort -o,
//     curl -o, cp, mv, rm, ln, install, chmod, mkdir, touch ... (globs there
//     only where no component could match ".."). They never target files
//     an allowed program would then run: a path-qualified rule's program,
//     shell start-up files, and allowed programs' configuration
//     (.git/config and .git/hooks, .npmrc, pip.conf ...).
//
// # Purity
//
// policy never performs I/O, never reads the clock, the environment or the
// file system, never logs and takes no context; deps_test.go keeps it that
// way. Its checks are necessary, not sufficient: symlinks, the real file
// system and the network are confined by the sandbox.
package policy
