package server

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAccessRules(t *testing.T) {
	bound := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8080}
	a := &access{
		token:   []byte("right-token-0123456789"),
		hosts:   allowedHosts([]string{"mcp.example.com"}, bound),
		origins: []string{"https://app.example.com"},
		maxBody: 16,
		logger:  slog.New(slog.DiscardHandler),
	}
	h := a.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	cases := []struct {
		name   string
		host   string
		origin string
		auth   string
		body   string
		chunk  bool // send the body without a Content-Length
		want   int
	}{
		{name: "loopback-with-token-is-served", host: "127.0.0.1:8080", want: 200},
		{name: "localhost-any-case-and-trailing-dot-is-served", host: "LocalHost.:8080", want: 200},
		{name: "ipv6-loopback-is-served", host: "[::1]:8080", want: 200},
		{name: "a-configured-host-is-served", host: "mcp.example.com", want: 200},
		{name: "a-rebound-name-is-refused", host: "evil.example:8080", want: 403},
		{name: "a-loopback-lookalike-name-is-refused", host: "127.0.0.1.evil.example", want: 403},
		{name: "localhost-as-a-subdomain-is-refused", host: "localhost.evil.example", want: 403},
		{name: "a-configured-origin-is-served", host: "localhost", origin: "https://app.example.com", want: 200},
		{name: "a-loopback-origin-is-served", host: "localhost", origin: "http://127.0.0.1:6274", want: 200},
		{name: "a-foreign-origin-is-refused", host: "localhost", origin: "https://evil.example", want: 403},
		{name: "the-null-origin-is-refused", host: "localhost", origin: "null", want: 403},
		{name: "a-non-web-origin-scheme-is-refused", host: "localhost", origin: "file://localhost", want: 403},
		{name: "a-configured-origin-prefix-is-refused", host: "localhost", origin: "https://app.example.com.evil.example", want: 403},
		{name: "no-token-is-refused", host: "localhost", auth: "-", want: 401},
		{name: "a-wrong-token-is-refused", host: "localhost", auth: "Bearer wrong-token-0123456789", want: 401},
		{name: "a-token-prefix-is-refused", host: "localhost", auth: "Bearer right-token", want: 401},
		{name: "an-empty-bearer-is-refused", host: "localhost", auth: "Bearer ", want: 401},
		{name: "basic-auth-is-refused", host: "localhost", auth: "Basic cmlnaHQtdG9rZW4=", want: 401},
		{name: "the-bearer-scheme-is-case-insensitive", host: "localhost", auth: "bearer right-token-0123456789", want: 200},
		{name: "a-body-at-the-limit-is-served", host: "localhost", body: strings.Repeat("a", 16), want: 200},
		{name: "a-declared-large-body-is-refused-before-reading", host: "localhost", body: strings.Repeat("a", 17), want: 413},
		{name: "an-undeclared-large-body-is-cut-off", host: "localhost", body: strings.Repeat("a", 1000), chunk: true, want: 413},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(tc.body)
			if tc.chunk {
				body = io.MultiReader(strings.NewReader(tc.body)) // hides the length
			}
			r := httptest.NewRequest("POST", "/mcp", body)
			if tc.chunk {
				r.ContentLength = -1
			}
			r.Host = tc.host
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			switch tc.auth {
			case "":
				r.Header.Set("Authorization", "Bearer right-token-0123456789")
			case "-":
			default:
				r.Header.Set("Authorization", tc.auth)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			assert.Equal(t, tc.want, w.Code)
		})
	}
}

func TestIsLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:80": true, "localhost:1": true, "127.5.6.7:9": true,
		"0.0.0.0:8080": false, "[::]:80": false, "10.0.0.1:80": false, "example.com:80": false, "127.0.0.1": false,
	} {
		assert.Equal(t, want, IsLoopbackAddr(addr), addr)
	}
}
