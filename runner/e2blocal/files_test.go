package e2blocal

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/api"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/filesystem"
)

func (e *testEnv) upload(sb api.Sandbox, p string, body io.Reader) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.ts.URL+"/files?"+url.Values{"path": {p}, "username": {"user"}}.Encode(), body)
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := e.envdHTTP(sb, "").Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *testEnv) download(sb api.Sandbox, p string) (int, []byte) {
	e.t.Helper()
	resp, err := e.envdHTTP(sb, "").Get(e.ts.URL + "/files?" + url.Values{"path": {p}, "username": {"user"}}.Encode())
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp.StatusCode, b
}

func TestFiles(t *testing.T) {
	requireJail(t)
	ctx := context.Background()
	e := newEnv(t, func(o *Options) { o.MaxUploadBytes = 16 << 20 })
	sb := e.create(api.NewSandbox{})
	pc := e.processClient(sb, true)

	t.Run("10MiB-binary-round-trips-byte-for-byte", func(t *testing.T) {
		data := make([]byte, 10<<20)
		_, _ = rand.Read(data)
		code, body := e.upload(sb, "/home/user/deep/dir/blob.bin", bytes.NewReader(data))
		require.Equal(t, 200, code, body)
		var got []uploaded
		require.NoError(t, json.Unmarshal([]byte(body), &got))
		assert.Equal(t, []uploaded{{Path: "/home/user/deep/dir/blob.bin", Name: "blob.bin", Type: "file"}}, got)

		code, back := e.download(sb, "/home/user/deep/dir/blob.bin")
		require.Equal(t, 200, code)
		assert.True(t, bytes.Equal(data, back), "downloaded bytes differ")

		r := run(ctx, pc, "stat -c '%U %s' deep/dir/blob.bin && sha256sum < deep/dir/blob.bin | cut -c1-16")
		require.NoError(t, r.err)
		assert.True(t, strings.HasPrefix(r.stdout, "user 10485760\n"), "the sandbox user owns the uploaded file: %q", r.stdout)
	})

	t.Run("range-requests-work", func(t *testing.T) {
		code, _ := e.upload(sb, "range.txt", strings.NewReader("0123456789"))
		require.Equal(t, 200, code)
		req, _ := http.NewRequest(http.MethodGet, e.ts.URL+"/files?path=/home/user/range.txt", nil)
		req.Header.Set("Range", "bytes=2-4")
		resp, err := e.envdHTTP(sb, "").Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		assert.Equal(t, http.StatusPartialContent, resp.StatusCode)
		assert.Equal(t, "234", string(b))
	})

	t.Run("upload-overwrites", func(t *testing.T) {
		code, _ := e.upload(sb, "/tmp/over.txt", strings.NewReader("first version, long"))
		require.Equal(t, 200, code)
		code, _ = e.upload(sb, "/tmp/over.txt", strings.NewReader("second"))
		require.Equal(t, 200, code)
		_, b := e.download(sb, "/tmp/over.txt")
		assert.Equal(t, "second", string(b))
	})

	t.Run("multipart-uses-the-raw-filename-as-destination", func(t *testing.T) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for name, content := range map[string]string{"/home/user/mp/a.txt": "A", "mp/b.txt": "B"} {
			w, err := mw.CreateFormFile("file", name)
			require.NoError(t, err)
			_, _ = w.Write([]byte(content))
		}
		require.NoError(t, mw.Close())
		req, _ := http.NewRequest(http.MethodPost, e.ts.URL+"/files", &buf)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		resp, err := e.envdHTTP(sb, "").Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, string(b))
		_, a := e.download(sb, "/home/user/mp/a.txt")
		_, bb := e.download(sb, "/home/user/mp/b.txt")
		assert.Equal(t, "A", string(a))
		assert.Equal(t, "B", string(bb))
	})

	t.Run("a-fifo-is-refused-without-hanging", func(t *testing.T) {
		r := run(ctx, pc, "mkfifo /home/user/pipe")
		require.NoError(t, r.err)
		require.Equal(t, int32(0), r.end.ExitCode, r.stderr)
		code, body := e.download(sb, "/home/user/pipe")
		assert.Equal(t, 400, code, string(body))
		assert.Contains(t, string(body), "not a regular file")
	})

	t.Run("errors-use-envd-status-codes", func(t *testing.T) {
		code, body := e.download(sb, "/home/user/missing.txt")
		assert.Equal(t, 404, code)
		assert.Contains(t, string(body), "does not exist")
		code, _ = e.download(sb, "/home/user/deep")
		assert.Equal(t, 400, code, "a directory is 400")
		code, _ = e.upload(sb, "", strings.NewReader("x"))
		assert.Equal(t, 400, code, "octet-stream needs a path")
	})

	t.Run("upload-over-the-limit-is-refused-and-leaves-nothing", func(t *testing.T) {
		// Without a Content-Length, the server must stop at the limit.
		pr, pw := io.Pipe()
		go func() {
			chunk := make([]byte, 1<<20)
			for i := 0; i < 17; i++ {
				if _, err := pw.Write(chunk); err != nil {
					return
				}
			}
			pw.Close()
		}()
		code, body := e.upload(sb, "/home/user/big.bin", pr)
		assert.Equal(t, http.StatusRequestEntityTooLarge, code, body)
		code, _ = e.download(sb, "/home/user/big.bin")
		assert.Equal(t, 404, code)
		r := run(ctx, pc, "ls -A /home/user | grep -c e2b-upload || true")
		require.NoError(t, r.err)
		assert.Equal(t, "0\n", r.stdout, "no partial upload left behind")

		// With a Content-Length over the limit, it refuses before reading.
		code, _ = e.upload(sb, "/home/user/big2.bin", bytes.NewReader(make([]byte, 17<<20)))
		assert.Equal(t, http.StatusRequestEntityTooLarge, code)
		// The neighbour at the limit passes.
		code, body = e.upload(sb, "/home/user/exact.bin", bytes.NewReader(make([]byte, 16<<20)))
		assert.Equal(t, 200, code, body)
	})

	// A secret next to the sandbox directory that an escape would reach.
	secret := filepath.Join(filepath.Dir(e.dir), "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("host secret"), 0o600))
	r := run(ctx, pc, "ln -s / /home/user/rootlink && ln -s ../../../../../.. /home/user/uplink && ln -s /home/user/ok.txt /home/user/abslink && echo fine > ok.txt && ln -s ok.txt rel-ok")
	require.NoError(t, r.err)
	require.Equal(t, int32(0), r.end.ExitCode, r.stderr)

	t.Run("traversal-is-refused", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			path string
			want int
		}{
			{"dotdot-out-of-home", "/home/user/../../etc/passwd", 403},
			{"relative-dotdot", "../../../etc/passwd", 403},
			{"host-path-outside-areas", "/etc/passwd", 403},
			{"symlink-to-root", "/home/user/rootlink/etc/passwd", 403},
			{"symlink-upwards", "/home/user/uplink/" + strings.TrimPrefix(secret, "/"), 403},
			{"absolute-symlink", "/home/user/abslink", 403},
			{"neighbour-regular-file-passes", "/home/user/ok.txt", 200},
			{"neighbour-relative-symlink-passes", "/home/user/rel-ok", 200},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, body := e.download(sb, tc.path)
				assert.Equal(t, tc.want, code, string(body))
				assert.NotContains(t, string(body), "host secret")
				assert.NotContains(t, string(body), "root:x:0:0")
				if tc.want == 200 {
					assert.Equal(t, "fine\n", string(body))
				}
			})
		}
		for _, p := range []string{"/home/user/rootlink/tmp/pwned", "/home/user/../x", "/home/user/uplink/pwned"} {
			code, _ := e.upload(sb, p, strings.NewReader("pwned"))
			assert.Equal(t, 403, code, p)
		}
		assert.NoFileExists(t, "/tmp/pwned")
	})

	t.Run("filesystem-rpc", func(t *testing.T) {
		fc := e.fsClient(sb)
		st, err := fc.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "ok.txt"}))
		require.NoError(t, err)
		en := st.Msg.Entry
		assert.Equal(t, "ok.txt", en.Name)
		assert.Equal(t, "/home/user/ok.txt", en.Path)
		assert.Equal(t, filesystem.FileType_FILE_TYPE_FILE, en.Type)
		assert.Equal(t, int64(5), en.Size)
		assert.Equal(t, "-rw-r--r--", en.Permissions)
		assert.Equal(t, "user", en.Owner)
		assert.NotNil(t, en.ModifiedTime)

		st, err = fc.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/home/user/rel-ok"}))
		require.NoError(t, err)
		assert.Equal(t, filesystem.FileType_FILE_TYPE_SYMLINK, st.Msg.Entry.Type)
		assert.Equal(t, "ok.txt", st.Msg.Entry.GetSymlinkTarget())

		_, err = fc.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/home/user/nope"}))
		assert.Equal(t, connect.CodeNotFound, connect.CodeOf(err))
		_, err = fc.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/home/user/rootlink/etc"}))
		assert.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))
		_, err = fc.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/etc"}))
		assert.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))

		md, err := fc.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: "/home/user/a/b/c"}))
		require.NoError(t, err)
		assert.Equal(t, filesystem.FileType_FILE_TYPE_DIRECTORY, md.Msg.Entry.Type)
		_, err = fc.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: "/home/user/a/b/c"}))
		assert.Equal(t, connect.CodeAlreadyExists, connect.CodeOf(err))
		_, err = fc.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: "/home/user/rootlink/tmp/evil"}))
		assert.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))

		mv, err := fc.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: "/home/user/a/b/c", Destination: "/home/user/moved/c2"}))
		require.NoError(t, err)
		assert.Equal(t, "/home/user/moved/c2", mv.Msg.Entry.Path)
		_, err = fc.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: "/home/user/ok.txt", Destination: "/home/user/rootlink/tmp/ok.txt"}))
		assert.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))

		ls, err := fc.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: "/home/user/a", Depth: 1}))
		require.NoError(t, err)
		require.Len(t, ls.Msg.Entries, 1)
		assert.Equal(t, "/home/user/a/b", ls.Msg.Entries[0].Path)
		ls, err = fc.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: "/home/user/moved", Depth: 2}))
		require.NoError(t, err)
		assert.Len(t, ls.Msg.Entries, 1)
		ls, err = fc.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: "/home/user", Depth: 3}))
		require.NoError(t, err)
		var paths []string
		for _, en := range ls.Msg.Entries {
			paths = append(paths, en.Path)
		}
		assert.Contains(t, paths, "/home/user/a/b")
		assert.Contains(t, paths, "/home/user/rootlink")
		assert.NotContains(t, paths, "/home/user/rootlink/etc", "listing never follows a symlink")

		_, err = fc.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: "/home/user/rootlink"}))
		require.NoError(t, err)
		assert.FileExists(t, "/etc/passwd", "removing a symlink removes only the link")
		_, err = fc.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: "/home/user/a"}))
		require.NoError(t, err)
		_, err = fc.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/home/user/a"}))
		assert.Equal(t, connect.CodeNotFound, connect.CodeOf(err))
		_, err = fc.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: "/home/user/../../etc"}))
		assert.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))
	})
}

func TestFileSignatures(t *testing.T) {
	t.Run("matches-the-reference-test-vector", func(t *testing.T) {
		assert.Equal(t, "v1_Zkbb3914oLJLvMBzCAHQhm2ydBLxbSx2eQUR/kLdvIY", fileSignature("tok", "/home/user/a.txt", "read", "", ""))
	})
	for _, tc := range []struct {
		name  string
		sig   string
		exp   string
		op    string
		valid bool
	}{
		{"valid-signature-passes", fileSignature("tok", "/p", "read", "", ""), "", "read", true},
		{"signature-for-write-does-not-read", fileSignature("tok", "/p", "write", "", ""), "", "read", false},
		{"expired-signature-fails", fileSignature("tok", "/p", "read", "", "100"), "100", "read", false},
		{"unexpired-signature-passes", fileSignature("tok", "/p", "read", "", "300"), "300", "read", true},
		{"empty-signature-fails", "", "", "read", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.valid, signatureOK("tok", "/p", tc.op, "", tc.sig, tc.exp, 200))
		})
	}
}

func TestEnvdHTTPRoutes(t *testing.T) {
	requireJail(t)
	e := newEnv(t)
	sb := e.create(api.NewSandbox{EnvVars: &api.EnvVars{"A": "1"}})
	get := func(c *http.Client, path string) (int, string) {
		resp, err := c.Get(e.ts.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	noToken := &http.Client{Transport: envdTransport{id: sb.SandboxID}}
	gone := &http.Client{Transport: envdTransport{id: "i0000000000000000000z"}}

	code, _ := get(noToken, "/health")
	assert.Equal(t, 204, code, "health needs no token")
	code, body := get(gone, "/health")
	assert.Equal(t, 502, code)
	assert.JSONEq(t, `{"sandboxId":"i0000000000000000000z","message":"The sandbox was not found","code":502}`, body)
	code, _ = get(noToken, "/files?path=/home/user/x")
	assert.Equal(t, 401, code)
	code, body = get(e.envdHTTP(sb, ""), "/envs")
	assert.Equal(t, 200, code)
	assert.JSONEq(t, `{"A":"1"}`, body)

	t.Run("signed-url-reads-without-the-token", func(t *testing.T) {
		c, _ := e.upload(sb, "/home/user/signed.txt", strings.NewReader("signed"))
		require.Equal(t, 200, c)
		sig := fileSignature(tokenOf(sb), "/home/user/signed.txt", "read", "", "")
		code, body := get(noToken, "/files?path=/home/user/signed.txt&signature="+url.QueryEscape(sig))
		assert.Equal(t, 200, code)
		assert.Equal(t, "signed", body)
		code, _ = get(noToken, "/files?path=/home/user/x.txt&signature="+url.QueryEscape(sig))
		assert.Equal(t, 401, code, "a signature is bound to its path")
	})

	t.Run("root-downloads-are-refused", func(t *testing.T) {
		code, body := get(e.envdHTTP(sb, ""), "/files?path=/home/user/signed.txt&username=root")
		assert.Equal(t, 403, code)
		assert.Contains(t, body, "root is not available")
	})
}

func TestUploadOnAFullDiskIs507(t *testing.T) {
	requireJail(t)
	dir := filepath.Join(t.TempDir(), "small")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	e := newEnv(t, func(o *Options) { o.Dir = dir })
	sb := e.create(api.NewSandbox{})

	code, body := e.upload(sb, "/home/user/fits.bin", bytes.NewReader(make([]byte, 1<<20)))
	require.Equal(t, 200, code, body)
	code, body = e.upload(sb, "/home/user/too-big.bin", bytes.NewReader(make([]byte, 8<<20)))
	assert.Equal(t, http.StatusInsufficientStorage, code, body)
	code, _ = e.download(sb, "/home/user/too-big.bin")
	assert.Equal(t, 404, code, "the partial upload is removed")
	code, body = e.upload(sb, "/home/user/fits-again.bin", bytes.NewReader(make([]byte, 1<<20)))
	assert.Equal(t, 200, code, "the space of the failed upload was given back: %s", body)
}
