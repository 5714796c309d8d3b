package contracts_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want contracts.ByteSize
		err  string
	}{
		{in: "1", want: 1},
		{in: "512KiB", want: 512 << 10},
		{in: "10MiB", want: 10 << 20},
		{in: "1GiB", want: 1 << 30},
		{in: "1TiB", want: 1 << 40},
		{in: "1MB", want: 1_000_000},
		{in: "3kB", want: 3000},
		{in: "3KB", want: 3000},
		{in: "7B", want: 7},
		{in: "0", err: "size must be at least 1 byte"},
		{in: "0MiB", err: "size must be at least 1 byte"},
		{in: "2TiB", err: `size "2TiB" is larger than 1TiB`},
		{in: "99999999999999999999", err: `size "99999999999999999999" is larger than 1TiB`},
		{in: "1.5GiB", err: `invalid size "1.5GiB": want a number of bytes or a value such as 512KiB, 10MiB or 1GiB`},
		{in: "-1", err: `invalid size "-1": want a number of bytes or a value such as 512KiB, 10MiB or 1GiB`},
		{in: "MiB", err: `invalid size "MiB": want a number of bytes or a value such as 512KiB, 10MiB or 1GiB`},
		{in: "10 MiB", err: `invalid size "10 MiB": want a number of bytes or a value such as 512KiB, 10MiB or 1GiB`},
		{in: "10mib", err: `invalid size "10mib": want a number of bytes or a value such as 512KiB, 10MiB or 1GiB`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := contracts.ParseByteSize(tt.in)
			if tt.err != "" {
				assert.EqualError(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestByteSizeAndDurationSpellings(t *testing.T) {
	for in, want := range map[contracts.ByteSize]string{
		1 << 20: "1MiB", 200 << 20: "200MiB", 1 << 30: "1GiB", 1536: "1536B", 1_000_000: "1MB", 1023: "1023B", 3 << 10: "3KiB",
	} {
		assert.Equal(t, want, in.String())
	}
	for in, want := range map[time.Duration]string{
		30 * time.Second: "30s", 10 * time.Minute: "10m", 90 * time.Minute: "1h30m", time.Hour: "1h",
		2*time.Hour + 5*time.Second: "2h0m5s", 1500 * time.Millisecond: "1.5s", 0: "0s",
	} {
		assert.Equal(t, want, contracts.Duration(in).String())
	}
}

func TestByteSizeAndDurationJSON(t *testing.T) {
	var v struct {
		D contracts.Duration `json:"d"`
		B contracts.ByteSize `json:"b"`
		C contracts.ByteSize `json:"c"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"d": "1h30m", "b": "10MiB", "c": 4096}`), &v))
	assert.Equal(t, contracts.Duration(90*time.Minute), v.D)
	assert.Equal(t, contracts.ByteSize(10<<20), v.B)
	assert.Equal(t, contracts.ByteSize(4096), v.C)
	out, err := json.Marshal(v)
	require.NoError(t, err)
	assert.JSONEq(t, `{"d": "1h30m", "b": 10485760, "c": 4096}`, string(out))

	assert.Error(t, json.Unmarshal([]byte(`{"d": 30}`), &v), "a bare number is not a duration")
	assert.Error(t, json.Unmarshal([]byte(`{"d": "soon"}`), &v))
	assert.Error(t, json.Unmarshal([]byte(`{"b": 1.5}`), &v))
	assert.Error(t, json.Unmarshal([]byte(`{"b": 0}`), &v))
	assert.Error(t, json.Unmarshal([]byte(`{"b": true}`), &v))
}
