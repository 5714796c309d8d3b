package policy

import (
	"testing"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

// quickstartContract mirrors contracts/examples/quickstart.yaml.
func quickstartContract() *contracts.Contract {
	c := devContract()
	c.Commands.Allow = []contracts.CommandRule{
		{Run: "python3"}, {Run: "pytest"}, {Run: "ls"}, {Run: "cat"}, {Run: "grep"}, {Run: "head"},
		{Run: "tail"}, {Run: "wc"}, {Run: "find"}, {Run: "echo"}, {Run: "sort"},
	}
	c.Network = contracts.Network{Egress: contracts.EgressNone}
	c.Credentials = nil
	return c
}

func BenchmarkDecideRunPipeline(b *testing.B) {
	c := quickstartContract()
	call := RunCall{Command: "grep -rn TODO src | sort | head -20"}
	if d := DecideRun(c, call); !d.Allow {
		b.Fatal(d.Reason)
	}
	b.ReportAllocs()
	for b.Loop() {
		DecideRun(c, call)
	}
}

func BenchmarkDecideWrite(b *testing.B) {
	c := quickstartContract()
	call := WriteCall{Path: "src/app/main.py", Size: 4096}
	if d := DecideWrite(c, call); !d.Allow {
		b.Fatal(d.Reason)
	}
	b.ReportAllocs()
	for b.Loop() {
		DecideWrite(c, call)
	}
}
