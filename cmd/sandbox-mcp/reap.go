package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b"
	"github.com/sandbox-mcp/sandbox-mcp/store"
	"github.com/sandbox-mcp/sandbox-mcp/tools"
)

func init() {
	commands["reap"] = command{
		summary: "kill sandboxes a crashed server left behind (by task label) and remove stale local sandbox directories",
		run:     runReap,
	}
}

// runReap finds what a server that did not shut down cleanly left behind.
//
// With --state DIR (one task's state directory): if a server still holds
// the directory, nothing is touched. Otherwise every E2B sandbox labelled
// with the task's id is killed — except the one the task record says was
// paused on purpose at a clean shutdown (kept for the next start unless
// --include-paused) — and leftover local sandbox directories are removed.
//
// With --all-tasks: every E2B sandbox labelled by any sandbox-mcp server is
// killed. Use it only when no server is running against that E2B account.
func runReap(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	state := fs.String("state", "", "a task's state `DIR` (as given to serve --state)")
	all := fs.Bool("all-tasks", false, "kill every sandbox any sandbox-mcp server created (E2B only)")
	includePaused := fs.Bool("include-paused", false, "also kill the sandbox the task paused at a clean shutdown")
	dryRun := fs.Bool("dry-run", false, "say what would be done, do nothing")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sandbox-mcp reap (--state DIR | --all-tasks) [--include-paused] [--dry-run]")
		fmt.Fprintln(stderr, "E2B sandboxes are reached with E2B_API_KEY (and E2B_API_URL / E2B_SANDBOX_URL).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitCode(2, "")
	}
	if (*state == "") == !*all || fs.NArg() > 0 {
		fs.Usage()
		return exitCode(2, "reap: give exactly one of --state DIR or --all-tasks")
	}
	r := reaper{out: stdout, dryRun: *dryRun}
	if *all {
		client, err := reapClient()
		if err != nil {
			return err
		}
		return r.kill(ctx, client, nil, "")
	}

	if _, err := os.Stat(filepath.Join(*state, "store")); err != nil {
		return exitCode(1, fmt.Sprintf("reap: %s is not a sandbox-mcp state directory (no store in it)", *state))
	}
	st, err := store.Open(filepath.Join(*state, "store"), store.Options{LockTimeout: 200 * time.Millisecond})
	if err != nil {
		fmt.Fprintf(stdout, "a server is using %s: nothing reaped (%v)\n", *state, err)
		return nil
	}
	defer st.Close()
	tasks, err := st.ListTasks(ctx)
	if err != nil {
		return err
	}
	if err := r.removeLocalDirs(filepath.Join(*state, "sandboxes")); err != nil {
		return err
	}
	for _, t := range tasks {
		if t.Backend != "e2b" {
			continue
		}
		keep := ""
		if t.Status == store.StatusPaused && !*includePaused {
			keep = t.SandboxID
		}
		client, err := reapClient()
		if err != nil {
			return err
		}
		if err := r.kill(ctx, client, map[string]string{tools.MetaTask: t.ID}, keep); err != nil {
			return err
		}
		if keep == "" && (t.Status == store.StatusRunning || t.Status == store.StatusPaused) {
			t.Status, t.UpdatedAt = store.StatusKilled, time.Now()
			if !r.dryRun {
				if _, err := st.PutTask(ctx, t); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

type reaper struct {
	out    io.Writer
	dryRun bool
}

func reapClient() (*e2b.Client, error) {
	key := os.Getenv("E2B_API_KEY")
	if key == "" {
		return nil, exitCode(1, "reap: E2B_API_KEY is not set (needed to list and kill E2B sandboxes)")
	}
	return e2b.New(e2b.Options{APIURL: os.Getenv("E2B_API_URL"), SandboxURL: os.Getenv("E2B_SANDBOX_URL"), APIKey: e2b.Secret(key)})
}

// kill kills every sandbox whose metadata matches (any sandbox-mcp label
// when match is nil), except keep.
func (r reaper) kill(ctx context.Context, client *e2b.Client, match map[string]string, keep string) error {
	infos, err := client.List(ctx, match)
	if err != nil {
		return fmt.Errorf("reap: list sandboxes: %w", err)
	}
	for _, info := range infos {
		task, ours := info.Metadata[tools.MetaTask]
		switch {
		case !ours:
			continue
		case info.ID == keep:
			fmt.Fprintf(r.out, "kept %s (task %s): paused at a clean shutdown; --include-paused kills it\n", info.ID, task)
			continue
		case r.dryRun:
			fmt.Fprintf(r.out, "would kill %s (task %s, %s)\n", info.ID, task, info.State)
			continue
		}
		err := client.Kill(ctx, info.ID)
		if err != nil && !errors.Is(err, e2b.ErrSandboxGone) {
			return fmt.Errorf("reap: kill %s: %w", info.ID, err)
		}
		fmt.Fprintf(r.out, "killed %s (task %s, %s)\n", info.ID, task, info.State)
	}
	return nil
}

// removeLocalDirs removes the directories of local sandboxes. A local
// sandbox lives only as long as the server that started it, so with the
// server gone every directory here is left over.
func (r reaper) removeLocalDirs(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if r.dryRun {
			fmt.Fprintf(r.out, "would remove %s\n", p)
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("reap: %w", err)
		}
		fmt.Fprintf(r.out, "removed %s\n", p)
	}
	return nil
}
