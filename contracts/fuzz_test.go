package contracts_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

// FuzzParseContract feeds arbitrary bytes to Parse as YAML or JSON. Parse
// must never panic, must fail with Errors whose every entry names the file,
// and a contract it accepts must serialise and parse again to the same
// contract and hash. Seeds: testdata/fuzz/FuzzParseContract (the examples
// and broken inputs).
func FuzzParseContract(f *testing.F) {
	f.Add([]byte("version: 1\ntask: {id: t}\n"), false)
	f.Add([]byte(`{"version": 1, "task": {"id": "t"}}`), true)
	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		name := "f.yaml"
		if asJSON {
			name = "f.json"
		}
		c, w, err := contracts.Parse(name, data)
		_, _, err2 := contracts.Parse(name, data)
		if (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
			t.Fatalf("two parses of one input disagree:\n%v\n---\n%v", err, err2)
		}
		if err != nil {
			var errs contracts.Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("error is not a non-empty Errors: %#v", err)
			}
			for _, e := range errs {
				if e.File != name || e.Msg == "" || strings.Contains(e.Msg, "please report") {
					t.Fatalf("bad error entry: %#v", e)
				}
			}
			if c != nil || w != nil {
				t.Fatal("an invalid contract came with a result")
			}
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("marshal accepted contract: %v", err)
		}
		again, _, err := contracts.Parse("again.json", out)
		if err != nil {
			t.Fatalf("accepted contract does not parse again: %v\n%s", err, out)
		}
		if c.Hash() != again.Hash() {
			t.Fatalf("hash changed across a round trip:\n%s", out)
		}
	})
}

func BenchmarkLoadContract(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := contracts.Load("examples/quickstart.yaml"); err != nil {
			b.Fatal(err)
		}
	}
}
