package jinja

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/prorl/prorl/core/jsonw"
)

// asciiJSON escapes every non-ASCII character of JSON text as Python's
// json.dumps(ensure_ascii=True) does: \uXXXX, lowercase, surrogate pairs
// beyond the BMP. Non-ASCII only occurs inside strings, so the whole text
// can be rewritten.
func asciiJSON(s string) string {
	var b strings.Builder
	const hex = "0123456789abcdef"
	u := func(r rune) {
		b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			b.WriteByte(hex[(r>>shift)&0xF])
		}
	}
	for _, r := range s {
		switch {
		case r < 0x80:
			b.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			u(0xD800 + (r >> 10))
			u(0xDC00 + (r & 0x3FF))
		default:
			u(r)
		}
	}
	return b.String()
}

// toJSON is writeJSON's text, kept on a dict for the next render with the
// same options when nothing under it can change (no namespace).
func toJSON(v Value, indent int, sortKeys bool, seps *[2]string) (string, error) {
	m, _ := v.(*Map)
	opts := jsonOpts{indent: indent, sortKeys: sortKeys, hasSeps: seps != nil}
	if seps != nil {
		opts.seps = *seps
	}
	if m != nil {
		if c := m.json.Load(); c != nil && c.opts == opts {
			return c.out, nil
		}
	}
	var b strings.Builder
	if err := writeJSON(&b, v, indent, 0, sortKeys, seps); err != nil {
		return "", err
	}
	if m != nil && !mutable(m) {
		m.json.Store(&jsonMemo{opts: opts, out: b.String()})
	}
	return b.String(), nil
}

// mutable is whether v holds a namespace, the one value a template can
// change after it is made.
func mutable(v Value) bool {
	switch x := v.(type) {
	case *Namespace:
		return true
	case []Value:
		for _, e := range x {
			if mutable(e) {
				return true
			}
		}
	case *Map:
		for _, e := range x.vals {
			if mutable(e) {
				return true
			}
		}
	}
	return false
}

// writeJSON writes v as Python's json.dumps(v, ensure_ascii=False,
// indent=indent, sort_keys=sortKeys) does, which is what Hugging Face's
// tojson filter calls: ", " and ": " separators without indent, "," and
// ": " with it.
func writeJSON(b *strings.Builder, v Value, indent, depth int, sortKeys bool, seps *[2]string) error {
	item, key := ", ", ": "
	if indent > 0 {
		item = ","
	}
	if seps != nil {
		item, key = seps[0], seps[1]
	}
	newline := func(d int) {
		if indent > 0 {
			b.WriteByte('\n')
			b.WriteString(strings.Repeat(" ", indent*d))
		}
	}
	switch x := v.(type) {
	case nil, Undefined:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int:
		b.WriteString(strconv.Itoa(x))
	case float64:
		s := pyFloat(x)
		switch s {
		case "inf":
			s = "Infinity"
		case "-inf":
			s = "-Infinity"
		case "nan":
			s = "NaN"
		}
		b.WriteString(s)
	case string:
		jsonw.MinimalString(b, x)
	case []Value:
		if len(x) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(item)
			}
			newline(depth + 1)
			if err := writeJSON(b, e, indent, depth+1, sortKeys, seps); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte(']')
	case *Map, *Namespace:
		m, ok := x.(*Map)
		if !ok {
			m = &x.(*Namespace).Map
		}
		if m.Len() == 0 {
			b.WriteString("{}")
			return nil
		}
		keys := m.keys
		if sortKeys {
			keys = append([]string(nil), keys...)
			sort.Strings(keys)
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(item)
			}
			newline(depth + 1)
			jsonw.MinimalString(b, k)
			b.WriteString(key)
			if err := writeJSON(b, m.vals[k], indent, depth+1, sortKeys, seps); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte('}')
	default:
		return fmt.Errorf("tojson: %s is not JSON serializable", typeName(v))
	}
	return nil
}

// FromJSON decodes JSON into template values, keeping object key order
// (tool schemas must render in the order they were written).
func FromJSON(data []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (Value, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch x := t.(type) {
	case json.Delim:
		switch x {
		case '{':
			m := NewMap()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				m.Set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return m, nil
		case '[':
			out := []Value{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return out, nil
		}
		return nil, fmt.Errorf("unexpected %v", x)
	case json.Number:
		if n, err := strconv.Atoi(x.String()); err == nil && !strings.ContainsAny(x.String(), ".eE") {
			return n, nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, err
		}
		return f, nil
	case string, bool, nil:
		return x, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", t)
}

// FromGo converts Go values (as decoded from JSON or TOML: maps, slices,
// numbers, strings, bools) to template values. Go maps have no order, so
// their keys are sorted.
func FromGo(v any) (Value, error) {
	switch x := v.(type) {
	case nil, bool, int, float64, string, *Map, *Namespace, Func, Undefined:
		return x, nil
	case int64:
		return int(x), nil
	case int32:
		return int(x), nil
	case float32:
		return float64(x), nil
	case json.Number:
		return FromJSON([]byte(x.String()))
	case json.RawMessage:
		return FromJSON(x)
	case []Value:
		out := make([]Value, len(x))
		for i, e := range x {
			c, err := FromGo(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case []string:
		out := make([]Value, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out, nil
	case map[string]any:
		m := NewMap()
		for _, k := range sortedKeys(x) {
			c, err := FromGo(x[k])
			if err != nil {
				return nil, err
			}
			m.Set(k, c)
		}
		return m, nil
	}
	return nil, fmt.Errorf("unsupported value of type %T", v)
}
