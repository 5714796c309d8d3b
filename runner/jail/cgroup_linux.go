package jail

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupRoot is where cgroups are mounted (a variable for tests).
var cgroupRoot = "/sys/fs/cgroup"

// cgroups is a sandbox's control groups: one directory per v1 controller,
// or one v2 directory.
type cgroups struct {
	kind                  string // "cgroup v1" or "cgroup v2"
	dirs                  []string
	pids, memory, freezer bool
	pidsDir, memDir       string
	freezerDir            string
	v2                    bool
}

// newCgroups creates the sandbox's cgroups where this process may, with the
// limits set. It returns nil (rlimits only) and a note saying why when it
// cannot.
func newCgroups(name string, l Limits, asRoot bool) (*cgroups, string) {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		return newCgroupsV2(name, l, asRoot)
	}
	return newCgroupsV1(name, l)
}

func newCgroupsV1(name string, l Limits) (*cgroups, string) {
	cg := &cgroups{kind: "cgroup v1"}
	var notes []string
	mk := func(ctrl string) (string, bool) {
		base := filepath.Join(cgroupRoot, ctrl)
		if _, err := os.Stat(filepath.Join(base, "cgroup.procs")); err != nil {
			notes = append(notes, ctrl+" controller not mounted")
			return "", false
		}
		dir := filepath.Join(base, "sandbox-mcp", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			notes = append(notes, fmt.Sprintf("%s: %v", ctrl, err))
			return "", false
		}
		cg.dirs = append(cg.dirs, dir)
		return dir, true
	}
	if dir, ok := mk("pids"); ok {
		if err := writeFile(dir, "pids.max", strconv.Itoa(l.Processes)); err != nil {
			notes = append(notes, err.Error())
		} else {
			cg.pids, cg.pidsDir = true, dir
		}
	}
	if dir, ok := mk("memory"); ok {
		if err := writeFile(dir, "memory.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
			notes = append(notes, err.Error())
		} else {
			cg.memory, cg.memDir = true, dir
			// Count swap too where the kernel accounts it.
			_ = writeFile(dir, "memory.memsw.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10))
			_ = writeFile(dir, "memory.swappiness", "0")
		}
	}
	if dir, ok := mk("freezer"); ok {
		cg.freezer, cg.freezerDir = true, dir
	}
	if len(cg.dirs) == 0 {
		return nil, strings.Join(notes, "; ")
	}
	return cg, strings.Join(notes, "; ")
}

func newCgroupsV2(name string, l Limits, asRoot bool) (*cgroups, string) {
	var dir string
	if asRoot {
		parent := filepath.Join(cgroupRoot, "sandbox-mcp")
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return nil, err.Error()
		}
		// The root cgroup may hold processes; "sandbox-mcp" holds none, so
		// it may hand controllers to its children.
		_ = writeFile(cgroupRoot, "cgroup.subtree_control", "+pids +memory")
		_ = writeFile(parent, "cgroup.subtree_control", "+pids +memory")
		dir = filepath.Join(parent, name)
	} else {
		// Without root, use a delegated subtree when there is one (systemd
		// delegates user@UID.service to its user): a sibling of our own
		// cgroup, under a parent that holds no processes of its own.
		own, err := ownCgroupV2()
		if err != nil || own == "/" {
			return nil, "cgroup v2 without root and no delegated cgroup to use; rlimits only"
		}
		parent := filepath.Join(cgroupRoot, filepath.Dir(own))
		_ = writeFile(parent, "cgroup.subtree_control", "+pids +memory")
		dir = filepath.Join(parent, name)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Sprintf("cgroup v2: %v; rlimits only", err)
	}
	cg := &cgroups{kind: "cgroup v2", v2: true, dirs: []string{dir}}
	var notes []string
	if _, err := os.Stat(filepath.Join(dir, "cgroup.freeze")); err == nil {
		cg.freezer, cg.freezerDir = true, dir
	}
	if err := writeFile(dir, "pids.max", strconv.Itoa(l.Processes)); err != nil {
		notes = append(notes, "no pids controller here")
	} else {
		cg.pids, cg.pidsDir = true, dir
	}
	if err := writeFile(dir, "memory.max", strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
		notes = append(notes, "no memory controller here")
	} else {
		cg.memory, cg.memDir = true, dir
		_ = writeFile(dir, "memory.swap.max", "0")
	}
	return cg, strings.Join(notes, "; ")
}

// ownCgroupV2 is this process's cgroup v2 path ("0::/path").
func ownCgroupV2() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Clean(p), nil
		}
	}
	return "", errors.New("no cgroup v2 entry in /proc/self/cgroup")
}

func writeFile(dir, name, value string) error {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	return nil
}

// attach moves pid (a jail's init, before it starts anything) into every
// cgroup of the sandbox.
func (c *cgroups) attach(pid int) error {
	for _, d := range c.dirs {
		if err := writeFile(d, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("jail: start: %w", err)
		}
	}
	return nil
}

// freeze stops (or thaws) every task in the sandbox.
func (c *cgroups) freeze(on bool) error {
	if c.v2 {
		v := "0"
		if on {
			v = "1"
		}
		return writeFile(c.freezerDir, "cgroup.freeze", v)
	}
	v := "THAWED"
	if on {
		v = "FROZEN"
	}
	if err := writeFile(c.freezerDir, "freezer.state", v); err != nil {
		return err
	}
	// The kernel may report FREEZING for a moment; wait for the final state.
	for i := 0; i < 200; i++ {
		b, err := os.ReadFile(filepath.Join(c.freezerDir, "freezer.state"))
		if err != nil || strings.TrimSpace(string(b)) == v {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("jail: freezer did not reach %s", v)
}

// procs lists the host pids in the sandbox's cgroups.
func (c *cgroups) procs() []int {
	seen := map[int]bool{}
	var out []int
	for _, d := range c.dirs {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range bytes.Fields(b) {
			if pid, err := strconv.Atoi(string(f)); err == nil && !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	return out
}

// killAll sends SIGKILL to everything in the sandbox's cgroups.
func (c *cgroups) killAll() {
	if c.v2 {
		if writeFile(c.dirs[0], "cgroup.kill", "1") == nil {
			return
		}
	}
	for _, pid := range c.procs() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// remove deletes the sandbox's cgroup directories once they are empty.
func (c *cgroups) remove() error {
	var errs []error
	for _, d := range c.dirs {
		var err error
		for i := 0; i < 100; i++ {
			if err = os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("jail: remove cgroup: %w", err))
		}
	}
	return errors.Join(errs...)
}
