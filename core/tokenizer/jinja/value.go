package jinja

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

// Value is a template value: nil (None), Undefined, bool, int, float64,
// string, []Value (list or tuple), *Map (dict, ordered), *Namespace,
// Func (macros, builtins and bound methods) or *loopInfo.
type Value = any

// Undefined is a name or attribute that does not exist.
type Undefined struct{}

// Map is a dict that keeps insertion order, as Python's does: tojson and
// iteration over tool schemas depend on it.
type Map struct {
	keys []string
	vals map[string]Value
	// json is the last tojson of this map (a chat template writes each
	// tool's schema with tojson on every render; the tools' values are
	// shared across renders, and a template cannot change a dict).
	json atomic.Pointer[jsonMemo]
}

// jsonMemo is a tojson result and the options it was written with.
type jsonMemo struct {
	opts jsonOpts
	out  string
}

// jsonOpts are tojson's options, comparable with ==.
type jsonOpts struct {
	indent   int
	sortKeys bool
	seps     [2]string
	hasSeps  bool
}

// NewMap returns an empty ordered map.
func NewMap() *Map { return &Map{vals: map[string]Value{}} }

// Set adds or replaces a key, keeping its first position.
func (m *Map) Set(k string, v Value) {
	if _, ok := m.vals[k]; !ok {
		m.keys = append(m.keys, k)
	}
	m.vals[k] = v
	m.json.Store(nil)
}

// Get returns a key's value.
func (m *Map) Get(k string) (Value, bool) {
	v, ok := m.vals[k]
	return v, ok
}

// Keys in insertion order.
func (m *Map) Keys() []string { return m.keys }

// Len is the number of keys.
func (m *Map) Len() int { return len(m.keys) }

// Namespace is the mutable object of namespace(...).
type Namespace struct{ Map }

// Func is a callable: a builtin, a macro or a bound method.
type Func func(args []Value, kwargs map[string]Value) (Value, error)

type loopInfo struct {
	index0, length int
	items          []Value
	cycle          Func
}

func (l *loopInfo) attr(name string) Value {
	switch name {
	case "index0":
		return l.index0
	case "index":
		return l.index0 + 1
	case "revindex0":
		return l.length - l.index0 - 1
	case "revindex":
		return l.length - l.index0
	case "first":
		return l.index0 == 0
	case "last":
		return l.index0 == l.length-1
	case "length":
		return l.length
	case "previtem":
		if l.index0 > 0 {
			return l.items[l.index0-1]
		}
	case "nextitem":
		if l.index0+1 < l.length {
			return l.items[l.index0+1]
		}
	case "cycle":
		return l.cycle
	}
	return Undefined{}
}

func truthy(v Value) bool {
	switch x := v.(type) {
	case nil, Undefined:
		return false
	case bool:
		return x
	case int:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case []Value:
		return len(x) > 0
	case *Map:
		return x.Len() > 0
	}
	return true
}

func typeName(v Value) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case Undefined:
		return "undefined"
	case bool:
		return "bool"
	case int:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []Value:
		return "list"
	case *Map:
		return "dict"
	case *Namespace:
		return "namespace"
	case Func:
		return "function"
	}
	return fmt.Sprintf("%T", v)
}

// str is Python's str(): what {{ }} prints.
func str(v Value) string {
	switch x := v.(type) {
	case string:
		return x
	case Undefined:
		return ""
	}
	return repr(v)
}

// repr is Python's repr(), used for containers.
func repr(v Value) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case Undefined:
		return ""
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int:
		return strconv.Itoa(x)
	case float64:
		return pyFloat(x)
	case string:
		return pyQuote(x)
	case []Value:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = repr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *Map:
		parts := make([]string, 0, x.Len())
		for _, k := range x.keys {
			parts = append(parts, pyQuote(k)+": "+repr(x.vals[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case *Namespace:
		return "<Namespace>"
	}
	return fmt.Sprint(v)
}

// pyFloat formats like Python's repr(float).
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e16 {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if strings.Contains(s, "e") {
		// Python writes 1e-05 and 1e+16.
		mant, exp, _ := strings.Cut(s, "e")
		sign := exp[0]
		digits := strings.TrimLeft(exp[1:], "0")
		if len(digits) < 2 {
			digits = strings.Repeat("0", 2-len(digits)) + digits
		}
		return mant + "e" + string(sign) + digits
	}
	return s
}

func pyQuote(s string) string {
	q := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, "\"") {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(q):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

func equal(a, b Value) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case Undefined:
		_, ok := b.(Undefined)
		return ok
	case bool:
		switch y := b.(type) {
		case bool:
			return x == y
		case int:
			return boolInt(x) == y
		}
		return false
	case int, float64:
		fa, okA := number(a)
		fb, okB := number(b)
		return okA && okB && fa == fb
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []Value:
		y, ok := b.([]Value)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case *Map:
		y, ok := b.(*Map)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for _, k := range x.keys {
			yv, ok := y.vals[k]
			if !ok || !equal(x.vals[k], yv) {
				return false
			}
		}
		return true
	}
	return a == b
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func number(v Value) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case float64:
		return x, true
	case bool:
		return float64(boolInt(x)), true
	}
	return 0, false
}

func compare(a, b Value) (int, error) {
	if fa, ok := number(a); ok {
		if fb, ok := number(b); ok {
			switch {
			case fa < fb:
				return -1, nil
			case fa > fb:
				return 1, nil
			}
			return 0, nil
		}
	}
	if sa, ok := a.(string); ok {
		if sb, ok := b.(string); ok {
			return strings.Compare(sa, sb), nil
		}
	}
	if la, ok := a.([]Value); ok {
		if lb, ok := b.([]Value); ok {
			for i := 0; i < len(la) && i < len(lb); i++ {
				if c, err := compare(la[i], lb[i]); err != nil || c != 0 {
					return c, err
				}
			}
			return len(la) - len(lb), nil
		}
	}
	return 0, fmt.Errorf("cannot compare %s and %s", typeName(a), typeName(b))
}

func sortValues(items []Value, key func(Value) Value, reverse bool) error {
	var err error
	sort.SliceStable(items, func(i, j int) bool {
		c, e := compare(key(items[i]), key(items[j]))
		if e != nil {
			err = e
		}
		if reverse {
			return c > 0
		}
		return c < 0
	})
	return err
}

// iterate returns the items a for loop walks: list items, dict keys,
// string characters.
func iterate(v Value) ([]Value, error) {
	switch x := v.(type) {
	case []Value:
		return x, nil
	case *Map:
		out := make([]Value, len(x.keys))
		for i, k := range x.keys {
			out[i] = k
		}
		return out, nil
	case string:
		var out []Value
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, nil
	case Undefined:
		return nil, nil // Jinja2's Undefined iterates as empty
	}
	// None too: Jinja2 raises TypeError ('NoneType' object is not iterable).
	return nil, fmt.Errorf("%s is not iterable", typeName(v))
}
