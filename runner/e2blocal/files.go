package e2blocal

import (
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envdapi"
)

// envdHTTP implements envd's plain HTTP routes for the routed sandbox.
type envdHTTP struct{ s *Server }

var _ envdapi.ServerInterface = envdHTTP{}

func (envdHTTP) Health(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusNoContent)
}

func (envdHTTP) GetEnvs(w http.ResponseWriter, r *http.Request) {
	sb := sandboxFrom(r.Context())
	env := map[string]string{}
	for k, v := range sb.spec.envVars {
		env[k] = v
	}
	writeJSON(w, http.StatusOK, env)
}

// httpFSError writes a filesystem error with envd's status codes.
func httpFSError(w http.ResponseWriter, p string, err error) {
	code := statusOf(err)
	var msg string
	switch {
	case errors.Is(err, errOutside):
		msg = err.Error()
	case isEscape(err):
		msg = fmt.Sprintf("path '%s' leaves the sandbox's files (through a symlink or ..)", p)
	case code == http.StatusNotFound:
		msg = fmt.Sprintf("path '%s' does not exist", p)
	case code == http.StatusForbidden:
		msg = fmt.Sprintf("path '%s': permission denied", p)
	case code == http.StatusInsufficientStorage:
		msg = fmt.Sprintf("no space left to write '%s'", p)
	default:
		msg = fmt.Sprintf("path '%s': %v", p, err)
	}
	writeError(w, code, msg)
}

func (envdHTTP) DownloadFile(w http.ResponseWriter, r *http.Request, params envdapi.DownloadFileParams) {
	sb := sandboxFrom(r.Context())
	if params.Username != nil {
		if _, err := checkUser(*params.Username); err != nil {
			httpUserError(w, err)
			return
		}
	}
	if params.Path == nil || *params.Path == "" {
		writeError(w, http.StatusBadRequest, "the path query parameter is required")
		return
	}
	root, rel, p, err := sb.fs.resolve(*params.Path)
	if err != nil {
		httpFSError(w, p, err)
		return
	}
	// O_NONBLOCK: a FIFO the sandbox planted must not hang the request.
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		httpFSError(w, p, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		httpFSError(w, p, err)
		return
	}
	if fi.IsDir() {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a directory", p))
		return
	}
	if !fi.Mode().IsRegular() {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is not a regular file", p))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": path.Base(p)}))
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

// uploaded is one entry of the upload response.
type uploaded struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

func (e envdHTTP) UploadFile(w http.ResponseWriter, r *http.Request, params envdapi.UploadFileParams) {
	sb := sandboxFrom(r.Context())
	limit := e.s.opts.MaxUploadBytes
	if params.Username != nil {
		if _, err := checkUser(*params.Username); err != nil {
			httpUserError(w, err)
			return
		}
	}
	for k := range r.Header {
		if strings.HasPrefix(k, "X-Metadata-") {
			writeError(w, http.StatusBadRequest, "file metadata is not supported by the local sandbox")
			return
		}
	}
	dest := ""
	if params.Path != nil {
		dest = *params.Path
	}
	mediaType, mparams, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "Content-Type must be application/octet-stream or multipart/form-data")
		return
	}
	if r.ContentLength > limit && mediaType == "application/octet-stream" {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the upload is %d bytes; the local sandbox accepts at most %d bytes per file", r.ContentLength, limit))
		return
	}
	var out []uploaded
	switch mediaType {
	case "application/octet-stream":
		if dest == "" {
			writeError(w, http.StatusBadRequest, "the path query parameter is required for application/octet-stream uploads")
			return
		}
		body := io.Reader(r.Body)
		switch enc := r.Header.Get("Content-Encoding"); enc {
		case "", "identity":
		case "gzip":
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid gzip body: %v", err))
				return
			}
			defer zr.Close()
			body = zr
		default:
			writeError(w, http.StatusBadRequest, fmt.Sprintf("unsupported Content-Encoding %q", enc))
			return
		}
		u, code, err := sb.writeFile(dest, body, limit)
		if err != nil {
			writeError(w, code, err.Error())
			return
		}
		out = append(out, u)
	case "multipart/form-data":
		if mparams["boundary"] == "" {
			writeError(w, http.StatusBadRequest, "multipart/form-data without a boundary")
			return
		}
		mr := multipart.NewReader(r.Body, mparams["boundary"])
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("reading the multipart body: %v", err))
				return
			}
			if part.FormName() != "file" {
				part.Close()
				continue
			}
			target := dest
			if target == "" {
				// The raw filename: Part.FileName would strip it to its base.
				_, dp, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
				target = dp["filename"]
			}
			if target == "" {
				part.Close()
				writeError(w, http.StatusBadRequest, "a file part has no filename and the path query parameter is empty")
				return
			}
			u, code, err := sb.writeFile(target, part, limit)
			part.Close()
			if err != nil {
				writeError(w, code, err.Error())
				return
			}
			out = append(out, u)
		}
		if len(out) == 0 {
			writeError(w, http.StatusBadRequest, `the multipart body has no "file" part`)
			return
		}
	default:
		writeError(w, http.StatusBadRequest, "Content-Type must be application/octet-stream or multipart/form-data")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// errTooLarge is returned by limitedReader past its limit.
var errTooLarge = errors.New("upload too large")

type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One more byte tells a file of exactly the limit from a larger one.
		var b [1]byte
		n, err := l.r.Read(b[:])
		if n > 0 {
			return 0, errTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// writeFile streams body to a sandbox path: parents are created, an
// existing file is replaced only once the whole body arrived, and a failed
// upload leaves nothing behind.
func (sb *sandbox) writeFile(dest string, body io.Reader, limit int64) (uploaded, int, error) {
	f := sb.fs
	root, rel, p, err := f.resolve(dest)
	if err != nil {
		return uploaded{}, statusOf(err), fmt.Errorf("upload to '%s': %w", p, err)
	}
	if rel == "." {
		return uploaded{}, http.StatusBadRequest, fmt.Errorf("upload to '%s': the path is a directory", p)
	}
	dir := path.Dir(rel)
	if err := f.mkdirAll(root, dir); err != nil {
		return uploaded{}, statusOf(err), fmt.Errorf("upload to '%s': create parent directories: %v", p, err)
	}
	if fi, err := root.Lstat(rel); err == nil && fi.IsDir() {
		return uploaded{}, http.StatusBadRequest, fmt.Errorf("upload to '%s': the path is a directory", p)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, ".e2b-upload-"+hex.EncodeToString(rnd[:]))
	out, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return uploaded{}, statusOf(err), fmt.Errorf("upload to '%s': %v", p, err)
	}
	fail := func(code int, err error) (uploaded, int, error) {
		out.Close()
		_ = root.Remove(tmp)
		return uploaded{}, code, err
	}
	buf := make([]byte, 256<<10)
	if _, err := io.CopyBuffer(out, &limitedReader{r: body, left: limit}, buf); err != nil {
		if errors.Is(err, errTooLarge) {
			return fail(http.StatusRequestEntityTooLarge, fmt.Errorf("upload to '%s': larger than the local sandbox's limit of %d bytes per file", p, limit))
		}
		return fail(statusOf(err), fmt.Errorf("upload to '%s': %v", p, err))
	}
	if err := out.Close(); err != nil {
		_ = root.Remove(tmp)
		return uploaded{}, statusOf(err), fmt.Errorf("upload to '%s': %v", p, err)
	}
	if err := f.lchown(root, tmp); err != nil {
		_ = root.Remove(tmp)
		return uploaded{}, http.StatusInternalServerError, fmt.Errorf("upload to '%s': chown: %v", p, err)
	}
	if err := root.Rename(tmp, rel); err != nil {
		_ = root.Remove(tmp)
		return uploaded{}, statusOf(err), fmt.Errorf("upload to '%s': %v", p, err)
	}
	return uploaded{Path: p, Name: path.Base(p), Type: "file"}, 0, nil
}

// statusOf is the HTTP status envd gives a filesystem error.
func statusOf(err error) int {
	switch {
	case errors.Is(err, errOutside), errors.Is(err, fs.ErrPermission), isEscape(err):
		return http.StatusForbidden
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, fs.ErrExist):
		return http.StatusBadRequest
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return http.StatusInsufficientStorage
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusInternalServerError
}
