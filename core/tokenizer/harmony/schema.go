package harmony

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/prorl/prorl/core/jsonw"
)

// node is a JSON value with object keys in their written order (harmony
// renders properties in that order).
type node struct {
	kind byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	str  string
	num  json.Number
	b    bool
	arr  []*node
	keys []string
	vals map[string]*node
}

func parse(data []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := decode(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return n, nil
}

func decode(dec *json.Decoder, depth int) (*node, error) {
	if depth > 64 {
		return nil, errDepth
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch x := t.(type) {
	case json.Delim:
		if x == '{' {
			n := &node{kind: 'o', vals: map[string]*node{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decode(dec, depth+1)
				if err != nil {
					return nil, err
				}
				if _, dup := n.vals[k]; !dup {
					n.keys = append(n.keys, k)
				}
				n.vals[k] = v // the last one wins, as in Python
			}
			_, err := dec.Token()
			return n, err
		}
		n := &node{kind: 'a'}
		for dec.More() {
			v, err := decode(dec, depth+1)
			if err != nil {
				return nil, err
			}
			n.arr = append(n.arr, v)
		}
		_, err := dec.Token()
		return n, err
	case string:
		return &node{kind: 's', str: x}, nil
	case json.Number:
		return &node{kind: 'n', num: x}, nil
	case bool:
		return &node{kind: 'b', b: x}, nil
	case nil:
		return &node{kind: 'z'}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", t)
}

func (n *node) get(k string) *node {
	if n == nil || n.kind != 'o' {
		return nil
	}
	return n.vals[k]
}

// text is a string field's value ("" when absent or not a string).
func (n *node) text(k string) (string, bool) {
	v := n.get(k)
	if v == nil || v.kind != 's' {
		return "", false
	}
	return v.str, true
}

// typeOf is the TypeScript-like type of a schema. Objects list their
// properties one per line at indent and close at indent; a property's own
// type is rendered 4 spaces deeper, a oneOf variant 3 (after " | ").
func typeOf(s *node, indent string) string {
	if s == nil || s.kind != 'o' {
		return "any"
	}
	if one := s.get("oneOf"); one != nil && one.kind == 'a' {
		return union(s, one, indent, false)
	}
	return baseType(s, indent)
}

// orNull appends "| null" for "nullable": true, as harmony does for
// properties and union variants (not for array items or the parameters
// themselves), and only to a type that does not already mention null
// anywhere (even in a description inside an object).
func orNull(s *node, t string) string {
	if v := s.get("nullable"); v != nil && v.kind == 'b' && v.b && !strings.Contains(t, "null") {
		return t + " | null"
	}
	return t
}

func baseType(s *node, indent string) string {
	t := s.get("type")
	if t != nil && t.kind == 'a' {
		names := make([]string, 0, len(t.arr))
		for _, x := range t.arr {
			if x.kind == 's' {
				names = append(names, typeName(x.str))
			}
		}
		return strings.Join(names, " | ")
	}
	if t == nil || t.kind != 's' {
		return "any"
	}
	switch t.str {
	case "object":
		var b strings.Builder
		if d, ok := s.text("description"); ok {
			b.WriteString(indent + "// " + d + "\n")
		}
		b.WriteString("{\n")
		props := s.get("properties")
		required := map[string]bool{}
		if r := s.get("required"); r != nil && r.kind == 'a' {
			for _, x := range r.arr {
				if x.kind == 's' {
					required[x.str] = true
				}
			}
		}
		if props != nil && props.kind == 'o' {
			for _, name := range props.keys {
				property(&b, name, props.vals[name], required[name], indent)
			}
		}
		b.WriteString(indent + "}")
		return b.String()
	case "array":
		items := s.get("items")
		switch {
		case items == nil:
			return "Array<any>"
		case items.kind == 'o':
			return typeOf(items, indent) + "[]"
		default:
			return "any[]"
		}
	case "string":
		if e := s.get("enum"); e != nil && e.kind == 'a' {
			var vals []string
			for _, x := range e.arr {
				if x.kind == 's' {
					vals = append(vals, `"`+x.str+`"`)
				}
			}
			if len(vals) > 0 {
				return strings.Join(vals, " | ")
			}
		}
		return "string"
	case "number", "integer":
		return "number"
	case "boolean":
		return "boolean"
	}
	return "any"
}

// union renders a oneOf, one variant per line. A variant's string
// default shows bare for an enum when the union is a property's own type,
// as JSON when it is nested (in array items), quoted otherwise.
func union(s, one *node, indent string, atProperty bool) string {
	var b strings.Builder
	parent, hasParent := s.text("description")
	for _, v := range one.arr {
		b.WriteString("\n" + indent + " | " + orNull(v, typeOf(v, indent+"   ")))
		d, hasDesc := v.text("description")
		if hasParent && d == parent {
			hasDesc = false // shown above the property
		}
		if hasDesc {
			b.WriteString(" // " + d)
		}
		if def := v.get("default"); def != nil {
			if !hasDesc {
				b.WriteString(" //")
			}
			b.WriteString(" default: " + variantDefault(v, def, atProperty))
		}
	}
	return b.String()
}

// variantDefault is a union variant's default as harmony shows it.
func variantDefault(s, d *node, atProperty bool) string {
	if d.kind != 's' {
		return compact(d)
	}
	if e := s.get("enum"); e != nil && e.kind == 'a' && len(e.arr) > 0 {
		if atProperty {
			return d.str
		}
		return compact(d)
	}
	return `"` + d.str + `"`
}

func typeName(t string) string {
	if t == "integer" {
		return "number"
	}
	return t
}

// property writes one property: its comment block (title, description,
// string examples), then "name?: type," and its default.
func property(b *strings.Builder, name string, s *node, required bool, indent string) {
	if title, ok := s.text("title"); ok {
		b.WriteString(indent + "// " + title + "\n" + indent + "//\n")
	}
	one := s.get("oneOf")
	isUnion := one != nil && one.kind == 'a'
	var typ string
	if isUnion {
		typ = union(s, one, indent, true)
	} else {
		typ = orNull(s, typeOf(s, indent+"    "))
	}
	desc, hasDesc := s.text("description")
	if hasDesc && !isUnion {
		b.WriteString(indent + "// " + desc + "\n")
	}
	if ex := s.get("examples"); ex != nil && ex.kind == 'a' {
		if len(ex.arr) > 0 {
			b.WriteString(indent + "// Examples:\n")
		}
		for _, x := range ex.arr {
			if x.kind == 's' {
				b.WriteString(indent + `// - "` + x.str + "\"\n")
			}
		}
	}
	if hasDesc && isUnion { // a union's description comes after its examples
		b.WriteString(indent + "// " + desc + "\n")
	}
	def := s.get("default")
	// A union's lines follow the name, so its default goes above it.
	if isUnion && def != nil {
		b.WriteString(indent + "// default: " + defaultText(s, def) + "\n")
	}
	b.WriteString(indent + name)
	if !required {
		b.WriteString("?")
	}
	b.WriteString(":")
	if isUnion {
		b.WriteString(typ + "\n" + indent + ",\n")
		return
	}
	b.WriteString(" " + typ + ",")
	if def != nil {
		b.WriteString(" // default: " + defaultText(s, def))
	}
	b.WriteString("\n")
}

// defaultText is a default as harmony shows it: a string quoted (bare
// for an enum), anything else as JSON.
func defaultText(s, d *node) string {
	if d.kind != 's' {
		return compact(d)
	}
	if e := s.get("enum"); e != nil && e.kind == 'a' && len(e.arr) > 0 {
		return d.str
	}
	return `"` + d.str + `"`
}

// compact is a value as serde_json writes it from the Python value
// json.loads makes of it: compact, non-ASCII as is, integers exact,
// floats in Rust's shortest form.
func compact(n *node) string {
	var b strings.Builder
	writeCompact(&b, n)
	return b.String()
}

func writeCompact(b *strings.Builder, n *node) {
	switch n.kind {
	case 'o':
		b.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			jsonw.MinimalString(b, k)
			b.WriteByte(':')
			writeCompact(b, n.vals[k])
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		for i, x := range n.arr {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCompact(b, x)
		}
		b.WriteByte(']')
	case 's':
		jsonw.MinimalString(b, n.str)
	case 'n':
		b.WriteString(number(n.num))
	case 'b':
		b.WriteString(strconv.FormatBool(n.b))
	default:
		b.WriteString("null")
	}
}

// number formats a JSON number as Python reads it and serde_json writes
// it: an integer literal exactly; anything else as an f64 in Rust's
// shortest round-trip form (ryu): "1.5", "100.0", "1e20", "1.5e-7".
func number(n json.Number) string {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		if i, ok := new(big.Int).SetString(s, 10); ok {
			return i.String()
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "null"
	}
	return rustFloat(f)
}

func rustFloat(f float64) string {
	sign := ""
	if math.Signbit(f) {
		sign, f = "-", -f
	}
	if f == 0 {
		return sign + "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	kk := x + 1 // the decimal point's position after the first digit
	n := len(digits)
	switch {
	case n <= kk && kk <= 16:
		return sign + digits + strings.Repeat("0", kk-n) + ".0"
	case 0 < kk && kk <= 16:
		return sign + digits[:kk] + "." + digits[kk:]
	case -5 < kk && kk <= 0:
		return sign + "0." + strings.Repeat("0", -kk) + digits
	case n == 1:
		return sign + digits + "e" + strconv.Itoa(kk-1)
	default:
		return sign + digits[:1] + "." + digits[1:] + "e" + strconv.Itoa(kk-1)
	}
}
