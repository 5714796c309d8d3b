package e2blocal

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRecoverJSONTurnsAPanicIntoA500(t *testing.T) {
	var logs bytes.Buffer
	h := recoverJSON(slog.New(slog.NewTextHandler(&logs, nil)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/boom" {
			panic("boom")
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/boom", nil))
	assert.Equal(t, 500, rec.Code)
	assert.JSONEq(t, `{"code":500,"message":"internal error in the local sandbox service (logged)"}`, rec.Body.String())
	assert.Contains(t, logs.String(), "boom")

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/fine", nil))
	assert.Equal(t, http.StatusNoContent, rec.Code, "the neighbour request is served normally")
}

func TestEnvdTarget(t *testing.T) {
	for _, tc := range []struct {
		name     string
		host     string
		header   string
		port     string
		wantID   string
		wantPort string
		envd     bool
	}{
		{"header-selects-envd", "127.0.0.1:3000", "iabc", "", "iabc", EnvdPort, true},
		{"header-port-is-kept", "127.0.0.1:3000", "iabc", "8080", "iabc", "8080", true},
		{"host-form-selects-envd", "49983-iabc.localhost:3000", "", "", "iabc", EnvdPort, true},
		{"plain-loopback-is-control-plane", "127.0.0.1:3000", "", "", "", "", false},
		{"localhost-is-control-plane", "localhost:3000", "", "", "", "", false},
		{"dashed-name-is-control-plane", "my-host.example.com", "", "", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/health", nil)
			r.Host = tc.host
			if tc.header != "" {
				r.Header.Set("E2b-Sandbox-Id", tc.header)
			}
			if tc.port != "" {
				r.Header.Set("E2b-Sandbox-Port", tc.port)
			}
			id, port, ok := envdTarget(r)
			require.Equal(t, tc.envd, ok)
			assert.Equal(t, tc.wantID, id)
			assert.Equal(t, tc.wantPort, port)
		})
	}
}

func TestNewNeedsAKeyAndADir(t *testing.T) {
	_, err := New(Options{Dir: t.TempDir()})
	assert.ErrorContains(t, err, "API key")
	_, err = New(Options{APIKey: testKey})
	assert.ErrorContains(t, err, "directory")
}

func TestKeepaliveInterval(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		want         time.Duration
	}{
		{"absent-is-envd-default", "", 90 * time.Second},
		{"sdk-value", "50", 50 * time.Second},
		{"garbage-is-default", "soon", 90 * time.Second},
		{"negative-is-default", "-5", 90 * time.Second},
		{"huge-is-capped-not-overflowed", "99999999999999", time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.header != "" {
				h.Set("Keepalive-Ping-Interval", tc.header)
			}
			assert.Equal(t, tc.want, keepaliveInterval(h))
		})
	}
}
