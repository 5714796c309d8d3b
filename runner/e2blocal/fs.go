package e2blocal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/filesystem"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/filesystem/filesystemconnect"
	"github.com/sandbox-mcp/sandbox-mcp/runner/jail"
)

const maxListEntries = 10000

// sandboxFS reaches a sandbox's writable directories from the host. Every
// access goes through an os.Root, so neither ".." nor a symlink can leave
// /home/user or /tmp.
type sandboxFS struct {
	home, tmp *os.Root
	chown     bool // files the server writes must be chowned to uid/gid
	uid, gid  int  // host owner of the sandbox user's files
}

func newSandboxFS(j *jail.Sandbox) (*sandboxFS, error) {
	home, _, err := j.Root(homeDir)
	if err != nil {
		return nil, err
	}
	tmp, _, err := j.Root(tmpDir)
	if err != nil {
		home.Close()
		return nil, err
	}
	f := &sandboxFS{home: home, tmp: tmp, uid: os.Getuid(), gid: os.Getgid()}
	if uid, gid, ok := j.Owner(); ok {
		f.chown, f.uid, f.gid = true, uid, gid
	}
	return f, nil
}

// lchown gives a file the server created to the sandbox user.
func (f *sandboxFS) lchown(root *os.Root, rel string) error {
	if !f.chown {
		return nil
	}
	return root.Lchown(rel, f.uid, f.gid)
}

func (f *sandboxFS) close() {
	f.home.Close()
	f.tmp.Close()
}

// errOutside is returned for paths the files API does not reach.
var errOutside = errors.New("outside the sandbox's files: the local sandbox exposes only /home/user and /tmp")

// resolve maps a sandbox path (absolute, or relative to /home/user) to the
// root that holds it and the path inside that root.
func (f *sandboxFS) resolve(p string) (root *os.Root, rel, clean string, err error) {
	if strings.ContainsRune(p, 0) {
		return nil, "", "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	clean = sandboxPath(p)
	for _, r := range []struct {
		dir  string
		root *os.Root
	}{{homeDir, f.home}, {tmpDir, f.tmp}} {
		if clean == r.dir {
			return r.root, ".", clean, nil
		}
		if rest, ok := strings.CutPrefix(clean, r.dir+"/"); ok {
			return r.root, rest, clean, nil
		}
	}
	return nil, "", clean, fmt.Errorf("path %q is %w", clean, errOutside)
}

// mkdirAll creates rel and its parents inside root, owned by the sandbox user.
func (f *sandboxFS) mkdirAll(root *os.Root, rel string) error {
	if rel == "." {
		return nil
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		err := root.Mkdir(p, 0o755)
		if err == nil {
			if err := f.lchown(root, p); err != nil {
				return err
			}
			continue
		}
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}

func (f *sandboxFS) ownerName(uid uint32) string {
	switch {
	case int(uid) == f.uid:
		return sandboxUser
	case uid == 0:
		return "root"
	}
	return strconv.Itoa(int(uid))
}

// entry describes the file at rel (not following a final symlink).
func (f *sandboxFS) entry(root *os.Root, rel, sandboxP string) (*filesystem.EntryInfo, error) {
	fi, err := root.Lstat(rel)
	if err != nil {
		return nil, err
	}
	return f.entryFromInfo(root, rel, sandboxP, fi), nil
}

func (f *sandboxFS) entryFromInfo(root *os.Root, rel, sandboxP string, fi fs.FileInfo) *filesystem.EntryInfo {
	e := &filesystem.EntryInfo{
		Name:         path.Base(sandboxP),
		Path:         sandboxP,
		Size:         fi.Size(),
		Mode:         uint32(fi.Mode().Perm()),
		Permissions:  fi.Mode().String(),
		ModifiedTime: timestamppb.New(fi.ModTime()),
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = filesystem.FileType_FILE_TYPE_SYMLINK
		if target, err := root.Readlink(rel); err == nil {
			e.SymlinkTarget = &target
		}
	case fi.IsDir():
		e.Type = filesystem.FileType_FILE_TYPE_DIRECTORY
	default:
		e.Type = filesystem.FileType_FILE_TYPE_FILE
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner = f.ownerName(st.Uid)
		e.Group = f.ownerName(st.Gid)
	}
	return e
}

// fsError maps a filesystem error to the Connect code envd uses.
func fsError(op, p string, err error) error {
	switch {
	case errors.Is(err, errOutside):
		return connect.NewError(connect.CodePermissionDenied, err)
	case errors.Is(err, fs.ErrNotExist):
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("%s: path %q does not exist", op, p))
	case errors.Is(err, fs.ErrExist):
		return connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("%s: path %q already exists", op, p))
	case errors.Is(err, fs.ErrPermission):
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s %q: permission denied", op, p))
	case errors.Is(err, syscall.ENOTDIR):
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s %q: a path component is not a directory", op, p))
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%s %q: no space left in the sandbox", op, p))
	case isEscape(err):
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s %q: the path leaves the sandbox's files (through a symlink or ..)", op, p))
	}
	return connect.NewError(connect.CodeInternal, fmt.Errorf("%s %q: %v", op, p, err))
}

// isEscape reports os.Root's refusal of a path that leaves the root.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// filesystemService implements envd's filesystem.Filesystem. WatchDir is
// not part of the local sandbox's interface.
type filesystemService struct{ s *Server }

var _ filesystemconnect.FilesystemHandler = filesystemService{}

func fsSandbox(ctx context.Context, req connect.AnyRequest) (*sandboxFS, error) {
	sb, err := envdSandbox(ctx, req.Header())
	if err != nil {
		return nil, err
	}
	return sb.fs, nil
}

func (filesystemService) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	f, err := fsSandbox(ctx, req)
	if err != nil {
		return nil, err
	}
	root, rel, p, err := f.resolve(req.Msg.GetPath())
	if err != nil {
		return nil, fsError("stat", p, err)
	}
	e, err := f.entry(root, rel, p)
	if err != nil {
		return nil, fsError("stat", p, err)
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: e}), nil
}

func (filesystemService) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	f, err := fsSandbox(ctx, req)
	if err != nil {
		return nil, err
	}
	root, rel, p, err := f.resolve(req.Msg.GetPath())
	if err != nil {
		return nil, fsError("make directory", p, err)
	}
	if fi, err := root.Lstat(rel); err == nil {
		if fi.IsDir() {
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory %q already exists", p))
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %q already exists and is not a directory", p))
	}
	if err := f.mkdirAll(root, rel); err != nil {
		return nil, fsError("make directory", p, err)
	}
	e, err := f.entry(root, rel, p)
	if err != nil {
		return nil, fsError("make directory", p, err)
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: e}), nil
}

func (filesystemService) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	f, err := fsSandbox(ctx, req)
	if err != nil {
		return nil, err
	}
	srcRoot, srcRel, src, err := f.resolve(req.Msg.GetSource())
	if err != nil {
		return nil, fsError("move", src, err)
	}
	dstRoot, dstRel, dst, err := f.resolve(req.Msg.GetDestination())
	if err != nil {
		return nil, fsError("move", dst, err)
	}
	if srcRoot != dstRoot {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("moving between /home/user and /tmp is not supported by the local sandbox (%q to %q); copy with a command instead", src, dst))
	}
	if srcRel == "." || dstRel == "." {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cannot move %q or onto %q", src, dst))
	}
	if _, err := srcRoot.Lstat(srcRel); err != nil {
		return nil, fsError("move", src, err)
	}
	if err := f.mkdirAll(dstRoot, path.Dir(dstRel)); err != nil {
		return nil, fsError("move", dst, err)
	}
	if err := srcRoot.Rename(srcRel, dstRel); err != nil {
		return nil, fsError("move", src, err)
	}
	e, err := f.entry(dstRoot, dstRel, dst)
	if err != nil {
		return nil, fsError("move", dst, err)
	}
	return connect.NewResponse(&filesystem.MoveResponse{Entry: e}), nil
}

func (filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	f, err := fsSandbox(ctx, req)
	if err != nil {
		return nil, err
	}
	root, rel, p, err := f.resolve(req.Msg.GetPath())
	if err != nil {
		return nil, fsError("list", p, err)
	}
	depth := int(req.Msg.GetDepth())
	if depth <= 0 {
		depth = 1
	}
	fi, err := root.Stat(rel)
	if err != nil {
		return nil, fsError("list", p, err)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %q is not a directory", p))
	}
	out := &filesystem.ListDirResponse{}
	var walk func(rel, sandboxP string, level int) error
	walk = func(rel, sandboxP string, level int) error {
		d, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		ents, err := d.ReadDir(-1)
		d.Close()
		if err != nil {
			return err
		}
		for _, de := range ents {
			childRel := path.Join(rel, de.Name())
			childP := path.Join(sandboxP, de.Name())
			info, err := de.Info()
			if err != nil {
				continue // removed meanwhile
			}
			if len(out.Entries) >= maxListEntries {
				return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("more than %d entries under %q; list with a smaller depth", maxListEntries, p))
			}
			out.Entries = append(out.Entries, f.entryFromInfo(root, childRel, childP, info))
			if de.IsDir() && level < depth {
				if err := walk(childRel, childP, level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(rel, p, 1); err != nil {
		var ce *connect.Error
		if errors.As(err, &ce) {
			return nil, ce
		}
		return nil, fsError("list", p, err)
	}
	return connect.NewResponse(out), nil
}

func (filesystemService) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	f, err := fsSandbox(ctx, req)
	if err != nil {
		return nil, err
	}
	root, rel, p, err := f.resolve(req.Msg.GetPath())
	if err != nil {
		return nil, fsError("remove", p, err)
	}
	if rel == "." {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cannot remove %q itself", p))
	}
	if err := root.RemoveAll(rel); err != nil {
		return nil, fsError("remove", p, err)
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}
