// Package mac runs handoff_to_mac's predefined steps on a real Mac over SSH.
//
// It owns the SSH side of a handoff: a connection pinned to one host-key
// fingerprint (the first host-key algorithm whose key matches is found once
// and then required, as ssh.FixedHostKey with HostKeyAlgorithms set to that
// key's type), a fresh workspace per handoff named after the task and
// handoff ids, inputs uploaded with `cat` over stdin and re-hashed on the
// Mac (sha256sum or shasum, whichever exists) before anything runs, the step
// started detached in its own process group with a log file and an
// exit-code file, the log read back by offset (a dropped connection is
// re-dialled and reading goes on where it stopped; the step keeps running),
// the process group killed and confirmed gone at the step's timeout,
// declared outputs hashed on the Mac, and the workspace removed and checked
// gone.
//
// Every command line it sends is built here from fixed text and
// contract-defined values, each argument single-quoted; names that reach a
// path (task id, handoff id, input names) must match store.ValidName.
// Package mac must never put anything an agent sent into a command line,
// never accept a host key other than the pinned one, and never read keys,
// flags or environment variables itself: cmd hands it a signer.
package mac
