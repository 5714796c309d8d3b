package contracts_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

// parseErr parses name/data, requires it to fail with Errors and returns the
// error text.
func parseErr(t *testing.T, name, data string) string {
	t.Helper()
	c, w, err := contracts.Parse(name, []byte(data))
	require.Error(t, err)
	assert.Nil(t, c)
	assert.Nil(t, w)
	var errs contracts.Errors
	require.ErrorAs(t, err, &errs)
	require.NotEmpty(t, errs)
	return err.Error()
}

func TestParseRefusesHostileInput(t *testing.T) {
	aliasBomb := `version: 1
task: {id: t}
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
`
	t.Run("an-alias-bomb-is-refused-at-each-anchor-not-expanded", func(t *testing.T) {
		msg := parseErr(t, "bomb.yaml", aliasBomb)
		lines := strings.Split(msg, "\n")
		assert.Len(t, lines, 7)
		assert.Equal(t, "bomb.yaml:3:4: a: YAML anchors (&a) are not allowed; write the value out", lines[0])
		assert.Equal(t, "bomb.yaml:9:4: g: YAML anchors (&g) are not allowed; write the value out", lines[6])
	})
	tests := []struct {
		name string
		file string
		data string
		want string
	}{
		{"empty-file-is-an-empty-contract", "c.yaml", "", "c.yaml: empty contract"},
		{"whitespace-only-is-an-empty-contract", "c.yaml", " \n\t\n", "c.yaml: empty contract"},
		{"comments-only-is-an-empty-contract", "c.yaml", "# nothing here\n", "c.yaml: empty contract"},
		{"null-document-is-an-empty-contract", "c.yaml", "~\n", "c.yaml: empty contract"},
		{"empty-json-file-is-an-empty-contract", "c.json", "", "c.json: empty contract"},
		{"nul-byte-is-refused-with-its-position", "c.yaml", "version: 1\ntask: {id: \x00}\n", "c.yaml:2:12: contains a NUL byte; a contract is UTF-8 text"},
		{"invalid-utf8-is-refused-with-its-position", "c.yaml", "version: 1\ntask: {id: a\xffb}\n", "c.yaml:2:13: invalid UTF-8 (byte 0xff); a contract is UTF-8 text"},
		{"malformed-yaml-names-the-line", "c.yaml", "version: 1\ntask:\n  id: [unclosed\n", "c.yaml:3: invalid YAML: did not find expected ',' or ']'"},
		{"tab-indentation-names-the-line", "c.yaml", "version: 1\ntask:\n\tid: x\n", "c.yaml:3: invalid YAML: found character that cannot start any token"},
		{"alias-is-refused-with-its-anchor", "c.yaml", "version: 1\ntask: {id: &x t}\nsandbox: {template: *x}\n",
			"c.yaml:2:12: task.id: YAML anchors (&x) are not allowed; write the value out\nc.yaml:3:21: sandbox.template: YAML aliases (*x) are not allowed; write the value out"},
		{"undefined-alias-is-refused", "c.yaml", "version: 1\ntask: {id: t}\nsandbox: {template: *x}\n", "c.yaml: invalid YAML: unknown anchor 'x' referenced"},
		{"second-document-is-refused", "c.yaml", "version: 1\ntask: {id: t}\n---\nversion: 1\n", "c.yaml:3:1: a second YAML document; a contract file holds exactly one"},
		{"duplicate-yaml-key-is-refused", "c.yaml", "version: 1\ntask: {id: t}\nversion: 1\n", "c.yaml:3:1: version: duplicate key (first at line 1)"},
		{"non-string-key-is-refused", "c.yaml", "version: 1\ntask: {id: t}\n1: x\n", "c.yaml:3:1: keys must be strings, got 1"},
		{"merge-key-is-refused", "c.yaml", "version: 1\ntask: {id: t, <<: {owner: x}}\n", "c.yaml:2:15: task: YAML merge keys (<<) are not allowed; write the keys out"},
		{"custom-tag-is-refused", "c.yaml", "version: 1\ntask: {id: !secret t}\n", "c.yaml:2:12: task.id: unsupported YAML tag !secret"},
		{"binary-tag-is-refused", "c.yaml", "version: 1\ntask: {id: !!binary aGk=}\n", "c.yaml:2:12: task.id: unsupported YAML tag !!binary"},
		{"huge-integer-is-refused", "c.yaml", "version: 1\ntask: {id: t}\nlimits: {processes: 99999999999999999999999}\n", "c.yaml:3:10: limits.processes: must be at most 1048576, got 1e+23"},
		{"infinite-number-is-refused", "c.yaml", "version: 1\ntask: {id: t}\nlimits: {processes: .inf}\n", "c.yaml:3:21: limits.processes: number .inf is out of range"},
		{"integer-beyond-int64-is-refused", "c.yaml", "version: 1\ntask: {id: t}\nlimits: {processes: 18446744073709551615}\n", "c.yaml:3:21: limits.processes: integer 18446744073709551615 is out of range"},
		{"hex-beyond-uint64-is-a-string", "c.yaml", "version: 1\ntask: {id: t}\nlimits: {processes: 0x1ffffffffffffffff}\n", "c.yaml:3:10: limits.processes: must be an integer, got \"0x1ffffffffffffffff\""},
		{"a-list-is-not-a-contract", "c.yaml", "- version: 1\n", "c.yaml:1:1: must be a mapping, got a list"},
		{"a-scalar-is-not-a-contract", "c.yaml", "hello\n", "c.yaml:1:1: must be a mapping, got \"hello\""},
		{"json-syntax-error-names-line-and-column", "c.json", "{\n  \"version\": 1,\n  \"task\": {\"id\": \"t\",}\n}\n", "c.json:3:22: invalid JSON: invalid character '}' looking for beginning of object key string"},
		{"json-truncated-document-is-refused", "c.json", "{\"version\": 1, \"task\": {", "c.json:1:25: invalid JSON: unexpected end of input"},
		{"json-trailing-data-is-refused", "c.json", "{\"version\": 1, \"task\": {\"id\": \"t\"}} {}", "c.json:1:37: unexpected data after the contract; a contract file holds exactly one JSON document"},
		{"json-duplicate-key-is-refused", "c.json", "{\"version\": 1,\n \"task\": {\"id\": \"t\"},\n \"version\": 1}", "c.json:3:2: version: duplicate key (first at line 1)"},
		{"json-escaped-nul-is-refused", "c.json", `{"version": 1, "task": {"id": "a\u0000b"}}`, "c.json:1:31: task.id: contains a NUL character"},
		{"json-comments-are-refused", "c.json", "// hi\n{}", "c.json:1:1: invalid JSON: invalid character '/' looking for beginning of value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, parseErr(t, tt.file, tt.data))
		})
	}
}

func TestParseRefusesOversizedAndDeepDocuments(t *testing.T) {
	t.Run("a-document-over-1-mib-is-refused-before-parsing", func(t *testing.T) {
		data := "version: 1\ntask: {id: t}\n# " + strings.Repeat("x", contracts.MaxSize) + "\n"
		assert.Equal(t, fmt.Sprintf("big.yaml: contract is %d bytes; the limit is 1048576 (1 MiB)", len(data)), parseErr(t, "big.yaml", data))
	})
	t.Run("ten-thousand-nested-yaml-lists-are-refused", func(t *testing.T) {
		data := "version: 1\ntask: {id: t}\nx: " + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + "\n"
		assert.Equal(t, "deep.yaml:3:36: x[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]: nested more than 32 levels deep; a contract is a few levels deep", parseErr(t, "deep.yaml", data))
	})
	t.Run("ten-thousand-nested-json-lists-are-refused", func(t *testing.T) {
		data := `{"x": ` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + "}"
		msg := parseErr(t, "deep.json", data)
		assert.Contains(t, msg, "deep.json:1:39: x[0]")
		assert.Contains(t, msg, "nested more than 32 levels deep")
	})
	t.Run("deeper-than-the-yaml-parser-allows-is-an-error-not-a-crash", func(t *testing.T) {
		data := "x: " + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + "\n"
		assert.Contains(t, parseErr(t, "deeper.yaml", data), "invalid YAML: ")
	})
	t.Run("a-wide-list-is-refused-by-entry-count", func(t *testing.T) {
		data := "version: 1\ntask: {id: t}\nx: [" + strings.Repeat("1,", 200_000) + "1]\n"
		assert.Equal(t, "wide.yaml:3:4: x: more than 1000 entries; the schema allows no more", parseErr(t, "wide.yaml", data))
		data = `{"x": [` + strings.Repeat("1,", 200_000) + "1]}"
		assert.Equal(t, "wide.json:1:7: x: more than 1000 entries; the schema allows no more", parseErr(t, "wide.json", data))
	})
	t.Run("many-lists-under-the-size-limit-are-refused-by-value-count", func(t *testing.T) {
		data := "version: 1\ntask: {id: t}\nx: [" + strings.Repeat("["+strings.Repeat("1,", 100)+"1],", 999) + "1]\n"
		assert.Contains(t, parseErr(t, "many.yaml", data), "more than 100000 values")
	})
	t.Run("thousands-of-unknown-keys-report-the-first-hundred", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("version: 1\ntask: {id: t}\nsandbox:\n")
		for i := range 900 {
			fmt.Fprintf(&b, "  k%d: x\n", i)
		}
		lines := strings.Split(parseErr(t, "keys.yaml", b.String()), "\n")
		require.Len(t, lines, 101)
		assert.Equal(t, "keys.yaml: ... and 800 more problems", lines[100])
		assert.Equal(t, "keys.yaml:4:3: sandbox.k0: unknown key (allowed: backend, lifetime, on_expiry, template, workdir)", lines[0])
	})
}
