package e2blocal

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
)

// Each sandbox directory Dir/<id> has an owner lock, Dir/<id>.lock, that
// the server holding the sandbox keeps flocked from before the directory
// exists until after it is removed. A directory whose lock nobody holds was
// left by a server that died (its processes died with it: the jail kills
// them when the server goes), and New removes it. Servers sharing a Dir
// never touch each other's sandboxes.

var sandboxDirName = regexp.MustCompile(`^i[a-z0-9]{20}$`)

// lockOwner creates and locks the owner lock of dir.
func lockOwner(dir string) (*os.File, error) {
	f, err := os.OpenFile(dir+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("owner lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("owner lock %s: %w", f.Name(), err)
	}
	return f, nil
}

// releaseOwner removes and unlocks an owner lock.
func releaseOwner(f *os.File) {
	if f == nil {
		return
	}
	_ = os.Remove(f.Name())
	f.Close()
}

// reapStale removes sandbox directories under root that no live server owns.
func reapStale(root string, log *slog.Logger) {
	ents, err := os.ReadDir(root)
	if err != nil {
		log.Warn("e2blocal: cannot scan for stale sandboxes", "error", err)
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !sandboxDirName.MatchString(e.Name()) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		lock, err := lockOwner(dir)
		if err != nil {
			continue // a live server owns it
		}
		if err := removeTree(dir); err != nil {
			log.Warn("e2blocal: cannot remove a stale sandbox directory", "sandbox_id", e.Name(), "error", err)
		} else {
			log.Info("e2blocal: removed a sandbox directory left by a previous run", "sandbox_id", e.Name())
		}
		releaseOwner(lock)
	}
}

// removeTree removes dir even where a sandbox left directories without
// write or search permission.
func removeTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	err := os.RemoveAll(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
