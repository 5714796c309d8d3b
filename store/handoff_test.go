package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/store"
)

func TestHandoffRecordsPersistAndMirror(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s, err := store.Open(dir, store.Options{Now: func() time.Time { return now }})
	require.NoError(t, err)
	ctx := context.Background()

	h := store.Handoff{ID: "h-1", TaskID: "task-a", State: store.HandoffPending, ApprovalDigest: "sha256:ab",
		Inputs: []store.HandoffInput{{Name: "app.zip", Version: 1, SHA256: "00", Size: 3}}}
	got, err := s.PutHandoff(ctx, h)
	require.NoError(t, err)
	assert.Equal(t, now, got.CreatedAt)

	now = now.Add(time.Minute)
	h.State = store.HandoffApproved
	got, err = s.PutHandoff(ctx, h)
	require.NoError(t, err)
	assert.Equal(t, now.Add(-time.Minute), got.CreatedAt, "creation time is kept")
	assert.Equal(t, now, got.UpdatedAt)

	_, err = s.PutHandoff(ctx, store.Handoff{ID: "h-2", TaskID: "task-a", State: store.HandoffDone})
	require.NoError(t, err)
	_, err = s.PutHandoff(ctx, store.Handoff{ID: "h-3", TaskID: "task-b", State: store.HandoffDenied})
	require.NoError(t, err)

	list, err := s.ListHandoffs(ctx, "task-a")
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, []string{"h-1", "h-2"}, []string{list[0].ID, list[1].ID})

	t.Run("the-mirror-is-readable-while-the-database-is-locked", func(t *testing.T) {
		recs, err := store.ReadHandoffRecords(dir)
		require.NoError(t, err)
		require.Len(t, recs, 3)
		assert.Equal(t, store.HandoffApproved, recs[0].State)
		fi, err := os.Stat(filepath.Join(dir, "handoffs", "task-a", "h-1.json"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	})

	require.NoError(t, s.Close())
	s = openStore(t, dir)
	defer s.Close()
	back, err := s.GetHandoff(ctx, "task-a", "h-1")
	require.NoError(t, err)
	assert.Equal(t, store.HandoffApproved, back.State, "records survive a restart")
	assert.Equal(t, h.Inputs, back.Inputs)

	_, err = s.GetHandoff(ctx, "task-a", "nope")
	assert.ErrorIs(t, err, store.ErrNotFound)
}

func TestHandoffRecordsRefuseBadNamesAndStates(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	for name, h := range map[string]store.Handoff{
		"path-in-handoff-id":  {ID: "../../x", TaskID: "t", State: store.HandoffPending},
		"path-in-task-id":     {ID: "h", TaskID: "a/b", State: store.HandoffPending},
		"unknown-state":       {ID: "h", TaskID: "t", State: "running-away"},
		"empty-handoff-id":    {ID: "", TaskID: "t", State: store.HandoffPending},
		"dot-dot-handoff-id-": {ID: "..", TaskID: "t", State: store.HandoffPending},
	} {
		t.Run(name+"-is-refused", func(t *testing.T) {
			_, err := s.PutHandoff(ctx, h)
			assert.Error(t, err)
		})
	}
	t.Run("a-plain-record-is-accepted", func(t *testing.T) {
		_, err := s.PutHandoff(ctx, store.Handoff{ID: "h", TaskID: "t", State: store.HandoffPending})
		assert.NoError(t, err)
	})
}

func TestDecisionsAreTakenOnce(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	defer s.Close()
	d := store.Decision{HandoffID: "h-1", TaskID: "task-a", Digest: "sha256:ab", Approve: true, By: "alice", At: time.Now().UTC()}

	none, err := s.TakeDecision("h-1")
	require.NoError(t, err)
	assert.Nil(t, none)

	// Written without the database, as the CLI does while the server runs.
	require.NoError(t, store.WriteDecision(dir, d))
	assert.ErrorContains(t, store.WriteDecision(dir, d), "already waiting", "a second decision does not overwrite the first")
	got, err := s.TakeDecision("h-1")
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, d.Digest, got.Digest)
	assert.True(t, got.Approve)
	again, err := s.TakeDecision("h-1")
	require.NoError(t, err)
	assert.Nil(t, again, "a decision is applied once")

	t.Run("a-decision-file-naming-another-handoff-is-refused", func(t *testing.T) {
		require.NoError(t, store.WriteDecision(dir, store.Decision{HandoffID: "h-2", TaskID: "task-a"}))
		require.NoError(t, os.Rename(filepath.Join(dir, "approvals", "h-2.json"), filepath.Join(dir, "approvals", "h-3.json")))
		_, err := s.TakeDecision("h-3")
		assert.ErrorContains(t, err, "names handoff")
	})
	t.Run("a-symlinked-decision-is-refused", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "x.json")
		require.NoError(t, os.WriteFile(target, []byte(`{"handoff_id":"h-4","approve":true}`), 0o600))
		require.NoError(t, os.Symlink(target, filepath.Join(dir, "approvals", "h-4.json")))
		_, err := s.TakeDecision("h-4")
		assert.ErrorContains(t, err, "not a regular file")
	})
	t.Run("bad-ids-are-refused", func(t *testing.T) {
		assert.Error(t, store.WriteDecision(dir, store.Decision{HandoffID: "../x", TaskID: "t"}))
		_, err := s.TakeDecision("../x")
		assert.Error(t, err)
	})
}
