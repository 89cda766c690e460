package schema

import (
	"encoding/json"
	"math"
	"sort"
	"strings"
)

// Example makes a value the JSON Schema accepts, from the keywords a tool's
// parameters use: an object with each required property (nested objects
// likewise), an enum's first value, a number within its bounds, a string
// within its length bounds, an empty array. The simulator calls an unknown
// domain's tools with it; the conformance suite calls every tool with it.
func Example(schema json.RawMessage) json.RawMessage {
	var s any
	if json.Unmarshal(schema, &s) != nil {
		return json.RawMessage("{}")
	}
	b, err := json.Marshal(example(s))
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}

func example(sv any) any {
	s, _ := sv.(map[string]any)
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	if c, ok := s["const"]; ok {
		return c
	}
	num := func(key string) (float64, bool) { f, ok := s[key].(float64); return f, ok }
	switch typ := typeName(s["type"]); typ {
	case "integer", "number":
		v := 1.0
		if lo, ok := num("minimum"); ok && v < lo {
			v = lo
		}
		if hi, ok := num("maximum"); ok && v > hi {
			v = hi
		}
		if typ == "integer" {
			v = math.Ceil(v)
		}
		return v
	case "boolean":
		return true
	case "array":
		return []any{}
	case "null":
		return nil
	case "string":
		str := "test"
		if lo, ok := num("minLength"); ok && float64(len(str)) < lo {
			str = strings.Repeat("x", int(lo))
		}
		if hi, ok := num("maxLength"); ok && float64(len(str)) > hi {
			str = str[:int(hi)]
		}
		return str
	case "object":
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		out := map[string]any{}
		names := make([]string, 0, len(req))
		for _, r := range req {
			if n, ok := r.(string); ok {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			out[n] = example(props[n])
		}
		return out
	default: // no type: a string is the likeliest argument
		if _, ok := s["properties"]; ok {
			return example(map[string]any{"type": "object", "properties": s["properties"], "required": s["required"]})
		}
		return "test"
	}
}

func typeName(t any) string {
	switch v := t.(type) {
	case string:
		return v
	case []any: // ["string", "null"]: the first
		if len(v) > 0 {
			if s, ok := v[0].(string); ok {
				return s
			}
		}
	}
	return ""
}
