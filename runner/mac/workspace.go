package mac

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/sandbox-mcp/sandbox-mcp/tools"
)

// validName is store.ValidName: ids and input names become path elements.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func checkName(kind, s string) error {
	if !validName.MatchString(s) || strings.Contains(s, "..") {
		return fmt.Errorf("mac: %s %q is not a plain name", kind, s)
	}
	return nil
}

// Workspace returns the workspace directory a job gets: BaseDir/<task>-<handoff>.
func (r *Runner) Workspace(taskID, handoffID string) string {
	return path.Join(r.o.BaseDir, taskID+"-"+handoffID)
}

// Prepare creates the job's workspace, uploads its inputs and verifies
// them on the Mac. On error the workspace may exist: call Release.
func (r *Runner) Prepare(ctx context.Context, job tools.MacJob) (tools.MacWorkspace, error) {
	ws, err := r.Stage(ctx, job)
	if err != nil {
		return ws, err
	}
	return ws, r.Verify(ctx, ws, job.Inputs)
}

// Stage creates a fresh workspace (refusing one that already exists) and
// uploads the inputs into its inputs/ directory. It does not verify them.
func (r *Runner) Stage(ctx context.Context, job tools.MacJob) (tools.MacWorkspace, error) {
	if err := checkName("task id", job.TaskID); err != nil {
		return tools.MacWorkspace{}, err
	}
	if err := checkName("handoff id", job.HandoffID); err != nil {
		return tools.MacWorkspace{}, err
	}
	seen := map[string]bool{}
	for _, in := range job.Inputs {
		if err := checkName("input name", in.Name); err != nil {
			return tools.MacWorkspace{}, err
		}
		if seen[in.Name] {
			return tools.MacWorkspace{}, fmt.Errorf("mac: input %q listed twice", in.Name)
		}
		seen[in.Name] = true
		if !isHex64(in.SHA256) {
			return tools.MacWorkspace{}, fmt.Errorf("mac: input %q: sha256 %q is not 64 lower-case hex digits", in.Name, in.SHA256)
		}
	}
	ws := tools.MacWorkspace{Dir: r.Workspace(job.TaskID, job.HandoffID), Staged: map[string]string{}}
	w := quote(ws.Dir)
	// mkdir without -p for the workspace itself: an existing one is refused,
	// so every handoff starts from nothing.
	script := "umask 077 && mkdir -p " + quote(r.o.BaseDir) + " && mkdir " + w + " && mkdir " + w + "/inputs " + w + "/.smcp " + w + "/.smcp/out" +
		" && { if command -v sha256sum >/dev/null 2>&1; then echo sha256sum; elif command -v shasum >/dev/null 2>&1; then echo shasum; else echo none; fi; } && uname -srm"
	out, _, err := r.execRetry(ctx, script, 0)
	if err != nil {
		return ws, fmt.Errorf("mac: create workspace %s: %w", ws.Dir, err)
	}
	lines := strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)
	ws.HashTool = lines[0]
	if len(lines) > 1 {
		ws.System = strings.TrimSpace(lines[1])
	}
	if ws.HashTool != "sha256sum" && ws.HashTool != "shasum" {
		return ws, fmt.Errorf("mac: neither sha256sum nor shasum is installed on the Mac; inputs cannot be verified there")
	}
	for _, in := range job.Inputs {
		dst := ws.Dir + "/inputs/" + in.Name
		if err := r.upload(ctx, in, dst); err != nil {
			return ws, err
		}
		ws.Staged[in.Name] = dst
	}
	return ws, nil
}

// upload copies one input with `cat` over stdin, retrying on a new
// connection if the old one is lost (cat > overwrites, so a retry is whole).
func (r *Runner) upload(ctx context.Context, in tools.MacInput, dst string) error {
	deadline := r.o.Now().Add(r.o.ReconnectFor)
	// Generous: about 1 MiB/s at worst, and never below the command timeout.
	timeout := r.o.CommandTimeout + time.Duration(in.Size/(1<<20))*time.Second
	for {
		rc, err := in.Open(ctx)
		if err != nil {
			return fmt.Errorf("mac: upload %s: open: %w", in.Name, err)
		}
		_, err = r.exec(ctx, "umask 077 && cat > "+quote(dst), rc, nil, timeout)
		rc.Close()
		if err == nil {
			return nil
		}
		if !errors.Is(err, errConnection) && !isDialError(err) || ctx.Err() != nil || r.o.Now().After(deadline) {
			return fmt.Errorf("mac: upload %s: %w", in.Name, err)
		}
		r.log.Warn("upload interrupted; retrying", "input", in.Name, "error", err)
		time.Sleep(500 * time.Millisecond)
	}
}

// Verify has the Mac hash every input against the manifest the server
// computed; a mismatch or a missing or extra file is an error wrapping
// tools.ErrMacInputMismatch.
func (r *Runner) Verify(ctx context.Context, ws tools.MacWorkspace, inputs []tools.MacInput) error {
	var manifest strings.Builder
	for _, in := range inputs {
		if err := checkName("input name", in.Name); err != nil {
			return err
		}
		if !isHex64(in.SHA256) {
			return fmt.Errorf("mac: input %q: bad sha256", in.Name)
		}
		fmt.Fprintf(&manifest, "%s  %s\n", in.SHA256, in.Name)
	}
	check := "sha256sum -c"
	if ws.HashTool == "shasum" {
		check = "shasum -a 256 -c"
	}
	// The manifest is written by the server and lives outside inputs/; the
	// count catches a file the manifest does not list.
	script := "cd " + quote(ws.Dir+"/inputs") + " && umask 077 && printf '%s' " + quote(manifest.String()) + " > ../.smcp/inputs.sha256" +
		" && n=$(ls -A | wc -l | tr -d ' ') && " + check + " ../.smcp/inputs.sha256 && [ \"$n\" = " + quote(fmt.Sprint(len(inputs))) + " ] || { echo \"files: $n\" >&2; exit 1; }"
	if len(inputs) == 0 {
		script = "cd " + quote(ws.Dir+"/inputs") + " && [ -z \"$(ls -A)\" ]"
	}
	out, _, err := r.execRetry(ctx, script, 0)
	var ee *exitError
	if errors.As(err, &ee) {
		var failed []string
		for _, l := range strings.Split(string(out), "\n") {
			if name, _, ok := strings.Cut(l, ": FAILED"); ok {
				failed = append(failed, name)
			}
		}
		detail := "the Mac found other files than the manifest lists"
		if len(failed) > 0 {
			detail = "changed on the Mac: " + strings.Join(failed, ", ")
		} else if msg := strings.TrimSpace(ee.stderr); msg != "" {
			detail += " (" + firstLine(msg) + ")"
		}
		return fmt.Errorf("mac: verify inputs in %s: %w: %s", ws.Dir, tools.ErrMacInputMismatch, detail)
	}
	if err != nil {
		return fmt.Errorf("mac: verify inputs in %s: %w", ws.Dir, err)
	}
	return nil
}

// Release kills whatever is left of the step's process group, removes the
// workspace and checks that both are gone.
func (r *Runner) Release(ctx context.Context, ws tools.MacWorkspace) tools.MacCleanup {
	if ws.Dir == "" {
		return tools.MacCleanup{WorkspaceRemoved: true, ProcessesGone: true}
	}
	w := quote(ws.Dir)
	script := `P=$(cat ` + w + `/.smcp/pgid 2>/dev/null); procs=gone
if [ -n "$P" ] && kill -0 -- -"$P" 2>/dev/null; then kill -s KILL -- -"$P" 2>/dev/null; sleep 0.3; if kill -0 -- -"$P" 2>/dev/null; then procs=alive; fi; fi
chmod -R u+rwx ` + w + ` 2>/dev/null; rm -rf ` + w + `
if [ -e ` + w + ` ]; then ws=present; else ws=removed; fi
echo "$procs $ws"`
	out, _, err := r.execRetry(ctx, script, 0)
	res := tools.MacCleanup{}
	if err != nil {
		res.Error = err.Error()
		return res
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		res.Error = fmt.Sprintf("unexpected cleanup output %q", firstLine(string(out)))
		return res
	}
	res.ProcessesGone = f[0] == "gone"
	res.WorkspaceRemoved = f[1] == "removed"
	switch {
	case !res.ProcessesGone:
		res.Error = "processes of the step are still alive after SIGKILL"
	case !res.WorkspaceRemoved:
		res.Error = "the workspace is still there after rm -rf"
	}
	return res
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
