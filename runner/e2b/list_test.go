package e2b

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/runner/e2blocal"
)

func TestListFollowsPages(t *testing.T) {
	srv, err := e2blocal.New(e2blocal.Options{Dir: t.TempDir(), APIKey: fakeKey})
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		require.NoError(t, srv.Close(context.Background()))
	})
	c, err := New(Options{APIURL: ts.URL, SandboxURL: ts.URL, APIKey: fakeKey})
	require.NoError(t, err)
	c.listPage = 2
	ctx := context.Background()

	want := map[string]bool{}
	for range 5 {
		sb, err := c.Create(ctx, CreateParams{Timeout: time.Minute, Metadata: map[string]string{"task_id": "paged"}})
		require.NoError(t, err)
		want[sb.ID] = true
	}
	other, err := c.Create(ctx, CreateParams{Timeout: time.Minute, Metadata: map[string]string{"task_id": "elsewhere"}})
	require.NoError(t, err)

	t.Run("five-sandboxes-over-three-pages-are-all-listed-once", func(t *testing.T) {
		got, err := c.List(ctx, map[string]string{"task_id": "paged"})
		require.NoError(t, err)
		ids := map[string]bool{}
		for _, info := range got {
			assert.False(t, ids[info.ID], "listed twice: %s", info.ID)
			ids[info.ID] = true
			assert.Equal(t, "paged", info.Metadata["task_id"])
		}
		assert.Equal(t, want, ids)
	})
	t.Run("no-filter-lists-every-sandbox", func(t *testing.T) {
		got, err := c.List(ctx, nil)
		require.NoError(t, err)
		assert.Len(t, got, 6)
		var found bool
		for _, info := range got {
			found = found || info.ID == other.ID
		}
		assert.True(t, found)
	})
}
