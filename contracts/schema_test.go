package contracts_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-mcp/sandbox-mcp/contracts"
)

func schemaDoc(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	require.NoError(t, json.Unmarshal(contracts.Schema(), &doc))
	return doc
}

func TestSchemaCompilesForOtherTools(t *testing.T) {
	doc := schemaDoc(t)
	assert.Equal(t, "https://json-schema.org/draft/2020-12/schema", doc["$schema"])
	// A plain compiler, as an editor or CI tool would use: no custom formats.
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("schema.json", bytes.NewReader(contracts.Schema())))
	s, err := c.Compile("schema.json")
	require.NoError(t, err)
	assert.NoError(t, s.Validate(map[string]any{"version": json.Number("1"), "task": map[string]any{"id": "t"}}))
	assert.Error(t, s.Validate(map[string]any{"version": json.Number("1"), "task": map[string]any{"id": "t"}, "extra": true}))
}

func TestSchemaRefusesUnknownKeysEverywhere(t *testing.T) {
	doc := schemaDoc(t)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch n := v.(type) {
		case map[string]any:
			if _, ok := n["properties"]; ok {
				assert.Equal(t, false, n["additionalProperties"], "%s: an object with properties must refuse unknown keys", path)
			}
			for k, c := range n {
				walk(path+"/"+k, c)
			}
		case []any:
			for _, c := range n {
				walk(path+"/[]", c)
			}
		}
	}
	walk("#", doc)
}

// TestSchemaMatchesTheContractType keeps schema.json and the json tags of
// Contract in step: every key the schema defines is a field, and every field
// is a key.
func TestSchemaMatchesTheContractType(t *testing.T) {
	doc := schemaDoc(t)
	defs := doc["$defs"].(map[string]any)
	resolve := func(n map[string]any) map[string]any {
		if ref, ok := n["$ref"].(string); ok {
			return defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
		}
		return n
	}
	leaf := map[reflect.Type]bool{
		reflect.TypeOf(contracts.Duration(0)): true, reflect.TypeOf(contracts.ByteSize(0)): true,
	}
	var check func(path string, typ reflect.Type, n map[string]any)
	check = func(path string, typ reflect.Type, n map[string]any) {
		n = resolve(n)
		switch {
		case leaf[typ]:
		case typ.Kind() == reflect.Pointer:
			check(path, typ.Elem(), n)
		case typ.Kind() == reflect.Slice:
			items, ok := n["items"].(map[string]any)
			require.True(t, ok, "%s: schema has no items", path)
			check(path+"[]", typ.Elem(), items)
		case typ.Kind() == reflect.Map:
			ap, ok := n["additionalProperties"].(map[string]any)
			require.True(t, ok, "%s: schema has no additionalProperties schema", path)
			check(path+".*", typ.Elem(), ap)
		case typ.Kind() == reflect.Struct:
			props, _ := n["properties"].(map[string]any)
			var fields, keys []string
			for i := range typ.NumField() {
				name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
				fields = append(fields, name)
				if p, ok := props[name].(map[string]any); ok {
					check(path+"."+name, typ.Field(i).Type, p)
				}
			}
			for k := range props {
				if k != "$schema" {
					keys = append(keys, k)
				}
			}
			sort.Strings(fields)
			sort.Strings(keys)
			assert.Equal(t, fields, keys, "%s: schema keys and struct fields differ", path)
		}
	}
	check("contract", reflect.TypeOf(contracts.Contract{}), doc)
}
