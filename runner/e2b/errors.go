package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
)

// Sentinel errors a caller can branch on with errors.Is. Every error the
// client returns is an *Error whose Kind is one of these (or a
// *RateLimitError), or a context error when ctx ended first.
var (
	// ErrUnauthorized: the API key (control plane) or the sandbox access
	// token or user (envd) was refused. HTTP 401, Connect unauthenticated.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrNotFound: a template, file, directory or process does not exist.
	// HTTP 404 from envd or on create, Connect not_found.
	ErrNotFound = errors.New("not found")
	// ErrSandboxGone: the sandbox does not exist any more (killed, expired or
	// never created). HTTP 404 on a sandbox operation, 502 from the sandbox
	// proxy, Connect unavailable.
	ErrSandboxGone = errors.New("sandbox not found or no longer running")
	// ErrCommandTimeout: a command ran past its timeout and envd killed it
	// (Connect deadline_exceeded).
	ErrCommandTimeout = errors.New("command timed out")
	// ErrDiskFull: the sandbox has no space left for a write (HTTP 507).
	ErrDiskFull = errors.New("sandbox disk full")
	// ErrInvalidArgument: the request was malformed or out of range, for
	// example a timeout above the plan's maximum or a directory given to
	// ReadFile (HTTP 400, Connect invalid_argument or failed_precondition).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrConflict: the sandbox is in a state that forbids the operation, for
	// example being paused or killed at this moment (HTTP 409, Connect
	// already_exists/aborted).
	ErrConflict = errors.New("conflict")
)

// RateLimitError is returned when E2B refuses a call for rate or
// concurrency limits (HTTP 429, Connect resource_exhausted). Match it with
// errors.As.
type RateLimitError struct {
	// RetryAfter is how long the server asked the caller to wait; zero when
	// it did not say.
	RetryAfter time.Duration
}

func (e *RateLimitError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("rate limited (retry after %s)", e.RetryAfter)
	}
	return "rate limited"
}

// Error is the error type every failed call returns. Its message starts with
// the operation ("e2b: create sandbox: ...") and carries the server's own
// message; it never contains the API key or the sandbox access token.
type Error struct {
	// Op is the operation, such as "create sandbox" or "run command".
	Op string
	// SandboxID is the sandbox the operation was about, if any.
	SandboxID string
	// Status is the HTTP status, or 0 when the failure was not an HTTP
	// response (Connect error, transport failure).
	Status int
	// Code is the Connect code or E2B's error_code, when there was one.
	Code string
	// Message is the server's message, or a description of the failure.
	Message string
	// Kind is the sentinel (ErrNotFound, …) or *RateLimitError this error
	// matches, or nil for an unclassified failure.
	Kind error
	// Err is the underlying cause (transport or decoding error), if any.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("e2b: ")
	b.WriteString(e.Op)
	if e.SandboxID != "" {
		if !strings.HasSuffix(e.Op, "sandbox") {
			b.WriteString(" in sandbox")
		}
		b.WriteString(" ")
		b.WriteString(e.SandboxID)
	}
	b.WriteString(": ")
	var parts []string
	if e.Kind != nil {
		parts = append(parts, e.Kind.Error())
	}
	if e.Status != 0 {
		parts = append(parts, fmt.Sprintf("HTTP %d", e.Status))
	}
	if e.Code != "" {
		parts = append(parts, e.Code)
	}
	if len(parts) > 0 {
		b.WriteString(strings.Join(parts, ", "))
	}
	if e.Message != "" {
		if len(parts) > 0 {
			b.WriteString(": ")
		}
		b.WriteString(e.Message)
	}
	if e.Message == "" && e.Err != nil {
		if len(parts) > 0 {
			b.WriteString(": ")
		}
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap lets errors.Is and errors.As see both the kind and the cause.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// scope says what a 404 means for the operation that got it.
type scope int

const (
	// scopeSandbox: the operation names a sandbox; 404 means it is gone.
	scopeSandbox scope = iota
	// scopeResource: the operation names a template, file or process.
	scopeResource
)

// kindForStatus maps an HTTP status to the sentinel a caller branches on.
func kindForStatus(status int, sc scope, retryAfter time.Duration) error {
	switch status {
	case http.StatusBadRequest:
		return ErrInvalidArgument
	case http.StatusUnauthorized, http.StatusForbidden:
		return ErrUnauthorized
	case http.StatusNotFound:
		if sc == scopeSandbox {
			return ErrSandboxGone
		}
		return ErrNotFound
	case http.StatusConflict:
		return ErrConflict
	case http.StatusTooManyRequests:
		return &RateLimitError{RetryAfter: retryAfter}
	case http.StatusBadGateway:
		return ErrSandboxGone
	case http.StatusInsufficientStorage:
		return ErrDiskFull
	}
	return nil
}

// statusError builds the *Error for a non-success HTTP response, reading (a
// bounded part of) its body for the server's message. It does not close the
// body.
func statusError(op, sandboxID string, resp *http.Response, sc scope, now func() time.Time, secrets ...string) *Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg, code := errorBodyMessage(body)
	retryAfter := parseRetryAfter(resp.Header.Get("Retry-After"), now)
	return &Error{
		Op:        op,
		SandboxID: sandboxID,
		Status:    resp.StatusCode,
		Code:      code,
		Message:   redact(msg, secrets...),
		Kind:      kindForStatus(resp.StatusCode, sc, retryAfter),
	}
}

// errorBodyMessage extracts the message from an E2B error body
// ({"code":…,"message":…,"error_code":…}), falling back to the trimmed
// body text.
func errorBodyMessage(body []byte) (msg, code string) {
	var parsed struct {
		Message   string `json:"message"`
		ErrorCode string `json:"error_code"`
	}
	if json.Unmarshal(body, &parsed) == nil && parsed.Message != "" {
		return truncate(parsed.Message), truncate(parsed.ErrorCode)
	}
	return truncate(strings.TrimSpace(string(body))), ""
}

// maxMessage bounds the server text carried in an error.
const maxMessage = 1024

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return strings.ToValidUTF8(s[:maxMessage], "") + "…"
}

// parseRetryAfter reads a Retry-After header given in seconds or as an
// HTTP date; it returns 0 when absent or unreadable.
func parseRetryAfter(v string, now func() time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return min(time.Duration(min(secs, int64(maxRetryAfter/time.Second)))*time.Second, maxRetryAfter)
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now()); d > 0 {
			return min(d, maxRetryAfter)
		}
	}
	return 0
}

// maxRetryAfter caps what a server can ask a caller to wait.
const maxRetryAfter = 24 * time.Hour

// connectError turns an error from a Connect RPC into an *Error. ctx
// errors pass through unchanged so callers can compare with ctx.Err().
func connectError(op, sandboxID string, err error, secrets ...string) error {
	var typed *Error
	if errors.As(err, &typed) {
		// Raised by our transport wrapper (502, 429, 507 from the proxy).
		out := *typed
		out.Op, out.SandboxID = op, sandboxID
		return &out
	}
	code := connect.CodeOf(err)
	msg := err.Error()
	var ce *connect.Error
	if errors.As(err, &ce) {
		msg = ce.Message()
	}
	e := &Error{Op: op, SandboxID: sandboxID, Code: code.String(), Message: redact(msg, secrets...), Err: err}
	switch code {
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		e.Kind = ErrUnauthorized
	case connect.CodeNotFound:
		e.Kind = ErrNotFound
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeOutOfRange:
		e.Kind = ErrInvalidArgument
	case connect.CodeAlreadyExists, connect.CodeAborted:
		e.Kind = ErrConflict
	case connect.CodeDeadlineExceeded:
		e.Kind = ErrCommandTimeout
	case connect.CodeResourceExhausted:
		e.Kind = &RateLimitError{}
	case connect.CodeUnavailable:
		e.Kind = ErrSandboxGone
	}
	return e
}

// transportError wraps a failure to get any response.
func transportError(op, sandboxID string, err error, secrets ...string) *Error {
	return &Error{Op: op, SandboxID: sandboxID, Message: redact(err.Error(), secrets...), Err: err}
}

// redact removes every non-empty secret from s.
func redact(s string, secrets ...string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "REDACTED")
		}
	}
	return s
}
