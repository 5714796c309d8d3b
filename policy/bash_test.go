package policy

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"mvdan.cc/sh/v3/syntax"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

// TestAllowedCommandsRunOnlyAllowedProgramsInBash is a differential test
// against the real shell: every command of the fuzz seed corpus that the
// engine allows is run by bash with xtrace on, in a scratch directory, with
// PATH holding only logging stand-ins for the programs (real bash stands in
// for sh and bash, so nested sh -c strings run too). Every command bash
// traced and every program it started must be one the contract allows. A
// disagreement between the engine's parse and bash's shows up here.
func TestAllowedCommandsRunOnlyAllowedProgramsInBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed")
	}
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	bin := filepath.Join(dir, "bin")
	logFile := filepath.Join(dir, "exec.log")
	require.NoError(t, os.MkdirAll(filepath.Join(work, "src"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(work, "scripts"), 0o755))
	require.NoError(t, os.MkdirAll(bin, 0o755))

	c := devContract()
	c.Sandbox.Workdir = work
	c.Paths = contracts.Paths{Read: []string{work}, Write: []string{work}}
	allowed := map[string]bool{"cd": true, "true": true, "false": true, ":": true}
	for _, r := range c.Commands.Allow {
		allowed[path.Base(r.Run)] = true
	}
	// Stand-ins log their name and do nothing; bash and sh are real.
	shim := "#!/bin/sh\necho \"${0##*/}\" >> " + logFile + "\n"
	names := []string{"rm", "id", "nc", "sudo", "python", "make", "printenv", "base64", "chmod", "kill", "exit"}
	for n := range allowed {
		names = append(names, n)
	}
	for _, n := range names {
		if n == "bash" || n == "sh" || n == "cd" || n == ":" || strings.Contains(n, "/") {
			continue
		}
		require.NoError(t, os.WriteFile(filepath.Join(bin, n), []byte(shim), 0o755))
	}
	require.NoError(t, os.Symlink(bash, filepath.Join(bin, "bash")))
	require.NoError(t, os.Symlink(bash, filepath.Join(bin, "sh")))
	require.NoError(t, os.WriteFile(filepath.Join(work, "scripts", "test.sh"), []byte(shim), 0o755))

	corpus := "testdata/fuzz/FuzzDecide/*"
	if dir := os.Getenv("POLICY_BASH_CORPUS"); dir != "" {
		corpus = filepath.Join(dir, "*") // e.g. the fuzz cache, to hunt for differentials
	}
	seeds, err := filepath.Glob(corpus)
	require.NoError(t, err)
	cmds := append([]string{}, fuzzSeeds...)
	for _, f := range seeds {
		if cmd, ok := readSeed(f); ok {
			cmds = append(cmds, cmd)
		}
	}
	ran := 0
	for _, cmd := range cmds {
		d := DecideRun(c, RunCall{Command: cmd})
		if !d.Allow {
			continue
		}
		ran++
		require.NoError(t, os.WriteFile(logFile, nil, 0o644))
		var trace bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		p := exec.CommandContext(ctx, bash, "-x", "-c", cmd)
		p.Dir = work
		p.Env = []string{"PATH=" + bin, "HOME=" + dir, "PS4=+ "}
		p.Stderr = &trace
		p.Stdin = strings.NewReader("")
		_ = p.Run() // the stand-ins and missing files make many commands fail; only what ran matters
		cancel()
		for _, line := range strings.Split(trace.String(), "\n") {
			name, ok := tracedProgram(line)
			if ok && !allowed[name] && !plainAllowed(c.Commands.Allow, name) {
				t.Errorf("allowed %q, but bash ran %q (trace line %q)", cmd, name, line)
			}
		}
		logged, err := os.ReadFile(logFile)
		require.NoError(t, err)
		for _, name := range strings.Fields(string(logged)) {
			if !allowed[name] {
				t.Errorf("allowed %q, but bash started %q", cmd, name)
			}
		}
	}
	t.Logf("%d allowed commands run in bash", ran)
	require.Greater(t, ran, 50, "too few allowed commands exercised")
}

// tracedProgram returns the program name of one xtrace line ("+ ls -la").
func tracedProgram(line string) (string, bool) {
	if !strings.HasPrefix(line, "+") {
		return "", false // the programs' own error output
	}
	line = strings.TrimLeft(line, "+")
	line = strings.TrimPrefix(line, " ")
	if line == "" {
		return "", false
	}
	for _, kw := range []string{"for ", "case ", "select "} {
		if strings.HasPrefix(line, kw) {
			return "", false // a loop or case header; its body is traced line by line
		}
	}
	f, err := syntax.NewParser().Parse(strings.NewReader(line), "")
	if err != nil || len(f.Stmts) == 0 {
		return strings.Fields(line)[0], true // unparsable: judge by its first word
	}
	ce, ok := f.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(ce.Args) == 0 {
		return "", false // a bare assignment or a compound header
	}
	name, ok := plainWord(ce.Args[0])
	if !ok {
		return ce.Args[0].Lit(), true
	}
	return name, true
}

// readSeed reads the command of a FuzzDecide corpus file.
func readSeed(file string) (string, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", false
	}
	lines := strings.SplitN(string(data), "\n", 3)
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "string(") {
		return "", false
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "string("), ")"))
	return s, err == nil
}
