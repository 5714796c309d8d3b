package mac

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-mcp/sandbox-mcp/tools"
)

// maxChunk is the most log one poll reads.
const maxChunk = 1 << 20

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

func checkStep(step tools.MacStep) error {
	if len(step.Argv) == 0 {
		return fmt.Errorf("mac: step %q has no argv", step.Name)
	}
	for _, a := range step.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("mac: step %q: argv holds a NUL byte", step.Name)
		}
	}
	for k, v := range step.Env {
		if !envNameRE.MatchString(k) || strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("mac: step %q: bad environment variable %q", step.Name, k)
		}
	}
	for _, o := range step.Outputs {
		if c := path.Clean(o); c != o || c == "." || c == ".." || strings.HasPrefix(c, "../") || path.IsAbs(c) || strings.ContainsAny(c, "\x00\n") {
			return fmt.Errorf("mac: step %q: output %q is not a clean relative path", step.Name, o)
		}
	}
	if step.Timeout <= 0 {
		return fmt.Errorf("mac: step %q has no timeout", step.Name)
	}
	return nil
}

// launchScript starts the step detached: in a new session (setsid) or, where
// setsid is missing (macOS), a new process group (perl's setpgrp), with
// stdin from /dev/null and output to .smcp/log. The inner shell records its
// pid (= the group id) and, when the step ends, its exit status.
func (r *Runner) launchScript(ws tools.MacWorkspace, step tools.MacStep) string {
	var inner strings.Builder
	inner.WriteString("echo $$ > .smcp/pgid.tmp && mv .smcp/pgid.tmp .smcp/pgid\n")
	// A backstop in case the server is gone at the deadline: the group
	// kills itself a grace period after it. Release kills the watchdog
	// with the rest of the group.
	grace := int64((step.Timeout + r.o.WatchdogGrace + time.Second - 1) / time.Second)
	inner.WriteString("(sleep " + strconv.FormatInt(grace, 10) + "; kill -s KILL -- -$$) < /dev/null > /dev/null 2>&1 &\n")
	keys := make([]string, 0, len(step.Env))
	for k := range step.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		inner.WriteString("export " + k + "=" + quote(step.Env[k]) + "\n")
	}
	inner.WriteString(quoteArgv(step.Argv) + " >> .smcp/log 2>&1 < /dev/null\n")
	inner.WriteString("echo $? > .smcp/exit.tmp && mv .smcp/exit.tmp .smcp/exit\n")
	q := quote(inner.String())
	return "cd " + quote(ws.Dir) + " && rm -f .smcp/exit .smcp/pgid && : > .smcp/log && " +
		"if command -v setsid >/dev/null 2>&1; then setsid sh -c " + q + " < /dev/null > /dev/null 2>&1 & " +
		"else perl -e 'setpgrp(0,0); exec @ARGV or die' sh -c " + q + " < /dev/null > /dev/null 2>&1 & fi"
}

// pollScript prints the step's state, its process group, the log's size
// and up to maxChunk log bytes from offset. The state is read before the
// log, so once it says "exit" the log read after it is complete.
func pollScript(ws tools.MacWorkspace, offset int64) string {
	return "cd " + quote(ws.Dir+"/.smcp") + ` && { if [ -f exit ]; then printf 'exit %s\n' "$(cat exit)"; else echo running; fi; ` +
		`if [ -f pgid ]; then cat pgid; else echo; fi; wc -c < log | tr -d ' '; tail -c +` + strconv.FormatInt(offset+1, 10) + ` log | head -c ` + strconv.Itoa(maxChunk) + `; }`
}

type pollResult struct {
	done  bool
	code  int
	pgid  string
	size  int64
	chunk []byte
}

func parsePoll(out []byte) (pollResult, error) {
	var p pollResult
	lines := bytes.SplitN(out, []byte("\n"), 4)
	if len(lines) < 3 {
		return p, fmt.Errorf("mac: unexpected poll output %q", firstLine(string(out)))
	}
	status := string(lines[0])
	if code, ok := strings.CutPrefix(status, "exit "); ok {
		c, err := strconv.Atoi(strings.TrimSpace(code))
		if err != nil {
			c = -1
		}
		p.done, p.code = true, c
	} else if status != "running" {
		return p, fmt.Errorf("mac: unexpected step state %q", firstLine(status))
	}
	p.pgid = strings.TrimSpace(string(lines[1]))
	size, err := strconv.ParseInt(strings.TrimSpace(string(lines[2])), 10, 64)
	if err != nil {
		return p, fmt.Errorf("mac: unexpected log size %q", firstLine(string(lines[2])))
	}
	p.size = size
	if len(lines) == 4 {
		p.chunk = lines[3]
	}
	return p, nil
}

// Run starts the step detached and follows it to its end: see
// tools.MacRunner. ctx ending kills the step as its timeout would.
func (r *Runner) Run(ctx context.Context, ws tools.MacWorkspace, step tools.MacStep, log io.Writer) (tools.MacStepResult, error) {
	res := tools.MacStepResult{ExitCode: -1}
	if err := checkStep(step); err != nil {
		return res, err
	}
	h := sha256.New()
	res.StartedAt = r.o.Now()
	if _, err := r.exec(ctx, r.launchScript(ws, step), nil, nil, 0); err != nil {
		// Not retried: whether it started is unknown. Release kills it if so.
		res.EndedAt = r.o.Now()
		return res, fmt.Errorf("mac: start step %s: %w", step.Name, err)
	}
	r.log.Info("step started", "step", step.Name, "workspace", ws.Dir)
	deadline := res.StartedAt.Add(step.Timeout)
	var offset int64
	finish := func() {
		res.LogSHA256 = hex.EncodeToString(h.Sum(nil))
		res.LogBytes = offset
		res.EndedAt = r.o.Now()
	}
	follow := func(ctx context.Context) (pollResult, error) {
		for {
			out, n, err := r.execRetry(ctx, pollScript(ws, offset), 0)
			res.Reconnects += n
			if err != nil {
				return pollResult{}, err
			}
			p, err := parsePoll(out)
			if err != nil {
				return p, err
			}
			if len(p.chunk) > 0 {
				h.Write(p.chunk)
				offset += int64(len(p.chunk))
				if _, err := log.Write(p.chunk); err != nil {
					return p, fmt.Errorf("mac: write log: %w", err)
				}
			}
			if len(p.chunk) < maxChunk || offset >= p.size {
				return p, nil
			}
		}
	}
	started := false
	for {
		p, err := follow(ctx)
		if err != nil && ctx.Err() == nil {
			finish()
			return res, fmt.Errorf("mac: follow step %s: %w", step.Name, err)
		}
		if err == nil && p.done {
			res.ExitCode = p.code
			break
		}
		if err == nil && p.pgid != "" {
			started = true
		}
		now := r.o.Now()
		if ctx.Err() != nil || now.After(deadline) {
			res.TimedOut = ctx.Err() == nil
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.o.ReconnectFor+r.o.CommandTimeout)
			res.Killed, res.KillDetail = r.kill(kctx, ws)
			// Whatever the step wrote up to its end.
			if p, err := follow(kctx); err == nil && p.done {
				res.ExitCode = p.code
			}
			cancel()
			finish()
			if ctx.Err() != nil {
				return res, fmt.Errorf("mac: step %s: %w (%s)", step.Name, ctx.Err(), res.KillDetail)
			}
			return res, nil
		}
		if !started && now.Sub(res.StartedAt) > 15*time.Second {
			finish()
			return res, fmt.Errorf("mac: step %s did not start within 15s (neither setsid nor perl on the Mac?)", step.Name)
		}
		select {
		case <-ctx.Done():
		case <-time.After(r.o.PollInterval):
		}
	}
	finish()
	r.log.Info("step ended", "step", step.Name, "exit_code", res.ExitCode, "reconnects", res.Reconnects)
	outs, err := r.hashOutputs(ctx, ws, step.Outputs)
	res.Outputs = outs
	if err != nil {
		return res, err
	}
	return res, nil
}

// kill ends the step's process group (TERM, then KILL after 5s) and checks
// that no process of it is left.
func (r *Runner) kill(ctx context.Context, ws tools.MacWorkspace) (bool, string) {
	script := `P=$(cat ` + quote(ws.Dir+"/.smcp/pgid") + ` 2>/dev/null); [ -n "$P" ] || { echo nopgid; exit 0; }
kill -s TERM -- -"$P" 2>/dev/null; i=0
while kill -0 -- -"$P" 2>/dev/null && [ $i -lt 20 ]; do sleep 0.25; i=$((i+1)); done
kill -s KILL -- -"$P" 2>/dev/null; sleep 0.2
if kill -0 -- -"$P" 2>/dev/null; then echo "alive $P"; else echo "gone $P"; fi`
	out, _, err := r.execRetry(ctx, script, 0)
	if err != nil {
		return false, "kill failed: " + err.Error()
	}
	f := strings.Fields(string(out))
	switch {
	case len(f) == 2 && f[0] == "gone":
		return true, "process group " + f[1] + " killed; no process of it is left"
	case len(f) == 2 && f[0] == "alive":
		return false, "process group " + f[1] + " still has processes after SIGKILL"
	case len(f) == 1 && f[0] == "nopgid":
		return false, "the step's process group was never recorded"
	}
	return false, fmt.Sprintf("unexpected kill output %q", firstLine(string(out)))
}

// hashOutputs hashes each declared output on the Mac. A directory is
// archived with tar into .smcp/out first; a symlink, or a path whose
// directory resolves outside the workspace, is refused.
func (r *Runner) hashOutputs(ctx context.Context, ws tools.MacWorkspace, outputs []string) ([]tools.MacOutput, error) {
	if len(outputs) == 0 {
		return nil, nil
	}
	hashCmd := "sha256sum"
	if ws.HashTool == "shasum" {
		hashCmd = "shasum -a 256"
	}
	var b strings.Builder
	b.WriteString("cd " + quote(ws.Dir) + " && W=$(pwd -P) && hashf() { " + hashCmd + " < \"$1\" | cut -d' ' -f1; }; sizef() { wc -c < \"$1\" | tr -d ' '; }\n")
	for i, o := range outputs {
		tarName := fmt.Sprintf(".smcp/out/%d.tar", i)
		fmt.Fprintf(&b, `p=%s; d=$(cd "$(dirname "$p")" 2>/dev/null && pwd -P)
if [ -L "$p" ]; then echo symlink
elif [ -n "$d" ] && [ "${d#"$W"}" = "$d" ]; then echo outside
elif [ -f "$p" ]; then echo "f $(hashf "$p") $(sizef "$p")"
elif [ -d "$p" ]; then tar -cf %s -C "$(dirname "$p")" "$(basename "$p")" && echo "d $(hashf %s) $(sizef %s)"
else echo missing; fi
`, quote(o), tarName, tarName, tarName)
	}
	out, _, err := r.execRetry(ctx, b.String(), 0)
	if err != nil {
		return nil, fmt.Errorf("mac: hash outputs: %w", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != len(outputs) {
		return nil, fmt.Errorf("mac: hash outputs: unexpected output %q", firstLine(string(out)))
	}
	res := make([]tools.MacOutput, len(outputs))
	var missing []string
	for i, l := range lines {
		o := tools.MacOutput{Path: outputs[i], Remote: outputs[i]}
		f := strings.Fields(l)
		switch {
		case len(f) == 3 && (f[0] == "f" || f[0] == "d") && isHex64(f[1]):
			o.SHA256 = f[1]
			o.Size, _ = strconv.ParseInt(f[2], 10, 64)
			if f[0] == "d" {
				o.Dir, o.Remote = true, fmt.Sprintf(".smcp/out/%d.tar", i)
			}
		case len(f) == 1 && (f[0] == "symlink" || f[0] == "outside"):
			o.Missing = true
			missing = append(missing, outputs[i]+" ("+map[string]string{"symlink": "a symlink", "outside": "resolves outside the workspace"}[f[0]]+")")
		default:
			o.Missing = true
			missing = append(missing, outputs[i])
		}
		res[i] = o
	}
	if len(missing) > 0 {
		return res, fmt.Errorf("mac: %w: %s", tools.ErrMacOutputMissing, strings.Join(missing, ", "))
	}
	return res, nil
}

// Download copies one output (as Run hashed it) to w.
func (r *Runner) Download(ctx context.Context, ws tools.MacWorkspace, out tools.MacOutput, w io.Writer) error {
	if out.Missing || out.Remote == "" {
		return fmt.Errorf("mac: download %s: %w", out.Path, tools.ErrMacOutputMissing)
	}
	if c := path.Clean(out.Remote); c != out.Remote || path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
		return fmt.Errorf("mac: download %q: not a path inside the workspace", out.Remote)
	}
	timeout := r.o.CommandTimeout + time.Duration(out.Size/(1<<20))*time.Second
	// -L refuses a symlink swapped in after hashing.
	_, err := r.exec(ctx, "cd "+quote(ws.Dir)+" && if [ -L "+quote(out.Remote)+" ]; then echo symlink >&2; exit 1; fi; cat "+quote(out.Remote), nil, w, timeout)
	if err != nil {
		return fmt.Errorf("mac: download %s: %w", out.Path, err)
	}
	return nil
}
