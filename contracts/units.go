package contracts

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// String formats d the way a contract writes it: "30s", "10m", "1h30m".
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// MarshalJSON writes d as a duration string such as "1h30m".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string such as "30s", "10m" or "1h30m".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"30s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: want a value such as 30s, 10m or 1h30m", s)
	}
	*d = Duration(v)
	return nil
}

// MaxByteSize is the largest size a contract may state: 1TiB.
const MaxByteSize ByteSize = 1 << 40

var byteUnits = []struct {
	name string
	size int64
}{
	// Longest suffixes first so that "MiB" is not read as "B".
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

// ParseByteSize reads a size written as a number of bytes ("1048576") or a
// whole number with a unit: B, KiB, MiB, GiB, TiB (powers of two) or kB (also
// KB), MB, GB, TB (powers of ten). The result is between 1 byte and
// MaxByteSize.
func ParseByteSize(s string) (ByteSize, error) {
	num, mult := s, int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.name) {
			num, mult = strings.TrimSuffix(s, u.name), u.size
			break
		}
	}
	if num == "" || strings.TrimLeft(num, "0123456789") != "" {
		return 0, fmt.Errorf("invalid size %q: want a number of bytes or a value such as 512KiB, 10MiB or 1GiB", s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > int64(MaxByteSize)/mult {
		return 0, fmt.Errorf("size %q is larger than %s", s, MaxByteSize)
	}
	if n == 0 {
		return 0, errors.New("size must be at least 1 byte")
	}
	return ByteSize(n * mult), nil
}

// String formats b with the largest unit that divides it exactly: "10MiB",
// "1GiB", "1MB", "123B".
func (b ByteSize) String() string {
	n := int64(b)
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// MarshalJSON writes b as a number of bytes.
func (b ByteSize) MarshalJSON() ([]byte, error) { return []byte(strconv.FormatInt(int64(b), 10)), nil }

// UnmarshalJSON reads a number of bytes or a size string such as "10MiB".
func (b *ByteSize) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		v, err := ParseByteSize(s)
		if err != nil {
			return err
		}
		*b = v
		return nil
	}
	var f float64
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("size must be a number of bytes or a string such as \"10MiB\", got %s", data)
	}
	if f != math.Trunc(f) || f < 1 || f > float64(MaxByteSize) {
		return fmt.Errorf("size must be a whole number of bytes between 1 and %d, got %s", int64(MaxByteSize), data)
	}
	*b = ByteSize(f)
	return nil
}
