package audit_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/audit"
	"github.com/sandbox-mcp/sandbox-mcp/redact"
)

const canary = "CANARY-fake-secret-0123456789"

// writeLog creates a log with n decision lines and returns its path.
func writeLog(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := audit.Open(path, audit.Options{NoSync: true})
	require.NoError(t, err)
	log := l.Logger()
	for i := range n {
		log.Info("decision", audit.KeyTaskID, "task-1", audit.KeyTool, "run_command",
			audit.KeyDecision, "allow", audit.KeyRule, "commands.allow[0]", audit.KeyExitCode, i)
	}
	require.NoError(t, l.Err())
	require.NoError(t, l.Close())
	return path
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.SplitAfter(string(b), "\n")[:strings.Count(string(b), "\n")]
}

// editPrev changes the first hex digit of a line's prev.
func editPrev(line string) string {
	i := len(`{"seq":2,"prev":"`)
	c := byte('0')
	if line[i] == '0' {
		c = '1'
	}
	return line[:i] + string(c) + line[i+1:]
}

func verifyString(s string) (audit.Report, error) { return audit.Verify(strings.NewReader(s)) }

func TestLogWritesAChainThatVerifies(t *testing.T) {
	path := writeLog(t, 5)
	ls := lines(t, path)
	require.Len(t, ls, 5)

	var first map[string]any
	require.NoError(t, json.Unmarshal([]byte(ls[0]), &first))
	assert.EqualValues(t, 1, first["seq"])
	assert.Equal(t, strings.Repeat("0", 64), first["prev"])
	assert.Equal(t, "task-1", first[audit.KeyTaskID])
	assert.Equal(t, "allow", first[audit.KeyDecision])
	assert.True(t, strings.HasPrefix(ls[0], `{"seq":1,"prev":"`), "seq and prev come first: %s", ls[0])

	rep, err := verifyString(strings.Join(ls, ""))
	require.NoError(t, err)
	assert.EqualValues(t, 5, rep.Lines)
	assert.Len(t, rep.Head, 64)

	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

func TestVerifyNamesTheFirstBadLine(t *testing.T) {
	ls := lines(t, writeLog(t, 6))
	join := func(ls ...string) string { return strings.Join(ls, "") }
	edit := func(s, old, new string) string {
		require.Contains(t, s, old)
		return strings.Replace(s, old, new, 1)
	}
	tests := []struct {
		name     string
		log      string
		wantLine int64
		wantText string
	}{
		{"an-edited-value-is-found", join(ls[0], ls[1], edit(ls[2], `"allow"`, `"deny!"`), ls[3], ls[4], ls[5]), 3, "edited"},
		{"an-edited-byte-in-the-first-line-is-found", join(edit(ls[0], "task-1", "task-2"), ls[1], ls[2], ls[3], ls[4], ls[5]), 1, "edited"},
		{"a-removed-line-is-found", join(ls[0], ls[1], ls[3], ls[4], ls[5]), 3, "removed"},
		{"a-removed-first-line-is-found", join(ls[1], ls[2], ls[3], ls[4], ls[5]), 1, "removed"},
		{"reordered-lines-are-found", join(ls[0], ls[2], ls[1], ls[3], ls[4], ls[5]), 2, "reordered"},
		{"a-duplicated-line-is-found", join(ls[0], ls[1], ls[1], ls[2], ls[3], ls[4], ls[5]), 3, "inserted"},
		{"an-inserted-line-with-a-forged-seq-is-found", join(ls[0], ls[1], edit(ls[1], `"seq":2`, `"seq":3`), ls[2], ls[3], ls[4], ls[5]), 2, "inserted"},
		{"a-line-cut-in-the-middle-is-found", join(ls[0], ls[1], ls[2][:len(ls[2])/2], ls[3], ls[4], ls[5]), 3, "JSON"},
		{"a-truncated-last-line-is-found", join(ls[0], ls[1], ls[2], ls[3], ls[4], ls[5][:40]), 6, "truncated"},
		{"a-blank-line-is-found", join(ls[0], "\n", ls[1]), 2, "does not start"},
		{"a-line-that-is-not-audit-json-is-found", join(ls[0], ls[1], "hello\n"), 3, "does not start"},
		{"an-edited-prev-is-found", join(ls[0], editPrev(ls[1]), ls[2]), 1, "prev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := verifyString(tt.log)
			var ve *audit.VerifyError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, tt.wantLine, ve.Line, ve.Error())
			assert.Contains(t, ve.Reason, tt.wantText)
		})
	}
	t.Run("the-untouched-log-verifies", func(t *testing.T) {
		rep, err := verifyString(join(ls...))
		require.NoError(t, err)
		assert.EqualValues(t, 6, rep.Lines)
	})
	t.Run("an-empty-log-verifies", func(t *testing.T) {
		rep, err := verifyString("")
		require.NoError(t, err)
		assert.EqualValues(t, 0, rep.Lines)
	})
}

func TestVerifyAnchorFindsACutTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := audit.Open(path, audit.Options{NoSync: true})
	require.NoError(t, err)
	for i := range 4 {
		l.Logger().Info("decision", audit.KeyExitCode, i)
	}
	n, anchor := l.Head()
	require.EqualValues(t, 4, n)
	l.Logger().Info("later")
	require.NoError(t, l.Close())
	ls := lines(t, path)

	rep, err := audit.VerifyAnchor(strings.NewReader(strings.Join(ls, "")), anchor)
	require.NoError(t, err, "the whole log contains the anchor")
	assert.EqualValues(t, 5, rep.Lines)

	_, err = audit.Verify(strings.NewReader(strings.Join(ls[:3], "")))
	require.NoError(t, err, "a chain alone cannot see a cut tail")
	_, err = audit.VerifyAnchor(strings.NewReader(strings.Join(ls[:3], "")), anchor)
	var ve *audit.VerifyError
	require.ErrorAs(t, err, &ve)
	assert.Contains(t, ve.Reason, "anchor")
}

func TestLogRedactsEveryLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	r := redact.New([]redact.Secret{{Name: "CANARY", Value: canary}})
	l, err := audit.Open(path, audit.Options{NoSync: true, Redactor: r})
	require.NoError(t, err)
	log := l.Logger().With(audit.KeyTaskID, "task-1")
	log.Info("run_command "+canary, "argv", []string{"git", "push", "https://x:" + canary + "@example.com"})
	log.Warn("output", "stdout", "token="+base64.StdEncoding.EncodeToString([]byte(canary)))
	log.Error("failed", audit.KeyError, errors.New("auth "+canary+" rejected"),
		slog.Group("env", "GITHUB_TOKEN", canary), "quoted", `"`+canary+`"`)
	log.Info("secret type", "token", redact.Secret{Name: "CANARY", Value: canary})
	require.NoError(t, l.Err())
	require.NoError(t, l.Close())

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(data), canary)
	assert.NotContains(t, string(data), base64.StdEncoding.EncodeToString([]byte(canary))[:20])
	assert.Equal(t, 6, strings.Count(string(data), "[REDACTED:CANARY]"), string(data))
	rep, err := audit.Verify(bytes.NewReader(data))
	require.NoError(t, err, "redaction happens before hashing")
	assert.EqualValues(t, 4, rep.Lines)
	for _, line := range lines(t, path) {
		assert.True(t, json.Valid([]byte(line)), line)
	}
}

func TestSetRedactorAppliesToLaterLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := audit.Open(path, audit.Options{NoSync: true})
	require.NoError(t, err)
	l.Logger().Info("before the task loaded", "note", "no secrets known yet")
	l.SetRedactor(redact.New([]redact.Secret{{Name: "CANARY", Value: canary}}))
	l.Logger().Info("after", "stdout", canary)
	require.NoError(t, l.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(data), canary)
	assert.Contains(t, string(data), `"stdout":"[REDACTED:CANARY]"`)
}

func TestUnwritableRecordsAreReplacedNotDropped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	// A value that, unescaped, spans JSON structure: redacting it breaks the
	// line, which must then not be written as is.
	r := redact.New([]redact.Secret{{Name: "ODD", Value: `1","tool`}})
	l, err := audit.Open(path, audit.Options{NoSync: true, Redactor: r})
	require.NoError(t, err)
	l.Logger().Info("decision", audit.KeyTaskID, "task-1", audit.KeyTool, "run_command")
	l.Logger().Info("huge", "stdout", strings.Repeat("x", audit.MaxLineBytes))
	l.Logger().Info("fine", audit.KeyTaskID, "task-2")
	require.NoError(t, l.Err())
	require.NoError(t, l.Close())

	ls := lines(t, path)
	require.Len(t, ls, 3)
	assert.Contains(t, ls[0], "not a JSON object after redaction")
	assert.NotContains(t, ls[0], `1","tool`)
	assert.Contains(t, ls[1], "longer than the line limit")
	assert.Less(t, len(ls[1]), 1000)
	assert.Contains(t, ls[2], `"task_id":"task-2"`)
	_, err = audit.Verify(mustOpen(t, path))
	require.NoError(t, err)
}

func TestLogIsSafeForConcurrentUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := audit.Open(path, audit.Options{NoSync: true})
	require.NoError(t, err)
	const workers, each = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			log := l.Logger().With(audit.KeySessionID, fmt.Sprintf("s-%d", w))
			for i := range each {
				log.Info("side effect", audit.KeyTool, "write_file", "i", i, "pad", strings.Repeat("x", i*10))
			}
		})
	}
	wg.Wait()
	require.NoError(t, l.Close())
	rep, err := audit.Verify(mustOpen(t, path))
	require.NoError(t, err)
	assert.EqualValues(t, workers*each, rep.Lines)
}

func mustOpen(t *testing.T, path string) *os.File {
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

func TestOpen(t *testing.T) {
	t.Run("reopening-continues-the-chain", func(t *testing.T) {
		path := writeLog(t, 3)
		l, err := audit.Open(path, audit.Options{})
		require.NoError(t, err)
		assert.Empty(t, l.SetAside())
		n, _ := l.Head()
		assert.EqualValues(t, 3, n)
		l.Logger().Info("after restart")
		require.NoError(t, l.Close())
		rep, err := audit.Verify(mustOpen(t, path))
		require.NoError(t, err)
		assert.EqualValues(t, 4, rep.Lines)
	})

	t.Run("a-broken-log-is-set-aside-unchanged-and-a-new-chain-starts", func(t *testing.T) {
		path := writeLog(t, 3)
		ls := lines(t, path)
		tampered := ls[0] + ls[2]
		require.NoError(t, os.WriteFile(path, []byte(tampered), 0o600))

		l, err := audit.Open(path, audit.Options{})
		require.NoError(t, err)
		aside := l.SetAside()
		require.NotEmpty(t, aside)
		l.Logger().Info("next")
		require.NoError(t, l.Close())

		kept, err := os.ReadFile(aside)
		require.NoError(t, err)
		assert.Equal(t, tampered, string(kept), "the evidence is not modified")

		rep, err := audit.Verify(mustOpen(t, path))
		require.NoError(t, err)
		assert.EqualValues(t, 2, rep.Lines)
		first := lines(t, path)[0]
		assert.Contains(t, first, "set aside")
		assert.Contains(t, first, filepath.Base(aside))
		assert.Contains(t, first, "line 2: seq is 3")
	})

	t.Run("a-second-open-of-the-same-file-fails-clearly", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "audit.jsonl")
		l, err := audit.Open(path, audit.Options{NoSync: true})
		require.NoError(t, err)
		defer l.Close()
		_, err = audit.Open(path, audit.Options{NoSync: true})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "in use by another process")
		l.Logger().Info("still works")
		assert.NoError(t, l.Err())
	})

	t.Run("logging-after-close-is-an-error-not-silence", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "audit.jsonl")
		l, err := audit.Open(path, audit.Options{NoSync: true})
		require.NoError(t, err)
		require.NoError(t, l.Close())
		err = l.Handler().Handle(context.Background(), slog.NewRecord(time.Now(), slog.LevelInfo, "late", 0))
		assert.ErrorIs(t, err, audit.ErrClosed)
		assert.ErrorIs(t, l.Err(), audit.ErrClosed)
	})

	t.Run("caller-keys-named-seq-and-prev-cannot-shadow-the-chain", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "audit.jsonl")
		l, err := audit.Open(path, audit.Options{NoSync: true})
		require.NoError(t, err)
		l.Logger().Info("x", "seq", 99, "prev", "forged")
		require.NoError(t, l.Close())
		line := lines(t, path)[0]
		assert.Contains(t, line, `"attr_seq":99`)
		_, err = audit.Verify(mustOpen(t, path))
		assert.NoError(t, err)
	})
}

func BenchmarkLog(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("fsync-%v", sync), func(b *testing.B) {
			l, err := audit.Open(filepath.Join(b.TempDir(), "audit.jsonl"), audit.Options{
				NoSync:   !sync,
				Redactor: redact.New([]redact.Secret{{Name: "CANARY", Value: canary}}),
			})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			log := l.Logger().With(audit.KeyTaskID, "task-1842", audit.KeySessionID, "s-1")
			b.ReportAllocs()
			for b.Loop() {
				log.Info("decision", audit.KeyTool, "run_command", audit.KeyDecision, "allow",
					audit.KeyRule, "commands.allow[1]", audit.KeyDurationMS, 12, audit.KeyExitCode, 0)
			}
			if err := l.Err(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
