package audit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Report describes a log whose chain verified.
type Report struct {
	// Lines is the number of lines (and the last seq).
	Lines int64
	// Head is the sha256 (hex) of the last line, or 64 zeros for an empty log.
	Head string
}

// VerifyError says where and how a chain is broken.
type VerifyError struct {
	// Line is the first line (1-based) found to be bad.
	Line int64
	// Reason says what is wrong, in words an operator can act on.
	Reason string
}

func (e *VerifyError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// Verify reads a log and checks its chain: every line complete and valid
// JSON, seq counting 1, 2, 3, ..., and each prev equal to the sha256 of the
// line before. A broken chain gives a *VerifyError naming the first bad
// line; a read failure gives another error.
func Verify(r io.Reader) (Report, error) { return verify(r, "") }

// VerifyAnchor is Verify, and also requires some line's sha256 to equal
// anchor (a hash from an earlier [Log.Head]). It shows that the anchored line
// and everything before it are unchanged and that the log was not cut short
// before it.
func VerifyAnchor(r io.Reader, anchor string) (Report, error) {
	if len(anchor) != 64 {
		return Report{}, fmt.Errorf("audit: anchor must be 64 hex digits, got %d characters", len(anchor))
	}
	return verify(r, anchor)
}

func verify(r io.Reader, anchor string) (Report, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	rep := Report{Head: zeroHash}
	anchorLine := int64(0)
	var buf []byte
	for {
		line, complete, err := readLine(br, buf[:0])
		buf = line
		if err != nil && !errors.Is(err, io.EOF) {
			if errors.Is(err, errLineTooLong) {
				return rep, &VerifyError{rep.Lines + 1, fmt.Sprintf("line is longer than %d bytes: not written by this log", MaxLineBytes)}
			}
			return rep, fmt.Errorf("audit: read: %w", err)
		}
		if len(line) == 0 && !complete {
			break // end of input
		}
		n := rep.Lines + 1
		if !complete {
			return rep, &VerifyError{n, "line is truncated: no newline at the end of the file (cut short or a write was interrupted)"}
		}
		seq, prev, ok := parseHead(line)
		if !ok {
			return rep, &VerifyError{n, `line does not start with {"seq":N,"prev":"<64 hex>": edited, truncated or not an audit line`}
		}
		if !json.Valid(line) {
			return rep, &VerifyError{n, "line is not valid JSON: edited or truncated"}
		}
		switch {
		case seq > n:
			return rep, &VerifyError{n, fmt.Sprintf("seq is %d, expected %d: %d line(s) removed before this one, or lines reordered", seq, n, seq-n)}
		case seq < n:
			return rep, &VerifyError{n, fmt.Sprintf("seq is %d, expected %d: a line was inserted before this one, or lines reordered", seq, n)}
		}
		if prev != rep.Head {
			if n == 1 {
				return rep, &VerifyError{1, "first line's prev is not 64 zeros: the start of the log was removed or this line was edited"}
			}
			return rep, &VerifyError{n - 1, fmt.Sprintf("line %d's sha256 does not match the prev recorded by line %d: line %d was edited, or line %d was inserted or its prev edited", n-1, n, n-1, n)}
		}
		sum := sha256.Sum256(line)
		rep.Lines, rep.Head = n, hex.EncodeToString(sum[:])
		if anchor != "" && anchorLine == 0 && rep.Head == anchor {
			anchorLine = n
		}
	}
	if anchor != "" && anchorLine == 0 {
		return rep, &VerifyError{rep.Lines, "no line has the anchor's sha256: the anchored line was edited or removed, or the log was cut short before it"}
	}
	return rep, nil
}

var errLineTooLong = errors.New("line too long")

// readLine appends the next line, without its newline, to buf. complete is
// false for a final line with no newline (and for no line at all).
func readLine(br *bufio.Reader, buf []byte) (line []byte, complete bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > MaxLineBytes+1 {
			return buf, false, errLineTooLong
		}
		switch {
		case err == nil:
			return buf[:len(buf)-1], true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return buf, false, err
		}
	}
}

// parseHead reads the fixed prefix {"seq":N,"prev":"<64 hex>" of a line.
func parseHead(line []byte) (seq int64, prev string, ok bool) {
	rest, found := bytes.CutPrefix(line, []byte(`{"seq":`))
	if !found {
		return 0, "", false
	}
	i := 0
	for i < len(rest) && i < 19 && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 || (rest[0] == '0') {
		return 0, "", false
	}
	seq, err := strconv.ParseInt(string(rest[:i]), 10, 64)
	if err != nil {
		return 0, "", false
	}
	rest, found = bytes.CutPrefix(rest[i:], []byte(`,"prev":"`))
	if !found || len(rest) < 65 || rest[64] != '"' {
		return 0, "", false
	}
	h := rest[:64]
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return 0, "", false
		}
	}
	return seq, string(h), true
}
