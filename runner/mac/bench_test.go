package mac_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/sandbox-mcp/sandbox-mcp/runner/mac"
	"github.com/sandbox-mcp/sandbox-mcp/runner/mac/mactest"
	"github.com/sandbox-mcp/sandbox-mcp/tools"
)

// BenchmarkHandoffRoundTrip measures one whole handoff on the loopback
// sshd: workspace, one 1 MiB input uploaded and verified, a trivial step
// with one output hashed and downloaded, cleanup. The step is polled every
// 100ms, so that bounds how fast a step is seen to end.
func BenchmarkHandoffRoundTrip(b *testing.B) {
	d := mactest.Start(b)
	r, err := mac.New(mac.Options{Target: d.Target(), HostKey: d.HostKey, Signer: d.Signer, PollInterval: 100 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	in := input("in.bin", make([]byte, 1<<20))
	st := tools.MacStep{Name: "bench", Argv: []string{"cp", "inputs/in.bin", "out.bin"}, Timeout: time.Minute, Outputs: []string{"out.bin"}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ws, err := r.Prepare(ctx, tools.MacJob{TaskID: "bench", HandoffID: "h" + time.Now().Format("150405.000000000"), Inputs: []tools.MacInput{in}})
		if err != nil {
			b.Fatal(err)
		}
		res, err := r.Run(ctx, ws, st, io.Discard)
		if err != nil || res.ExitCode != 0 {
			b.Fatal(err, res.ExitCode)
		}
		if err := r.Download(ctx, ws, res.Outputs[0], io.Discard); err != nil {
			b.Fatal(err)
		}
		if c := r.Release(ctx, ws); !c.WorkspaceRemoved {
			b.Fatal(c.Error)
		}
	}
}
