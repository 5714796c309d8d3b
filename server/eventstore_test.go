package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEventStoreKeepsTheNewestEventsPerSession(t *testing.T) {
	ctx := context.Background()
	s := newEventStore(3)
	var ids []string
	for i := 0; i < 5; i++ {
		stream := "a"
		if i == 3 {
			stream = "b"
		}
		id, err := s.StoreEvent(ctx, "s1", stream, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)))
		require.NoError(t, err)
		ids = append(ids, id)
	}
	other, err := s.StoreEvent(ctx, "s2", "a", json.RawMessage(`{"n":99}`))
	require.NoError(t, err)

	replay := func(session, after string) ([]string, string, error) {
		var got []string
		stream, err := s.ReplayEventsAfter(ctx, session, after, func(id string, msg json.RawMessage) error {
			got = append(got, string(msg))
			return nil
		})
		return got, stream, err
	}
	t.Run("replay-returns-later-events-of-the-same-stream-only", func(t *testing.T) {
		got, stream, err := replay("s1", ids[2])
		require.NoError(t, err)
		assert.Equal(t, "a", stream)
		assert.Equal(t, []string{`{"n":4}`}, got, "event 3 is on stream b")
	})
	t.Run("an-evicted-event-id-is-unknown", func(t *testing.T) {
		_, _, err := replay("s1", ids[1])
		assert.True(t, errors.Is(err, mcpserver.ErrUnknownEventID))
	})
	t.Run("sessions-are-apart", func(t *testing.T) {
		_, _, err := replay("s2", ids[4])
		assert.True(t, errors.Is(err, mcpserver.ErrUnknownEventID), "s1's id in s2")
		got, _, err := replay("s2", other)
		require.NoError(t, err)
		assert.Empty(t, got)
	})
	t.Run("purge-forgets-a-session", func(t *testing.T) {
		require.NoError(t, s.PurgeSession(ctx, "s1"))
		_, _, err := replay("s1", ids[4])
		assert.True(t, errors.Is(err, mcpserver.ErrUnknownEventID))
	})
	t.Run("a-stored-message-is-a-copy", func(t *testing.T) {
		first, err := s.StoreEvent(ctx, "s3", "a", json.RawMessage(`{"n":0}`))
		require.NoError(t, err)
		buf := json.RawMessage(`{"n":1}`)
		_, err = s.StoreEvent(ctx, "s3", "a", buf)
		require.NoError(t, err)
		copy(buf, `{"n":7}`) // the caller reuses its buffer
		got, _, err := replay("s3", first)
		require.NoError(t, err)
		assert.Equal(t, []string{`{"n":1}`}, got)
	})
}
