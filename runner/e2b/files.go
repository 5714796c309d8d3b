package e2b

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/filesystem"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envdapi"
)

// FileType says what a directory entry is.
type FileType string

// The entry types envd reports.
const (
	TypeFile    FileType = "file"
	TypeDir     FileType = "dir"
	TypeSymlink FileType = "symlink"
	TypeOther   FileType = "other"
)

// EntryInfo describes a file or directory in the sandbox.
type EntryInfo struct {
	Name          string
	Path          string
	Type          FileType
	Size          int64
	Mode          fs.FileMode
	Permissions   string // such as "-rw-r--r--"
	Owner         string
	Group         string
	ModTime       time.Time
	SymlinkTarget string
}

func entryFromProto(e *filesystem.EntryInfo) EntryInfo {
	out := EntryInfo{
		Name: e.GetName(), Path: e.GetPath(), Size: e.GetSize(), Mode: fs.FileMode(e.GetMode()),
		Permissions: e.GetPermissions(), Owner: e.GetOwner(), Group: e.GetGroup(),
		SymlinkTarget: e.GetSymlinkTarget(),
	}
	if e.GetModifiedTime() != nil {
		out.ModTime = e.GetModifiedTime().AsTime()
	}
	switch e.GetType() {
	case filesystem.FileType_FILE_TYPE_FILE:
		out.Type = TypeFile
	case filesystem.FileType_FILE_TYPE_DIRECTORY:
		out.Type = TypeDir
	case filesystem.FileType_FILE_TYPE_SYMLINK:
		out.Type = TypeSymlink
	default:
		out.Type = TypeOther
	}
	return out
}

// WriteFile creates or replaces the file at path (absolute, or relative to
// the user's home) with everything read from r, creating parent
// directories; the file belongs to "user". The body is streamed: r is read
// as the request is sent and is never held in memory whole, so its size is
// bounded only by the sandbox's disk (ErrDiskFull).
func (s *Sandbox) WriteFile(ctx context.Context, path string, r io.Reader) error {
	const op = "write file"
	if path == "" {
		return &Error{Op: op, SandboxID: s.ID, Kind: ErrInvalidArgument, Message: "empty path"}
	}
	params := &envdapi.UploadFileParams{Path: ptr(path), Username: ptr(defaultUser)}
	// Hide any WriterTo/Len so net/http streams with chunked encoding
	// instead of inspecting the reader.
	body := io.NopCloser(r)
	resp, err := s.files.UploadFileWithBody(ctx, params, "application/octet-stream", body)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return transportError(op, s.ID, err, s.secrets()...)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusNoContent {
		return statusError(op+" "+path, s.ID, resp, scopeResource, s.c.now, s.secrets()...)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return nil
}

// ReadFile opens the file at path for streaming; the caller must Close the
// reader. The content is never buffered whole, so callers enforce their own
// size limits while reading. A missing file is ErrNotFound, a directory
// ErrInvalidArgument.
func (s *Sandbox) ReadFile(ctx context.Context, path string) (io.ReadCloser, error) {
	const op = "read file"
	if path == "" {
		return nil, &Error{Op: op, SandboxID: s.ID, Kind: ErrInvalidArgument, Message: "empty path"}
	}
	params := &envdapi.DownloadFileParams{Path: ptr(path), Username: ptr(defaultUser)}
	resp, err := s.files.DownloadFile(ctx, params, func(_ context.Context, req *http.Request) error {
		// A compressed response would hide the real size from callers'
		// limits and cost CPU on both ends.
		req.Header.Set("Accept-Encoding", "identity")
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, transportError(op, s.ID, err, s.secrets()...)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, statusError(op+" "+path, s.ID, resp, scopeResource, s.c.now, s.secrets()...)
	}
	return resp.Body, nil
}

// Stat describes the entry at path without following a final symlink
// (envd's semantics). A missing path is ErrNotFound.
func (s *Sandbox) Stat(ctx context.Context, path string) (EntryInfo, error) {
	resp, err := s.fs.Stat(ctx, rpcReq(&filesystem.StatRequest{Path: path}))
	if err != nil {
		return EntryInfo{}, s.rpcError(ctx, "stat "+path, err)
	}
	return entryFromProto(resp.Msg.GetEntry()), nil
}

// List lists the directory at path, descending depth levels (1 = only its
// direct entries; 0 is taken as 1).
func (s *Sandbox) List(ctx context.Context, path string, depth int) ([]EntryInfo, error) {
	if depth <= 0 {
		depth = 1
	}
	if depth > 64 {
		return nil, &Error{Op: "list " + path, SandboxID: s.ID, Kind: ErrInvalidArgument, Message: "depth above 64"}
	}
	resp, err := s.fs.ListDir(ctx, rpcReq(&filesystem.ListDirRequest{Path: path, Depth: uint32(depth)}))
	if err != nil {
		return nil, s.rpcError(ctx, "list "+path, err)
	}
	out := make([]EntryInfo, 0, len(resp.Msg.GetEntries()))
	for _, e := range resp.Msg.GetEntries() {
		out = append(out, entryFromProto(e))
	}
	return out, nil
}

// MakeDir creates the directory at path and its parents, as "user"; a
// directory that already exists is not an error.
func (s *Sandbox) MakeDir(ctx context.Context, path string) error {
	_, err := s.fs.MakeDir(ctx, rpcReq(&filesystem.MakeDirRequest{Path: path}))
	if err != nil {
		if connect.CodeOf(err) == connect.CodeAlreadyExists {
			if info, serr := s.Stat(ctx, path); serr == nil && info.Type == TypeDir {
				return nil
			}
		}
		return s.rpcError(ctx, "make directory "+path, err)
	}
	return nil
}

// Remove removes the file or directory (recursively) at path. A missing
// path is ErrNotFound.
func (s *Sandbox) Remove(ctx context.Context, path string) error {
	_, err := s.fs.Remove(ctx, rpcReq(&filesystem.RemoveRequest{Path: path}))
	if err != nil {
		return s.rpcError(ctx, "remove "+path, err)
	}
	return nil
}

// Move renames src to dst.
func (s *Sandbox) Move(ctx context.Context, src, dst string) error {
	_, err := s.fs.Move(ctx, rpcReq(&filesystem.MoveRequest{Source: src, Destination: dst}))
	if err != nil {
		return s.rpcError(ctx, "move "+src, err)
	}
	return nil
}

// rpcReq wraps a message for an envd RPC; the user always goes explicitly.
func rpcReq[T any](msg *T) *connect.Request[T] {
	req := connect.NewRequest(msg)
	req.Header().Set("Authorization", basicUser(defaultUser))
	return req
}

// rpcError maps a failed unary envd RPC, returning ctx's own error when ctx
// ended.
func (s *Sandbox) rpcError(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return connectError(op, s.ID, err, s.secrets()...)
}
