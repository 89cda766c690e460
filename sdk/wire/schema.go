package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"unicode/utf8"
)

// SchemaError is a document that does not match its schema, at Path
// (dotted, with [i] for array items; "" for the document itself).
type SchemaError struct {
	Path    string
	Message string
}

func (e *SchemaError) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

// ValidateSchema checks doc against the JSON Schema schema (the subset
// sdk/schema's Of makes, which a plugin declares for its config table and
// the host checks the table against:
// type, properties, required, additionalProperties, items, enum, minimum,
// maximum, minLength, maxLength). It returns the first mismatch as *SchemaError.
func ValidateSchema(schema, doc json.RawMessage) error {
	var s any
	if err := json.Unmarshal(schema, &s); err != nil {
		return fmt.Errorf("schema: not JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return &SchemaError{Message: "not JSON: " + err.Error()}
	}
	return check(s, v, "")
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func typeOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if _, err := strconv.ParseInt(x.String(), 10, 64); err == nil {
			return "integer"
		}
		if f, err := x.Float64(); err == nil && f == math.Trunc(f) && !math.IsInf(f, 0) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func check(sv, v any, path string) error {
	s, ok := sv.(map[string]any)
	if !ok { // true or {} accepts anything; false nothing
		if b, isBool := sv.(bool); isBool && !b {
			return &SchemaError{path, "not allowed"}
		}
		return nil
	}
	got := typeOf(v)
	if want, ok := s["type"].(string); ok && want != got && (want != "number" || got != "integer") {
		return &SchemaError{path, fmt.Sprintf("must be %s %s, got %s", article(want), want, got)}
	}
	if enum, ok := s["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return same(e, v) }) {
		return &SchemaError{path, fmt.Sprintf("must be one of %v", enum)}
	}
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		if m, ok := s["minimum"].(float64); ok && f < m {
			return &SchemaError{path, fmt.Sprintf("must be at least %v, got %v", m, x)}
		}
		if m, ok := s["maximum"].(float64); ok && f > m {
			return &SchemaError{path, fmt.Sprintf("must be at most %v, got %v", m, x)}
		}
	case string:
		n := utf8.RuneCountInString(x)
		if m, ok := s["minLength"].(float64); ok && float64(n) < m {
			return &SchemaError{path, fmt.Sprintf("must have at least %v characters", m)}
		}
		if m, ok := s["maxLength"].(float64); ok && float64(n) > m {
			return &SchemaError{path, fmt.Sprintf("must have at most %v characters", m)}
		}
	case []any:
		if items, ok := s["items"]; ok {
			for i, e := range x {
				if err := check(items, e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if k, _ := r.(string); k != "" {
					if _, ok := x[k]; !ok {
						return &SchemaError{join(path, k), "required"}
					}
				}
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // the same first error every time
		for _, k := range keys {
			if ps, ok := props[k]; ok {
				if err := check(ps, x[k], join(path, k)); err != nil {
					return err
				}
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					return &SchemaError{join(path, k), fmt.Sprintf("unknown key (known: %s)", known(props))}
				}
			case map[string]any:
				if err := check(ap, x[k], join(path, k)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func same(e, v any) bool {
	if n, ok := v.(json.Number); ok {
		f, _ := n.Float64()
		ef, isNum := e.(float64)
		return isNum && ef == f
	}
	return e == v
}

func known(props map[string]any) string {
	ks := make([]string, 0, len(props))
	for k := range props {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	out := ""
	for i, k := range ks {
		if i > 0 {
			out += ", "
		}
		out += k
	}
	if out == "" {
		return "none"
	}
	return out
}

func article(t string) string {
	if t == "integer" || t == "array" || t == "object" {
		return "an"
	}
	return "a"
}
