package tools

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
	"github.com/sandbox-mcp/sandbox-mcp/policy"
	"github.com/sandbox-mcp/sandbox-mcp/runner/e2b"
	"github.com/sandbox-mcp/sandbox-mcp/store"
)

func testTask(t *testing.T) *Task {
	t.Helper()
	c, _, err := contracts.Parse("t.yaml", []byte("version: 1\ntask: {id: eff}\n"))
	require.NoError(t, err)
	client, err := e2b.New(e2b.Options{APIURL: "http://127.0.0.1:1", APIKey: "e2b_fake_key_for_tests"})
	require.NoError(t, err)
	st, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	task, err := NewTask(Options{Contract: c, E2B: client, Store: st})
	require.NoError(t, err)
	return task
}

func TestAnAllowedDecisionWithoutEffectiveValuesFailsClosed(t *testing.T) {
	task := testTask(t)
	ctx := context.Background()

	eff, fail := effective[policy.FileEffective](ctx, task, "write_file", policy.Decision{Allow: true, Rule: "paths.write"})
	assert.Nil(t, eff)
	require.NotNil(t, fail)
	assert.True(t, fail.IsError)

	_, fail = effective[policy.FileEffective](ctx, task, "write_file", policy.Decision{Allow: true, Effective: &policy.RunEffective{}})
	require.NotNil(t, fail, "effective values of another tool are refused too")

	want := &policy.FileEffective{Path: "/home/user/work/a"}
	eff, fail = effective[policy.FileEffective](ctx, task, "write_file", policy.Decision{Allow: true, Effective: want})
	assert.Nil(t, fail)
	assert.Same(t, want, eff)
}
