package redact_test

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/sandbox-mcp/sandbox-mcp/redact"
)

func ExampleRedactor_Writer() {
	r := redact.New([]redact.Secret{{Name: "GITHUB_TOKEN", Value: "ghp_FAKEFAKEFAKEFAKE"}})
	w := r.Writer(os.Stdout)
	// A secret split across two chunks of command output is still caught.
	fmt.Fprint(w, "pushing with ghp_FAKE")
	fmt.Fprint(w, "FAKEFAKEFAKE done\n")
	w.Close()
	// Output: pushing with [REDACTED:GITHUB_TOKEN] done
}

func ExampleSecret() {
	s := redact.Secret{Name: "GITHUB_TOKEN", Value: "ghp_FAKEFAKEFAKEFAKE"}
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	log.Info("credential loaded", "token", s)
	fmt.Printf("%v %s %#v\n", s, s, s)
	// Output:
	// level=INFO msg="credential loaded" token=REDACTED
	// REDACTED REDACTED redact.Secret{Name:"GITHUB_TOKEN", Value:REDACTED}
}
