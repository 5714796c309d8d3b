package redact_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/redact"
)

// Obviously fake values.
const (
	fakeToken = "ghp_FAKE0123456789abcdefFAKEtoken"
	fakeKey   = "sk-test-NOT-A-REAL-KEY/with+odd=chars&more"
)

func secrets() []redact.Secret {
	return []redact.Secret{
		{Name: "GITHUB_TOKEN", Value: fakeToken},
		{Name: "API_KEY", Value: fakeKey},
	}
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

func percentAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return strings.Trim(string(b), `"`)
}

func TestRedactorCatchesEachEncoding(t *testing.T) {
	r := redact.New(secrets())
	for _, v := range []string{fakeToken, fakeKey} {
		name := map[string]string{fakeToken: "GITHUB_TOKEN", fakeKey: "API_KEY"}[v]
		tests := []struct {
			name    string
			encoded string
		}{
			{"the-plain-value", v},
			{"std-base64-padded", base64.StdEncoding.EncodeToString([]byte(v))},
			{"std-base64-unpadded", base64.RawStdEncoding.EncodeToString([]byte(v))},
			{"url-base64-padded", base64.URLEncoding.EncodeToString([]byte(v))},
			{"url-base64-unpadded", base64.RawURLEncoding.EncodeToString([]byte(v))},
			{"lower-hex", hex.EncodeToString([]byte(v))},
			{"upper-hex", strings.ToUpper(hex.EncodeToString([]byte(v)))},
			{"query-escape", url.QueryEscape(v)},
			{"path-escape", url.PathEscape(v)},
			{"every-byte-percent-encoded", percentAll(v)},
			{"every-byte-percent-encoded-lower", strings.ToLower(percentAll(v))},
			{"reversed", reverse(v)},
			{"json-escaped", jsonString(v)},
			{"go-quoted", strings.Trim(strconv.Quote(v), `"`)},
		}
		for _, tt := range tests {
			t.Run(name+"-"+tt.name+"-is-replaced", func(t *testing.T) {
				in := "before " + tt.encoded + " after"
				got := r.String(in)
				assert.Equal(t, "before [REDACTED:"+name+"] after", got)
				assert.Equal(t, got, string(r.Bytes([]byte(in))))
			})
		}
	}
}

// An agent can hide a value inside a longer base64 stream, where its
// encoding depends on how many bytes precede it. The stable inner part must
// be caught at every alignment, for both alphabets.
func TestRedactorCatchesBase64AtEveryAlignment(t *testing.T) {
	r := redact.New(secrets())
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for pre := range 6 {
			for post := range 4 {
				t.Run(fmt.Sprintf("prefix-%d-suffix-%d-is-replaced", pre, post), func(t *testing.T) {
					raw := strings.Repeat("x", pre) + fakeKey + strings.Repeat("y", post)
					stream := enc.EncodeToString([]byte(raw))
					got := r.String("data:" + stream + ";")
					assert.Contains(t, got, "[REDACTED:API_KEY]")
					// What is left around the replacement must not decode, at any
					// alignment, to 8 consecutive bytes of the key.
					for _, part := range strings.Split(got, "[REDACTED:API_KEY]") {
						part = strings.TrimRight(strings.TrimPrefix(strings.TrimSuffix(part, ";"), "data:"), "=")
						for cut := 0; cut < 4 && cut <= len(part); cut++ {
							p := part[cut:]
							dec, _ := enc.WithPadding(base64.NoPadding).DecodeString(p[:len(p)/4*4])
							for i := 0; i+8 <= len(fakeKey); i++ {
								assert.NotContains(t, string(dec), fakeKey[i:i+8])
							}
						}
					}
				})
			}
		}
	}
}

func TestRedactorLeavesOrdinaryTextAlone(t *testing.T) {
	r := redact.New(append(secrets(),
		redact.Secret{Name: "DB_PASSWORD", Value: "correct horse battery staple"},
		redact.Secret{Name: "AWS", Value: "AKIAFAKEFAKEFAKEFAKE"},
		redact.Secret{Name: "HEXY", Value: "f00dfacecafe4242"},
	))
	for _, f := range []string{"fmt/print.go", "net/http/server.go", "encoding/base64/base64_test.go"} {
		t.Run(strings.ReplaceAll(f, "/", "-")+"-is-unchanged", func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "src", f))
			require.NoError(t, err)
			got := r.String(string(src))
			if got != string(src) {
				for i, line := range strings.Split(got, "\n") {
					if strings.Contains(line, "[REDACTED:") {
						t.Fatalf("false positive at line %d: %s", i+1, line)
					}
				}
				t.Fatal("output differs from input")
			}
		})
	}
	t.Run("prose-that-mentions-parts-of-a-secret-is-unchanged", func(t *testing.T) {
		in := "The horse is correct; the battery is a staple. ghp_ tokens start with ghp_FAKE."
		assert.Equal(t, in, r.String(in))
	})
}

func TestRedactorWriterCatchesSecretsSplitAtEveryBoundary(t *testing.T) {
	r := redact.New(secrets())
	text := "start " + fakeToken + " mid " + base64.StdEncoding.EncodeToString([]byte("ab"+fakeKey)) +
		" " + hex.EncodeToString([]byte(fakeToken)) + " " + fakeKey + fakeToken + " end"
	want := r.String(text)
	require.NotContains(t, want, fakeToken)
	require.NotContains(t, want, fakeKey)

	for split := 0; split <= len(text); split++ {
		var out bytes.Buffer
		w := r.Writer(&out)
		_, err := w.Write([]byte(text[:split]))
		require.NoError(t, err)
		_, err = w.Write([]byte(text[split:]))
		require.NoError(t, err)
		require.NoError(t, w.Close())
		require.Equal(t, want, out.String(), "split at %d", split)
	}

	t.Run("one-byte-writes-give-the-same-result", func(t *testing.T) {
		var out bytes.Buffer
		w := r.Writer(&out)
		for i := 0; i < len(text); i++ {
			_, err := w.Write([]byte{text[i]})
			require.NoError(t, err)
		}
		require.NoError(t, w.Close())
		assert.Equal(t, want, out.String())
	})

	t.Run("random-chunkings-give-the-same-result", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for range 200 {
			var out bytes.Buffer
			w := r.Writer(&out)
			for rest := text; rest != ""; {
				n := min(len(rest), rng.IntN(40))
				_, err := w.Write([]byte(rest[:n]))
				require.NoError(t, err)
				rest = rest[n:]
			}
			require.NoError(t, w.Close())
			require.Equal(t, want, out.String())
		}
	})
}

func TestRedactorWriter(t *testing.T) {
	r := redact.New(secrets())

	t.Run("at-most-holdback-bytes-are-kept-back-until-close", func(t *testing.T) {
		var out bytes.Buffer
		w := r.Writer(&out)
		long := strings.Repeat("plain output line\n", 100)
		_, err := w.Write([]byte(long))
		require.NoError(t, err)
		assert.Equal(t, len(long)-r.Holdback(), out.Len())
		assert.Less(t, r.Holdback(), 3*len(fakeKey), "the longest pattern is the percent-encoding")
		require.NoError(t, w.Close())
		assert.Equal(t, long, out.String())
	})

	t.Run("write-after-close-fails", func(t *testing.T) {
		w := r.Writer(io.Discard)
		require.NoError(t, w.Close())
		_, err := w.Write([]byte("x"))
		assert.ErrorIs(t, err, redact.ErrClosed)
	})

	t.Run("a-nil-redactor-passes-text-through", func(t *testing.T) {
		var nilR *redact.Redactor
		var out bytes.Buffer
		w := nilR.Writer(&out)
		_, err := w.Write([]byte(fakeToken))
		require.NoError(t, err)
		require.NoError(t, w.Close())
		assert.Equal(t, fakeToken, out.String())
		assert.Equal(t, "x", nilR.String("x"))
	})
}

func TestRedactorEdgeCases(t *testing.T) {
	t.Run("an-empty-value-redacts-nothing", func(t *testing.T) {
		r := redact.New([]redact.Secret{{Name: "EMPTY", Value: ""}})
		assert.Equal(t, "hello", r.String("hello"))
	})

	t.Run("a-short-value-is-redacted-literally-and-reported-weak", func(t *testing.T) {
		r := redact.New([]redact.Secret{{Name: "PIN", Value: "4711"}, {Name: "GITHUB_TOKEN", Value: fakeToken}})
		assert.Equal(t, []string{"PIN"}, r.Weak())
		assert.Equal(t, "pin=[REDACTED:PIN]", r.String("pin=4711"))
		// Its hex form is ordinary text and is left alone.
		assert.Equal(t, "34373131", r.String("34373131"))
	})

	t.Run("the-longest-overlapping-secret-wins", func(t *testing.T) {
		r := redact.New([]redact.Secret{{Name: "SHORT", Value: "abcdefgh12"}, {Name: "LONG", Value: "abcdefgh1234567"}})
		assert.Equal(t, "x [REDACTED:LONG] y [REDACTED:SHORT]", r.String("x abcdefgh1234567 y abcdefgh12"))
	})

	t.Run("a-secret-overlapping-the-end-of-another-match-is-still-removed", func(t *testing.T) {
		// Leftmost matching alone would replace FIRST and resume scanning
		// after it, missing SECOND whose value starts inside FIRST's.
		r := redact.New([]redact.Secret{{Name: "FIRST", Value: "prefix-0123456789"}, {Name: "SECOND", Value: "456789-suffix-abcdef"}})
		got := r.String("a prefix-0123456789-suffix-abcdef z")
		assert.Equal(t, "a [REDACTED:FIRST] z", got)
		var out bytes.Buffer
		w := r.Writer(&out)
		for _, c := range []byte("a prefix-0123456789-suffix-abcdef z") {
			_, err := w.Write([]byte{c})
			require.NoError(t, err)
		}
		require.NoError(t, w.Close())
		assert.Equal(t, got, out.String())
	})

	t.Run("a-value-with-a-trailing-newline-is-caught-without-it", func(t *testing.T) {
		r := redact.New([]redact.Secret{{Name: "FROM_FILE", Value: fakeToken + "\n"}})
		assert.Equal(t, "url=https://x:[REDACTED:FROM_FILE]@host", r.String("url=https://x:"+fakeToken+"@host"))
		assert.Equal(t, "[REDACTED:FROM_FILE]", r.String(base64.StdEncoding.EncodeToString([]byte(fakeToken+"\n"))))
	})

	t.Run("adjacent-secrets-are-replaced-separately", func(t *testing.T) {
		r := redact.New(secrets())
		assert.Equal(t, "[REDACTED:GITHUB_TOKEN][REDACTED:API_KEY]", r.String(fakeToken+fakeKey))
	})

	t.Run("a-name-with-odd-characters-is-cleaned", func(t *testing.T) {
		r := redact.New([]redact.Secret{{Name: `a"b c`, Value: fakeToken}})
		assert.Equal(t, "[REDACTED:a_b_c]", r.String(fakeToken))
	})

	t.Run("bytes-does-not-modify-its-input", func(t *testing.T) {
		r := redact.New(secrets())
		in := []byte("x " + fakeToken)
		_ = r.Bytes(in)
		assert.Equal(t, "x "+fakeToken, string(in))
	})
}

func TestSecretNeverPrintsItsValue(t *testing.T) {
	s := redact.Secret{Name: "GITHUB_TOKEN", Value: fakeToken}
	type holder struct {
		Token redact.Secret
		Ptr   *redact.Secret
	}
	h := holder{Token: s, Ptr: &s}

	var jsonLog, textLog bytes.Buffer
	slog.New(slog.NewJSONHandler(&jsonLog, nil)).Info("using", "token", s, "holder", h)
	slog.New(slog.NewTextHandler(&textLog, nil)).Info("using", "token", s, "holder", h)
	marshalled, err := json.Marshal(h)
	require.NoError(t, err)
	text, err := s.MarshalText()
	require.NoError(t, err)

	outputs := map[string]string{
		"slog-json":    jsonLog.String(),
		"slog-text":    textLog.String(),
		"json-marshal": string(marshalled),
		"marshal-text": string(text),
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		outputs["fmt-"+verb] = fmt.Sprintf(verb, s)
		outputs["fmt-struct-"+verb] = fmt.Sprintf(verb, h)
	}
	outputs["string"] = s.String()
	for name, out := range outputs {
		t.Run(name+"-hides-the-value", func(t *testing.T) {
			assert.NotContains(t, out, fakeToken)
			assert.NotContains(t, strings.ToLower(out), hex.EncodeToString([]byte(fakeToken)))
			assert.Contains(t, out, "REDACTED")
		})
	}
	assert.Contains(t, jsonLog.String(), `"token":"REDACTED"`)
	assert.Contains(t, textLog.String(), `token=REDACTED`)
}
