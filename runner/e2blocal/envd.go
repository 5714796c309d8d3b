package e2blocal

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/filesystem/filesystemconnect"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envd/process/processconnect"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b/envdapi"
)

// maxRPCBytes caps one Connect request message.
const maxRPCBytes = 4 << 20

type sandboxKey struct{}

// sandboxFrom returns the sandbox an envd request was routed to.
func sandboxFrom(ctx context.Context) *sandbox {
	sb, _ := ctx.Value(sandboxKey{}).(*sandbox)
	return sb
}

// envdHandler serves envd for whichever sandbox the request context names.
func (s *Server) envdHandler() http.Handler {
	mux := http.NewServeMux()
	envdapi.HandlerWithOptions(envdHTTP{s}, envdapi.StdHTTPServerOptions{
		BaseRouter: mux,
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, http.StatusBadRequest, err.Error())
		},
	})
	limit := connect.WithReadMaxBytes(maxRPCBytes)
	mux.Handle(processconnect.NewProcessHandler(processService{s}, limit))
	mux.Handle(filesystemconnect.NewFilesystemHandler(filesystemService{s}, limit))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no envd route %s %s in the local sandbox", r.Method, r.URL.Path))
	})
	return mux
}

// proxyError is the body E2B's sandbox proxy answers with.
type proxyError struct {
	SandboxID string `json:"sandboxId"`
	Message   string `json:"message"`
	Code      int    `json:"code"`
}

// serveEnvd routes a request to a sandbox's envd, answering like E2B's
// proxy when the sandbox is gone (502) and like envd on a bad token (401).
func (s *Server) serveEnvd(w http.ResponseWriter, r *http.Request, id, port string) {
	sb, ok := s.lookup(id)
	if !ok || !sb.resumeForTraffic() {
		writeJSON(w, http.StatusBadGateway, proxyError{SandboxID: id, Message: "The sandbox was not found", Code: http.StatusBadGateway})
		return
	}
	if port != EnvdPort {
		writeJSON(w, http.StatusBadGateway, proxyError{SandboxID: id, Message: fmt.Sprintf("The sandbox is running but port %s is not open (the local sandbox serves only envd on %s)", port, EnvdPort), Code: http.StatusBadGateway})
		return
	}
	if r.URL.Path != "/health" && !sb.accessOK(r) {
		writeError(w, http.StatusUnauthorized, "unauthorized access, please provide a valid access token or method signing if supported")
		return
	}
	s.envd.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sandboxKey{}, sb)))
}

// accessOK checks X-Access-Token, or for /files a valid signature, when the
// sandbox is secure.
func (sb *sandbox) accessOK(r *http.Request) bool {
	if sb.token == "" {
		return true
	}
	if tok := r.Header.Get("X-Access-Token"); tok != "" {
		return subtle.ConstantTimeCompare([]byte(tok), []byte(sb.token)) == 1
	}
	if r.URL.Path != "/files" {
		return false
	}
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	q := r.URL.Query()
	return signatureOK(sb.token, q.Get("path"), op, q.Get("username"), q.Get("signature"), q.Get("signature_expiration"), sb.s.now().Unix())
}

// fileSignature computes envd's presigned-URL signature.
func fileSignature(token, path, op, user, expiration string) string {
	raw := path + ":" + op + ":" + user + ":" + token
	if expiration != "" {
		raw += ":" + expiration
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

func signatureOK(token, path, op, user, sig, expiration string, now int64) bool {
	if sig == "" {
		return false
	}
	if expiration != "" {
		exp, err := strconv.ParseInt(expiration, 10, 64)
		if err != nil || exp < now {
			return false
		}
	}
	want := fileSignature(token, path, op, user, expiration)
	return subtle.ConstantTimeCompare([]byte(sig), []byte(want)) == 1
}

var (
	errRootUser = errors.New(`the local sandbox runs everything as the unprivileged user "user"; root is not available (run as "user", or use the e2b backend for root)`)
	errBadUser  = errors.New(`unknown user: the local sandbox has only the user "user"`)
)

// userFromAuthorization reads envd's "Authorization: Basic base64(user:)"
// header; no header means the default user.
func userFromAuthorization(h string) (string, error) {
	if h == "" {
		return sandboxUser, nil
	}
	enc, ok := strings.CutPrefix(h, "Basic ")
	if !ok {
		return "", fmt.Errorf("%w: the Authorization header must be Basic base64(\"user:\")", errBadUser)
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return "", fmt.Errorf("%w: the Authorization header is not valid base64", errBadUser)
	}
	name, _, _ := strings.Cut(string(dec), ":")
	return checkUser(name)
}

func checkUser(name string) (string, error) {
	switch name {
	case "", sandboxUser:
		return sandboxUser, nil
	case "root":
		return "", errRootUser
	}
	return "", fmt.Errorf("%w, not %q", errBadUser, name)
}

// connectUserError maps a user error to a Connect error.
func connectUserError(err error) error {
	if errors.Is(err, errRootUser) {
		return connect.NewError(connect.CodePermissionDenied, err)
	}
	return connect.NewError(connect.CodeUnauthenticated, err)
}

// httpUserError writes a user error as envd does.
func httpUserError(w http.ResponseWriter, err error) {
	code := http.StatusUnauthorized
	if errors.Is(err, errRootUser) {
		code = http.StatusForbidden
	}
	writeError(w, code, err.Error())
}
