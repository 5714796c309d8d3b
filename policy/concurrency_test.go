package policy

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestDecideIsSafeForConcurrentUse runs the same decisions from many
// goroutines (as the server does for concurrent sessions); with -race this
// also proves the parser pool and the built-in tables are not shared unsafely.
func TestDecideIsSafeForConcurrentUse(t *testing.T) {
	c := devContract()
	cmds := []string{"ls -la | grep foo", "ls; rm -rf /", "bash -c 'pytest && ls'", "sh -c 'ls'", "git -c x=y diff", "curl https://pypi.org/"}
	want := make([]Decision, len(cmds))
	for i, cmd := range cmds {
		want[i] = DecideRun(c, RunCall{Command: cmd})
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 50; n++ {
				for i, cmd := range cmds {
					got := DecideRun(c, RunCall{Command: cmd})
					assert.Equal(t, want[i].Allow, got.Allow, cmd)
					assert.Equal(t, want[i].Reason, got.Reason, cmd)
				}
			}
		}()
	}
	wg.Wait()
}
