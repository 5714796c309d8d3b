package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Bounds on a contract document. A real contract is a few kilobytes, a few
// levels deep and a few hundred values; these leave a wide margin and keep
// hostile input cheap to refuse.
const (
	// MaxSize is the largest contract file accepted, in bytes.
	MaxSize   = 1 << 20
	maxDepth  = 32
	maxValues = 100_000
	maxItems  = 1000 // entries in one list or mapping; the schema allows no more
	maxErrors = 100  // problems reported; the rest are counted
)

// pos is a 1-based line and column.
type pos struct{ line, col int }

// loc is where a value sits in the file and its field path.
type loc struct {
	pos
	path string // commands.allow[2].run
}

// doc is a contract document being decoded: its plain JSON-compatible value
// (nil, bool, json.Number, string, []any, map[string]any), the location of
// every value by JSON pointer, and the problems found so far.
type doc struct {
	file   string
	root   any
	locs   map[string]loc
	errs   Errors
	values int
	abort  bool // stop walking: the input cannot be read further

	// cursor makes offset-to-position conversion linear over a document
	// read front to back.
	curOff int
	curPos pos
}

// offPos is offsetPos for offsets that mostly increase.
func (d *doc) offPos(data []byte, off int) pos {
	if off > len(data) {
		off = len(data)
	}
	if off < d.curOff || d.curPos.line == 0 {
		d.curOff, d.curPos = 0, pos{1, 1}
	}
	for _, r := range string(data[d.curOff:off]) {
		if r == '\n' {
			d.curPos.line++
			d.curPos.col = 1
		} else {
			d.curPos.col++
		}
	}
	d.curOff = off
	return d.curPos
}

func (d *doc) errAt(p pos, path, format string, args ...any) {
	d.errs = append(d.errs, &FieldError{File: d.file, Line: p.line, Col: p.col, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// at returns the location of the value at ptr, or of its nearest ancestor
// present in the file (a defaulted value has no position of its own).
func (d *doc) at(ptr string) loc {
	for {
		if l, ok := d.locs[ptr]; ok {
			return l
		}
		if ptr == "" {
			return loc{}
		}
		ptr = ptr[:strings.LastIndexByte(ptr, '/')]
	}
}

// isJSON says whether name/data is a JSON document: by extension, and for
// other names by content.
func isJSON(name string, data []byte) bool {
	lower := strings.ToLower(name)
	switch {
	case strings.HasSuffix(lower, ".json"):
		return true
	case strings.HasSuffix(lower, ".yaml"), strings.HasSuffix(lower, ".yml"):
		return false
	}
	trimmed := bytes.TrimLeft(data, " \t\r\n\ufeff")
	return len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(data)
}

// decode reads data into d.root and d.locs. It refuses, with a positioned
// error, everything a contract has no use for and an attacker might: huge or
// deep documents, invalid UTF-8, NUL bytes, several documents, anchors and
// aliases, duplicate or non-string keys, tags beyond the core schema.
func (d *doc) decode(data []byte) {
	d.locs = map[string]loc{}
	if len(data) > MaxSize {
		d.errAt(pos{}, "", "contract is %d bytes; the limit is %d (1 MiB)", len(data), MaxSize)
		return
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		d.errAt(offsetPos(data, i), "", "contains a NUL byte; a contract is UTF-8 text")
		return
	}
	if !utf8.Valid(data) {
		i := 0
		for i < len(data) {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		d.errAt(offsetPos(data, i), "", "invalid UTF-8 (byte 0x%02x); a contract is UTF-8 text", data[i])
		return
	}
	if len(bytes.TrimSpace(bytes.TrimPrefix(data, []byte("\ufeff")))) == 0 {
		d.errAt(pos{}, "", "empty contract")
		return
	}
	if isJSON(d.file, data) {
		d.decodeJSON(bytes.TrimPrefix(data, []byte("\ufeff")))
	} else {
		d.decodeYAML(data)
	}
	if !d.abort && len(d.errs) == 0 && d.root == nil {
		d.errAt(pos{}, "", "empty contract")
	}
}

// offsetPos converts a byte offset into a line and a column counted in
// characters.
func offsetPos(data []byte, off int) pos {
	if off > len(data) {
		off = len(data)
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	start := bytes.LastIndexByte(data[:off], '\n') + 1
	return pos{line, 1 + utf8.RuneCount(data[start:off])}
}

// childPath returns the field path of a mapping member or list item.
func childPath(parent, key string, index int) string {
	if index >= 0 {
		return parent + "[" + strconv.Itoa(index) + "]"
	}
	if plainKey.MatchString(key) {
		if parent == "" {
			return key
		}
		return parent + "." + key
	}
	return parent + "[" + strconv.Quote(key) + "]"
}

var plainKey = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_-]*$`)

// childPtr returns the JSON pointer of a mapping member or list item.
func childPtr(parent, key string, index int) string {
	if index >= 0 {
		return parent + "/" + strconv.Itoa(index)
	}
	return parent + "/" + strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

// enter counts a value and checks the depth; false means stop.
func (d *doc) enter(p pos, path string, depth int) bool {
	if depth > maxDepth {
		d.errAt(p, path, "nested more than %d levels deep; a contract is a few levels deep", maxDepth)
		d.abort = true
		return false
	}
	d.values++
	if d.values > maxValues {
		d.errAt(p, path, "more than %d values; a contract is a few hundred", maxValues)
		d.abort = true
		return false
	}
	return true
}

// fits checks the size of one list or mapping; false means stop.
func (d *doc) fits(p pos, path string, n int) bool {
	if n > maxItems {
		d.errAt(p, path, "more than %d entries; the schema allows no more", maxItems)
		d.abort = true
		return false
	}
	return true
}

// number normalises a number's text so that 1, 1.0 and 1e0 are the same
// json.Number, and refuses what JSON cannot hold.
func number(text string) (json.Number, error) {
	if i, err := strconv.ParseInt(text, 10, 64); err == nil {
		return json.Number(strconv.FormatInt(i, 10)), nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", fmt.Errorf("number %s is out of range", text)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return json.Number(strconv.FormatInt(int64(f), 10)), nil
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
}

// ---- YAML ----

var jsonBadChar = regexp.MustCompile(`^invalid character '((?:[^'\\]|\\.)+)'`)

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlParserProblems are the YAML parser's (not scanner's) messages. For
// them the parser reports a 0-based line: that of the enclosing collection's
// start, or of the problem.
var yamlParserProblems = []string{
	"did not find expected key", "did not find expected ',' or ']'", "did not find expected ',' or '}'",
	"did not find expected node content", "did not find expected '-' indicator",
	"did not find expected <document start>", "found undefined tag handle",
}

// yamlErr positions an error from the YAML parser ("yaml: line 3: ...").
func (d *doc) yamlErr(err error) {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		for _, p := range yamlParserProblems {
			if m[2] == p {
				line++
			}
		}
		d.errAt(pos{line: line}, "", "invalid YAML: %s", m[2])
		return
	}
	d.errAt(pos{}, "", "invalid YAML: %s", strings.TrimPrefix(msg, "yaml: "))
}

func (d *doc) decodeYAML(data []byte) {
	defer func() {
		// The YAML parser is not ours; a panic in it must still be an error.
		if r := recover(); r != nil {
			d.errs = append(d.errs[:0], &FieldError{File: d.file, Msg: fmt.Sprintf("invalid YAML: parser failed: %v", r)})
			d.root, d.abort = nil, true
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var n yaml.Node
	if err := dec.Decode(&n); err != nil {
		if errors.Is(err, io.EOF) {
			return // only comments: empty
		}
		d.yamlErr(err)
		return
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			d.yamlErr(err)
			return
		}
		d.errAt(pos{extra.Line, extra.Column}, "", "a second YAML document; a contract file holds exactly one")
		return
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		if root := n.Content[0]; root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" && root.Anchor == "" {
			return // "~" or "null": empty
		}
		d.root = d.yamlValue(n.Content[0], "", "", 0)
	}
}

func (d *doc) yamlValue(n *yaml.Node, ptr, path string, depth int) any {
	p := pos{n.Line, n.Column}
	if _, ok := d.locs[ptr]; !ok {
		d.locs[ptr] = loc{p, path}
	}
	if !d.enter(p, path, depth) {
		return nil
	}
	if n.Kind == yaml.AliasNode {
		d.errAt(p, path, "YAML aliases (*%s) are not allowed; write the value out", n.Value)
		return nil
	}
	if n.Anchor != "" {
		d.errAt(p, path, "YAML anchors (&%s) are not allowed; write the value out", n.Anchor)
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		if n.ShortTag() != "!!map" {
			d.errAt(p, path, "unsupported YAML tag %s", n.Tag)
			return nil
		}
		if !d.fits(p, path, len(n.Content)/2) {
			return nil
		}
		m := make(map[string]any, len(n.Content)/2)
		first := map[string]int{}
		for i := 0; i+1 < len(n.Content) && !d.abort; i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			kp := pos{k.Line, k.Column}
			switch {
			case k.Kind == yaml.AliasNode || k.Anchor != "":
				d.errAt(kp, path, "YAML anchors and aliases are not allowed")
				continue
			case k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge":
				d.errAt(kp, path, "YAML merge keys (<<) are not allowed; write the keys out")
				continue
			case k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str":
				d.errAt(kp, path, "keys must be strings, got %s", describeNode(k))
				continue
			case strings.IndexByte(k.Value, 0) >= 0:
				d.errAt(kp, path, "key contains a NUL character")
				continue
			}
			cpath, cptr := childPath(path, k.Value, -1), childPtr(ptr, k.Value, -1)
			if line, dup := first[k.Value]; dup {
				d.errAt(kp, cpath, "duplicate key (first at line %d)", line)
				continue
			}
			first[k.Value] = k.Line
			d.locs[cptr] = loc{kp, cpath}
			m[k.Value] = d.yamlValue(v, cptr, cpath, depth+1)
		}
		return m
	case yaml.SequenceNode:
		if n.ShortTag() != "!!seq" {
			d.errAt(p, path, "unsupported YAML tag %s", n.Tag)
			return nil
		}
		if !d.fits(p, path, len(n.Content)) {
			return nil
		}
		l := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			if d.abort {
				break
			}
			l = append(l, d.yamlValue(c, childPtr(ptr, "", i), childPath(path, "", i), depth+1))
		}
		return l
	case yaml.ScalarNode:
		return d.yamlScalar(n, p, path)
	}
	d.errAt(p, path, "unsupported YAML node")
	return nil
}

func (d *doc) yamlScalar(n *yaml.Node, p pos, path string) any {
	switch n.ShortTag() {
	case "!!str", "!!timestamp":
		if strings.IndexByte(n.Value, 0) >= 0 {
			d.errAt(p, path, "contains a NUL character")
			return nil
		}
		return n.Value
	case "!!null":
		return nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			d.errAt(p, path, "invalid boolean %q", n.Value)
			return nil
		}
		return b
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			d.errAt(p, path, "integer %s is out of range", n.Value)
			return nil
		}
		return json.Number(strconv.FormatInt(i, 10))
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			d.errAt(p, path, "number %s is out of range", n.Value)
			return nil
		}
		num, err := number(strconv.FormatFloat(f, 'g', -1, 64))
		if err != nil {
			d.errAt(p, path, "%v", err)
			return nil
		}
		return num
	}
	d.errAt(p, path, "unsupported YAML tag %s", n.Tag)
	return nil
}

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	if n.Value == "" {
		return "null"
	}
	return n.Value
}

// ---- JSON ----

// decodeJSON reads strict JSON token by token so that every value keeps its
// position and duplicate keys are caught.
func (d *doc) decodeJSON(data []byte) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	d.root = d.jsonValue(dec, data, "", "", 0)
	if d.abort {
		d.root = nil
		return
	}
	off := skipJSONSpace(data, int(dec.InputOffset()))
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		d.errAt(offsetPos(data, off), "", "unexpected data after the contract; a contract file holds exactly one JSON document")
		d.abort, d.root = true, nil
	}
}

func skipJSONSpace(data []byte, off int) int {
	for off < len(data) && strings.IndexByte(" \t\r\n,:", data[off]) >= 0 {
		off++
	}
	return off
}

func (d *doc) jsonErr(data []byte, off int, err error) {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		// The token reader's messages lack context ("invalid character
		// 'v'"); a whole-document decode names what it was looking for.
		var whole *json.SyntaxError
		if errors.As(json.Unmarshal(data, new(any)), &whole) {
			se = whole
		}
		err = se
		// Offset is at or just past the offending character, depending
		// on the decoder's path; the message names the character.
		off = int(se.Offset)
		if m := jsonBadChar.FindStringSubmatch(se.Error()); m != nil && off > 0 && off <= len(data) {
			if c, err := strconv.Unquote("'" + m[1] + "'"); err == nil && strings.HasPrefix(string(data[off-1:]), c) {
				off--
			}
		}
	} else if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		off = len(data)
		err = errors.New("unexpected end of input")
	}
	d.errAt(offsetPos(data, off), "", "invalid JSON: %v", err)
	d.abort = true
}

func (d *doc) jsonValue(dec *json.Decoder, data []byte, ptr, path string, depth int) any {
	start := skipJSONSpace(data, int(dec.InputOffset()))
	p := d.offPos(data, start)
	if _, ok := d.locs[ptr]; !ok {
		d.locs[ptr] = loc{p, path}
	}
	tok, err := dec.Token()
	if err != nil {
		d.jsonErr(data, start, err)
		return nil
	}
	if !d.enter(p, path, depth) {
		return nil
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			m := map[string]any{}
			first := map[string]int{}
			for dec.More() && !d.abort {
				if !d.fits(p, path, len(m)+1) {
					return nil
				}
				kstart := skipJSONSpace(data, int(dec.InputOffset()))
				kp := d.offPos(data, kstart)
				ktok, err := dec.Token()
				if err != nil {
					d.jsonErr(data, kstart, err)
					return nil
				}
				k, _ := ktok.(string)
				cpath, cptr := childPath(path, k, -1), childPtr(ptr, k, -1)
				if strings.IndexByte(k, 0) >= 0 {
					d.errAt(kp, path, "key contains a NUL character")
				}
				if line, dup := first[k]; dup {
					d.errAt(kp, cpath, "duplicate key (first at line %d)", line)
					d.jsonValue(dec, data, cptr+"/~dup", cpath, depth+1)
					continue
				}
				first[k] = kp.line
				d.locs[cptr] = loc{kp, cpath}
				m[k] = d.jsonValue(dec, data, cptr, cpath, depth+1)
			}
			if d.abort {
				return nil
			}
			if _, err := dec.Token(); err != nil {
				d.jsonErr(data, int(dec.InputOffset()), err)
			}
			return m
		}
		l := []any{}
		for i := 0; dec.More() && !d.abort && d.fits(p, path, i+1); i++ {
			l = append(l, d.jsonValue(dec, data, childPtr(ptr, "", i), childPath(path, "", i), depth+1))
		}
		if d.abort {
			return nil
		}
		if _, err := dec.Token(); err != nil {
			d.jsonErr(data, int(dec.InputOffset()), err)
		}
		return l
	case string:
		if strings.IndexByte(t, 0) >= 0 {
			d.errAt(p, path, "contains a NUL character")
			return nil
		}
		return t
	case json.Number:
		n, err := number(string(t))
		if err != nil {
			d.errAt(p, path, "%v", err)
			return nil
		}
		return n
	}
	return tok // bool or nil
}
