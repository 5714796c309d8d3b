package contracts_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

// TestParseIsSafeForConcurrentUse loads valid and invalid contracts from
// several goroutines at once, as a server with many tasks does; run with
// -race to check.
func TestParseIsSafeForConcurrentUse(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				c, _, err := contracts.Load("examples/ios-app.yaml")
				if assert.NoError(t, err) {
					assert.Equal(t, "ios-release-12", c.Task.ID)
				}
				_, _, err = contracts.Parse("bad.yaml", []byte("version: 2\ntask: {id: t}\n"))
				assert.EqualError(t, err, "bad.yaml:1:1: version: must be 1 (the only contract version), got 2", "goroutine %d", i)
			}
		}()
	}
	wg.Wait()
}
