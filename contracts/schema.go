package contracts

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

//go:embed schema.json
var schemaJSON []byte

// schemaURL is the $id of the contract schema.
const schemaURL = "https://github.com/sandbox-mcp/sandbox-mcp/contracts/schema.json"

// Schema returns the contract's JSON Schema (draft 2020-12), the definition
// of every key a contract file may hold.
func Schema() []byte { return bytes.Clone(schemaJSON) }

var compiled = sync.OnceValues(func() (*compiledSchema, error) {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = true
	c.Formats["sandbox-duration"] = func(v any) bool {
		s, ok := v.(string)
		if !ok {
			return true // the type keyword reports it
		}
		d, err := time.ParseDuration(s)
		return err == nil && d > 0
	}
	c.Formats["sandbox-byte-size"] = func(v any) bool {
		s, ok := v.(string)
		if !ok {
			return true
		}
		_, err := ParseByteSize(s)
		return err == nil
	}
	if err := c.AddResource(schemaURL, bytes.NewReader(schemaJSON)); err != nil {
		return nil, fmt.Errorf("contracts: load schema: %w", err)
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("contracts: compile schema: %w", err)
	}
	var raw any
	dec := json.NewDecoder(bytes.NewReader(schemaJSON))
	dec.UseNumber() // so that messages print 1048576, not 1.048576e+06
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("contracts: read schema: %w", err)
	}
	return &compiledSchema{schema: s, raw: raw}, nil
})

type compiledSchema struct {
	schema *jsonschema.Schema
	raw    any // schema.json as plain values, to find errorMessage and properties
}

// validate checks d.root against the schema and adds one positioned error
// per problem.
func (d *doc) validate() {
	cs, err := compiled()
	if err != nil {
		d.errAt(pos{}, "", "%v", err)
		return
	}
	err = cs.schema.Validate(d.root)
	if err == nil {
		return
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		d.errAt(pos{}, "", "schema validation failed: %v", err)
		return
	}
	var leaves []*jsonschema.ValidationError
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	for _, leaf := range leaves {
		d.schemaError(cs, leaf)
	}
}

// schemaError turns one leaf validation error into messages for the author.
func (d *doc) schemaError(cs *compiledSchema, e *jsonschema.ValidationError) {
	frag := e.AbsoluteKeywordLocation
	if i := strings.IndexByte(frag, '#'); i >= 0 {
		frag = frag[i+1:]
	}
	keyword, parent := frag, ""
	if i := strings.LastIndexByte(frag, '/'); i >= 0 {
		keyword, parent = frag[i+1:], frag[:i]
	}
	sch, _ := pointer(cs.raw, parent).(map[string]any)
	ptr := instancePtr(e.InstanceLocation)
	l := d.at(ptr)
	value := pointer(d.root, ptr)
	if strings.Contains(e.KeywordLocation, "/propertyNames/") {
		// The instance is the key itself.
		value = unescapePtr(ptr[strings.LastIndexByte(ptr, '/')+1:])
	}
	hint := ""
	if keyword == "type" && strings.Contains(fmt.Sprint(sch["type"]), "string") && sch["format"] != "sandbox-duration" {
		switch value.(type) {
		case json.Number, bool:
			// YAML read an unquoted 1842 or true as a number or boolean.
			hint = fmt.Sprintf(" (to mean the text, quote it: \"%v\")", value)
		}
	}
	if custom, ok := sch["errorMessage"].(string); ok && keyword != "required" && keyword != "additionalProperties" {
		d.errAt(l.pos, l.path, "%s, got %s%s", custom, describe(value), hint)
		return
	}
	switch keyword {
	case "additionalProperties":
		obj, _ := value.(map[string]any)
		props, _ := sch["properties"].(map[string]any)
		allowed := make([]string, 0, len(props))
		for k := range props {
			if k != "$schema" {
				allowed = append(allowed, k)
			}
		}
		sort.Strings(allowed)
		for k := range obj {
			if _, ok := props[k]; ok {
				continue
			}
			kl := d.at(childPtr(ptr, k, -1))
			msg := "unknown key"
			if near := nearest(k, allowed); near != "" {
				msg += fmt.Sprintf("; did you mean %q?", near)
			}
			d.errAt(kl.pos, kl.path, "%s (allowed: %s)", msg, strings.Join(allowed, ", "))
		}
	case "required":
		obj, _ := value.(map[string]any)
		req, _ := sch["required"].([]any)
		var missing []string
		for _, r := range req {
			k, _ := r.(string)
			if _, ok := obj[k]; !ok {
				missing = append(missing, strconv.Quote(k))
			}
		}
		if len(missing) == 1 {
			d.errAt(l.pos, l.path, "missing required key %s", missing[0])
		} else {
			d.errAt(l.pos, l.path, "missing required keys %s", strings.Join(missing, ", "))
		}
	case "type":
		d.errAt(l.pos, l.path, "must be %s, got %s%s", typeNames(sch["type"]), describe(value), hint)
	case "enum":
		vals, _ := sch["enum"].([]any)
		names := make([]string, len(vals))
		for i, v := range vals {
			names[i] = fmt.Sprint(v)
		}
		d.errAt(l.pos, l.path, "must be one of %s; got %s", strings.Join(names, ", "), describe(value))
	case "const":
		d.errAt(l.pos, l.path, "must be %v, got %s", sch["const"], describe(value))
	case "minItems":
		if sch["minItems"] == json.Number("1") {
			d.errAt(l.pos, l.path, "must not be empty")
		} else {
			d.errAt(l.pos, l.path, "must have at least %v items", sch["minItems"])
		}
	case "maxItems":
		d.errAt(l.pos, l.path, "must have at most %v items", sch["maxItems"])
	case "minProperties":
		d.errAt(l.pos, l.path, "must have at least %v entries", sch["minProperties"])
	case "maxProperties":
		d.errAt(l.pos, l.path, "must have at most %v entries", sch["maxProperties"])
	case "minLength":
		d.errAt(l.pos, l.path, "must not be empty")
	case "maxLength":
		d.errAt(l.pos, l.path, "must be at most %v characters", sch["maxLength"])
	case "minimum":
		d.errAt(l.pos, l.path, "must be at least %v, got %s", sch["minimum"], describe(value))
	case "maximum":
		d.errAt(l.pos, l.path, "must be at most %v, got %s", sch["maximum"], describe(value))
	case "uniqueItems":
		// "items at index 0 and 2 are equal"
		var i, j int
		if _, err := fmt.Sscanf(e.Message, "items at index %d and %d are equal", &i, &j); err == nil {
			il := d.at(childPtr(ptr, "", j))
			d.errAt(il.pos, il.path, "duplicate of %s", childPath(l.path, "", i))
			return
		}
		d.errAt(l.pos, l.path, "must not hold the same item twice")
	default:
		d.errAt(l.pos, l.path, "%s", e.Message)
	}
}

// pointer returns the value at a JSON pointer, or nil.
func pointer(v any, ptr string) any {
	if ptr == "" {
		return v
	}
	for _, seg := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		seg = unescapePtr(seg)
		switch t := v.(type) {
		case map[string]any:
			v = t[seg]
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(t) {
				return nil
			}
			v = t[i]
		default:
			return nil
		}
	}
	return v
}

// instancePtr converts the validator's instance location, whose segments are
// also URL-escaped, into a plain JSON pointer.
func instancePtr(loc string) string {
	segs := strings.Split(loc, "/")
	for i, s := range segs {
		if u, err := url.PathUnescape(s); err == nil {
			segs[i] = u
		}
	}
	return strings.Join(segs, "/")
}

func unescapePtr(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// describe renders a value in an error message.
func describe(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case string:
		if r := []rune(t); len(r) > 80 {
			t = string(r[:77]) + "..."
		}
		return strconv.Quote(t)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return fmt.Sprint(v)
}

func typeNames(t any) string {
	name := map[string]string{
		"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
		"object": "a mapping", "array": "a list", "null": "null",
	}
	switch t := t.(type) {
	case string:
		return name[t]
	case []any:
		parts := make([]string, len(t))
		for i, s := range t {
			parts[i] = name[fmt.Sprint(s)]
		}
		return strings.Join(parts, " or ")
	}
	return fmt.Sprint(t)
}

// nearest returns the candidate within two edits of s, if any.
func nearest(s string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
