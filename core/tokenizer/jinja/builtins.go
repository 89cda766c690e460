package jinja

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Now is the clock of strftime_now; tests replace it.
var Now = time.Now

var builtinGlobals = map[string]Value{
	"raise_exception": Func(func(args []Value, _ map[string]Value) (Value, error) {
		msg := ""
		if len(args) > 0 {
			msg = str(args[0])
		}
		return nil, &RaiseError{Msg: msg}
	}),
	"namespace": Func(func(args []Value, kw map[string]Value) (Value, error) {
		ns := &Namespace{Map: Map{vals: map[string]Value{}}}
		if len(args) > 0 {
			if m, ok := args[0].(*Map); ok {
				for _, k := range m.keys {
					ns.Set(k, m.vals[k])
				}
			}
		}
		for _, k := range sortedKeys(kw) {
			ns.Set(k, kw[k])
		}
		return ns, nil
	}),
	"range": Func(func(args []Value, _ map[string]Value) (Value, error) {
		ints := make([]int, len(args))
		for i, a := range args {
			n, ok := a.(int)
			if !ok {
				return nil, fmt.Errorf("range: %s is not an integer", typeName(a))
			}
			ints[i] = n
		}
		lo, hi, step := 0, 0, 1
		switch len(ints) {
		case 1:
			hi = ints[0]
		case 2:
			lo, hi = ints[0], ints[1]
		case 3:
			lo, hi, step = ints[0], ints[1], ints[2]
		default:
			return nil, fmt.Errorf("range takes 1 to 3 arguments")
		}
		if step == 0 {
			return nil, fmt.Errorf("range: step is zero")
		}
		var out []Value
		for i := lo; (step > 0 && i < hi) || (step < 0 && i > hi); i += step {
			if len(out) > 1<<20 {
				return nil, fmt.Errorf("range too large")
			}
			out = append(out, i)
		}
		return out, nil
	}),
	"dict": Func(func(_ []Value, kw map[string]Value) (Value, error) {
		m := NewMap()
		for _, k := range sortedKeys(kw) {
			m.Set(k, kw[k])
		}
		return m, nil
	}),
	"strftime_now": Func(func(args []Value, _ map[string]Value) (Value, error) {
		if len(args) != 1 {
			return nil, fmt.Errorf("strftime_now takes a format")
		}
		return strftime(Now(), str(args[0])), nil
	}),
}

// sortedKeys gives keyword arguments a stable order (the parser does not
// keep it; namespace() and dict() are only read by key in templates).
func sortedKeys(m map[string]Value) []string {
	return slices.Sorted(maps.Keys(m))
}

func strftime(t time.Time, f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 >= len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'Y':
			fmt.Fprintf(&b, "%04d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}

func kwOr(kw map[string]Value, args []Value, i int, name string) (Value, bool) {
	if i < len(args) {
		return args[i], true
	}
	v, ok := kw[name]
	return v, ok
}

// applyFilter pipes v into the filter called name.
func applyFilter(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	if f, ok := filters[name]; ok {
		return f(name, v, args, kw)
	}
	return nil, fmt.Errorf("unknown filter %q", name)
}

// filters are the Jinja filters chat templates use, by name.
var filters map[string]filter

func init() {
	// Set here, not in the declaration: some refer back to the table.
	filters = map[string]filter{
		"tojson":      filterToJSON,
		"trim":        filterTrim,
		"length":      filterLength,
		"count":       filterLength,
		"string":      filterString,
		"safe":        filterEscape,
		"e":           filterEscape,
		"escape":      filterEscape,
		"forceescape": filterEscape,
		"lower":       filterLower,
		"upper":       filterUpper,
		"title":       filterTitle,
		"capitalize":  filterCapitalize,
		"items":       filterItems,
		"first":       filterFirstLast,
		"last":        filterFirstLast,
		"join":        filterJoin,
		"default":     filterDefault,
		"d":           filterDefault,
		"list":        filterList,
		"int":         filterInt,
		"float":       filterFloat,
		"abs":         filterAbs,
		"round":       filterRound,
		"replace":     filterReplace,
		"reverse":     filterReverse,
		"sort":        filterSort,
		"dictsort":    filterDictsort,
		"unique":      filterUnique,
		"map":         filterMap,
		"select":      filterSelectReject,
		"reject":      filterSelectReject,
		"selectattr":  filterSelectReject,
		"rejectattr":  filterSelectReject,
		"indent":      filterIndent,
		"wordcount":   filterWordcount,
		"center":      filterCenter,
	}
}

func filterToJSON(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	indent := 0
	if x, ok := kwOr(kw, args, 0, "indent"); ok && x != nil {
		n, ok := x.(int)
		if !ok {
			return nil, fmt.Errorf("tojson: indent must be an integer")
		}
		indent = n
	}
	sortKeys := false
	if x, ok := kw["sort_keys"]; ok {
		sortKeys = truthy(x)
	}
	var seps *[2]string
	if x, ok := kw["separators"]; ok {
		if l, ok := x.([]Value); ok && len(l) == 2 {
			seps = &[2]string{str(l[0]), str(l[1])}
		}
	}
	out, err := toJSON(v, indent, sortKeys, seps)
	if err != nil {
		return nil, err
	}
	if x, ok := kw["ensure_ascii"]; ok && truthy(x) {
		return asciiJSON(out), nil
	}
	return out, nil
}

func filterTrim(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	s := str(v)
	if x, ok := kwOr(kw, args, 0, "chars"); ok && x != nil {
		return strings.Trim(s, str(x)), nil
	}
	return strings.TrimSpace(s), nil
}

func filterLength(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	switch x := v.(type) {
	case string:
		return len([]rune(x)), nil
	case []Value:
		return len(x), nil
	case *Map:
		return x.Len(), nil
	case *Namespace:
		return x.Len(), nil
	case Undefined:
		return 0, nil
	}
	return nil, fmt.Errorf("object of type %s has no len()", typeName(v))
}

func filterString(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	return str(v), nil
}

func filterEscape(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	if name == "safe" {
		return v, nil
	}
	return htmlEscape(str(v)), nil
}

func filterLower(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	return strings.ToLower(str(v)), nil
}

func filterUpper(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	return strings.ToUpper(str(v)), nil
}

func filterTitle(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	return pyTitle(str(v)), nil
}

func filterCapitalize(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	return pyCapitalize(str(v)), nil
}

func filterItems(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	m, ok := v.(*Map)
	if !ok {
		if _, u := v.(Undefined); u || v == nil {
			return []Value{}, nil
		}
		return nil, fmt.Errorf("items: %s is not a mapping", typeName(v))
	}
	return mapItems(m), nil
}

func filterFirstLast(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return Undefined{}, nil
	}
	if name == "first" {
		return items[0], nil
	}
	return items[len(items)-1], nil
}

func filterJoin(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	sep := ""
	if x, ok := kwOr(kw, args, 0, "d"); ok {
		sep = str(x)
	}
	attr, hasAttr := kwOr(kw, args, 1, "attribute")
	parts := make([]string, len(items))
	for i, it := range items {
		if hasAttr {
			it = getAttr(it, str(attr))
		}
		parts[i] = str(it)
	}
	return strings.Join(parts, sep), nil
}

func filterDefault(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	def, _ := kwOr(kw, args, 0, "default_value")
	boolean := false
	if x, ok := kwOr(kw, args, 1, "boolean"); ok {
		boolean = truthy(x)
	}
	if _, u := v.(Undefined); u || (boolean && !truthy(v)) {
		if def == nil && len(args) == 0 {
			return "", nil
		}
		return def, nil
	}
	return v, nil
}

func filterList(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	return append([]Value{}, items...), nil
}

func filterInt(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	switch x := v.(type) {
	case int:
		return x, nil
	case float64:
		return int(x), nil
	case bool:
		return boolInt(x), nil
	case string:
		if n, err := strconv.Atoi(strings.TrimSpace(x)); err == nil {
			return n, nil
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
			return int(f), nil
		}
	}
	return 0, nil
}

func filterFloat(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	if f, ok := number(v); ok {
		return f, nil
	}
	if s, ok := v.(string); ok {
		if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
			return f, nil
		}
	}
	return 0.0, nil
}

func filterAbs(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	switch x := v.(type) {
	case int:
		if x < 0 {
			return -x, nil
		}
		return x, nil
	case float64:
		return math.Abs(x), nil
	}
	return nil, fmt.Errorf("abs: %s is not a number", typeName(v))
}

func filterRound(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	f, ok := number(v)
	if !ok {
		return nil, fmt.Errorf("round: %s is not a number", typeName(v))
	}
	prec := 0
	if x, ok := kwOr(kw, args, 0, "precision"); ok {
		prec, _ = x.(int)
	}
	p := math.Pow(10, float64(prec))
	return math.RoundToEven(f*p) / p, nil
}

func filterReplace(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	if len(args) < 2 {
		return nil, fmt.Errorf("replace takes two arguments")
	}
	n := -1
	if len(args) > 2 {
		n, _ = args[2].(int)
	}
	return strings.Replace(str(v), str(args[0]), str(args[1]), n), nil
}

func filterReverse(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	switch x := v.(type) {
	case string:
		r := []rune(x)
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		return string(r), nil
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	out := make([]Value, len(items))
	for i, it := range items {
		out[len(items)-1-i] = it
	}
	return out, nil
}

func filterSort(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	out := append([]Value{}, items...)
	reverse := false
	if x, ok := kwOr(kw, args, 0, "reverse"); ok {
		reverse = truthy(x)
	}
	attr, hasAttr := kw["attribute"]
	key := func(x Value) Value {
		if hasAttr {
			return getAttr(x, str(attr))
		}
		return x
	}
	return out, sortValues(out, key, reverse)
}

func filterDictsort(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	m, ok := v.(*Map)
	if !ok {
		return nil, fmt.Errorf("dictsort: %s is not a mapping", typeName(v))
	}
	out := mapItems(m)
	return out, sortValues(out, func(x Value) Value { return x.([]Value)[0] }, false)
}

func filterUnique(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	var out []Value
	for _, it := range items {
		dup := false
		for _, o := range out {
			if equal(o, it) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, it)
		}
	}
	return out, nil
}

func filterMap(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	out := make([]Value, len(items))
	if attr, ok := kw["attribute"]; ok {
		for i, it := range items {
			out[i] = getAttr(it, str(attr))
		}
		return out, nil
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("map needs a filter name or attribute=")
	}
	for i, it := range items {
		if out[i], err = applyFilter(str(args[0]), it, args[1:], nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func filterSelectReject(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	want := name == "select" || name == "selectattr"
	byAttr := strings.HasSuffix(name, "attr")
	var out []Value
	for _, it := range items {
		x := it
		rest := args
		if byAttr {
			if len(args) == 0 {
				return nil, fmt.Errorf("%s needs an attribute", name)
			}
			x, rest = getAttr(it, str(args[0])), args[1:]
		}
		ok := truthy(x)
		if len(rest) > 0 {
			if ok, err = runTest(str(rest[0]), x, rest[1:]); err != nil {
				return nil, err
			}
		}
		if ok == want {
			out = append(out, it)
		}
	}
	return out, nil
}

func filterIndent(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	width := 4
	if x, ok := kwOr(kw, args, 0, "width"); ok {
		if n, ok := x.(int); ok {
			width = n
		}
	}
	first := false
	if x, ok := kwOr(kw, args, 1, "first"); ok {
		first = truthy(x)
	}
	pad := strings.Repeat(" ", width)
	lines := strings.Split(str(v), "\n")
	for i := range lines {
		if (i > 0 || first) && lines[i] != "" {
			lines[i] = pad + lines[i]
		}
	}
	return strings.Join(lines, "\n"), nil
}

func filterWordcount(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	return len(strings.Fields(str(v))), nil
}

func filterCenter(name string, v Value, args []Value, kw map[string]Value) (Value, error) {
	return str(v), nil
}

func mapItems(m *Map) []Value {
	out := make([]Value, len(m.keys))
	for i, k := range m.keys {
		out[i] = []Value{k, m.vals[k]}
	}
	return out
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}

func pyTitle(s string) string {
	var b strings.Builder
	prev := false
	for _, r := range s {
		if unicode.IsLetter(r) {
			if prev {
				b.WriteRune(unicode.ToLower(r))
			} else {
				b.WriteRune(unicode.ToTitle(r))
			}
			prev = true
		} else {
			b.WriteRune(r)
			prev = false
		}
	}
	return b.String()
}

func pyCapitalize(s string) string {
	if s == "" {
		return s
	}
	r := []rune(strings.ToLower(s))
	r[0] = unicode.ToTitle(r[0])
	return string(r)
}

func runTest(name string, v Value, args []Value) (bool, error) {
	switch name {
	case "defined":
		_, u := v.(Undefined)
		return !u, nil
	case "undefined":
		_, u := v.(Undefined)
		return u, nil
	case "none":
		return v == nil, nil
	case "string":
		_, ok := v.(string)
		return ok, nil
	case "number":
		switch v.(type) {
		case int, float64:
			return true, nil
		}
		return false, nil
	case "integer":
		_, ok := v.(int)
		return ok, nil
	case "float":
		_, ok := v.(float64)
		return ok, nil
	case "boolean":
		_, ok := v.(bool)
		return ok, nil
	case "true":
		b, ok := v.(bool)
		return ok && b, nil
	case "false":
		b, ok := v.(bool)
		return ok && !b, nil
	case "mapping":
		switch v.(type) {
		case *Map, *Namespace:
			return true, nil
		}
		return false, nil
	case "iterable":
		switch v.(type) {
		case []Value, *Map, string, Undefined:
			// Jinja's Undefined is iterable (as empty).
			return true, nil
		}
		return false, nil
	case "sequence":
		switch v.(type) {
		case []Value, *Map, string:
			return true, nil
		}
		return false, nil
	case "callable":
		_, ok := v.(Func)
		return ok, nil
	case "odd", "even":
		n, ok := v.(int)
		if !ok {
			return false, fmt.Errorf("%s: %s is not an integer", name, typeName(v))
		}
		return (n%2 != 0) == (name == "odd"), nil
	case "divisibleby":
		n, ok1 := v.(int)
		if len(args) != 1 {
			return false, fmt.Errorf("divisibleby takes one argument")
		}
		d, ok2 := args[0].(int)
		if !ok1 || !ok2 || d == 0 {
			return false, fmt.Errorf("divisibleby needs non-zero integers")
		}
		return n%d == 0, nil
	case "eq", "equalto", "==", "sameas", "ne", "!=", "lt", "<", "le", "<=", "gt", ">", "ge", ">=", "in":
		if len(args) != 1 {
			return false, fmt.Errorf("test %s takes one argument", name)
		}
		switch name {
		case "eq", "equalto", "==", "sameas":
			return equal(v, args[0]), nil
		case "ne", "!=":
			return !equal(v, args[0]), nil
		case "in":
			return contains(args[0], v)
		}
		c, err := compare(v, args[0])
		if err != nil {
			return false, err
		}
		switch name {
		case "lt", "<":
			return c < 0, nil
		case "le", "<=":
			return c <= 0, nil
		case "gt", ">":
			return c > 0, nil
		}
		return c >= 0, nil
	case "lower":
		s, ok := v.(string)
		return ok && strings.ToLower(s) == s, nil
	case "upper":
		s, ok := v.(string)
		return ok && strings.ToUpper(s) == s, nil
	}
	return false, fmt.Errorf("unknown test %q", name)
}

func argString(args []Value, i int) (string, bool) {
	if i >= len(args) || args[i] == nil {
		return "", false
	}
	s, ok := args[i].(string)
	return s, ok
}

func stringMethod(s, name string) Value {
	switch name {
	case "strip", "lstrip", "rstrip":
		return Func(func(args []Value, _ map[string]Value) (Value, error) {
			chars, ok := argString(args, 0)
			switch {
			case name == "strip" && ok:
				return strings.Trim(s, chars), nil
			case name == "strip":
				return strings.TrimFunc(s, unicode.IsSpace), nil
			case name == "lstrip" && ok:
				return strings.TrimLeft(s, chars), nil
			case name == "lstrip":
				return strings.TrimLeftFunc(s, unicode.IsSpace), nil
			case ok:
				return strings.TrimRight(s, chars), nil
			}
			return strings.TrimRightFunc(s, unicode.IsSpace), nil
		})
	case "split", "rsplit":
		return splitMethod(s, name)
	case "startswith", "endswith":
		return Func(func(args []Value, _ map[string]Value) (Value, error) {
			if len(args) == 0 {
				return nil, fmt.Errorf("%s takes an argument", name)
			}
			cands := []Value{args[0]}
			if l, ok := args[0].([]Value); ok {
				cands = l
			}
			for _, c := range cands {
				p := str(c)
				if name == "startswith" && strings.HasPrefix(s, p) || name == "endswith" && strings.HasSuffix(s, p) {
					return true, nil
				}
			}
			return false, nil
		})
	case "upper":
		return Func(func([]Value, map[string]Value) (Value, error) { return strings.ToUpper(s), nil })
	case "lower":
		return Func(func([]Value, map[string]Value) (Value, error) { return strings.ToLower(s), nil })
	case "title":
		return Func(func([]Value, map[string]Value) (Value, error) { return pyTitle(s), nil })
	case "capitalize":
		return Func(func([]Value, map[string]Value) (Value, error) { return pyCapitalize(s), nil })
	case "replace":
		return Func(func(args []Value, _ map[string]Value) (Value, error) {
			if len(args) < 2 {
				return nil, fmt.Errorf("replace takes two arguments")
			}
			n := -1
			if len(args) > 2 {
				n, _ = args[2].(int)
			}
			return strings.Replace(s, str(args[0]), str(args[1]), n), nil
		})
	case "find", "rfind", "count":
		return findMethod(s, name)
	case "splitlines":
		return Func(func([]Value, map[string]Value) (Value, error) {
			lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
			if len(lines) > 0 && lines[len(lines)-1] == "" {
				lines = lines[:len(lines)-1]
			}
			out := make([]Value, len(lines))
			for i, l := range lines {
				out[i] = l
			}
			return out, nil
		})
	case "join":
		return Func(func(args []Value, _ map[string]Value) (Value, error) {
			if len(args) == 0 {
				return nil, fmt.Errorf("join takes an argument")
			}
			items, err := iterate(args[0])
			if err != nil {
				return nil, err
			}
			parts := make([]string, len(items))
			for i, it := range items {
				parts[i] = str(it)
			}
			return strings.Join(parts, s), nil
		})
	case "isdigit", "isalpha", "isspace", "isalnum":
		return isMethod(s, name)
	}
	return nil
}

// splitMethod is the string methods split and rsplit of s.
func splitMethod(s, name string) Value {
	return Func(func(args []Value, kw map[string]Value) (Value, error) {
		sep, hasSep := argString(args, 0)
		if x, ok := kw["sep"]; ok && x != nil {
			sep, hasSep = str(x), true
		}
		n := -1
		if x, ok := kwOr(kw, args, 1, "maxsplit"); ok {
			if m, ok := x.(int); ok && m >= 0 {
				n = m + 1
			}
		}
		var parts []string
		switch {
		case !hasSep:
			parts = splitSpace(s, n)
		case sep == "":
			return nil, fmt.Errorf("split: empty separator")
		case name == "rsplit" && n > 0:
			all := strings.Split(s, sep)
			if len(all) > n {
				head := strings.Join(all[:len(all)-n+1], sep)
				parts = append([]string{head}, all[len(all)-n+1:]...)
			} else {
				parts = all
			}
		default:
			parts = strings.SplitN(s, sep, n)
		}
		out := make([]Value, len(parts))
		for i, p := range parts {
			out[i] = p
		}
		return out, nil
	})
}

// findMethod is the string methods find, rfind and count of s.
func findMethod(s, name string) Value {
	return Func(func(args []Value, _ map[string]Value) (Value, error) {
		sub, _ := argString(args, 0)
		switch name {
		case "count":
			return strings.Count(s, sub), nil
		case "rfind":
			i := strings.LastIndex(s, sub)
			if i < 0 {
				return -1, nil
			}
			return len([]rune(s[:i])), nil
		}
		i := strings.Index(s, sub)
		if i < 0 {
			return -1, nil
		}
		return len([]rune(s[:i])), nil
	})
}

// isMethod is the string methods isdigit, isalpha, isspace and isalnum of s.
func isMethod(s, name string) Value {
	return Func(func([]Value, map[string]Value) (Value, error) {
		if s == "" {
			return false, nil
		}
		for _, r := range s {
			ok := false
			switch name {
			case "isdigit":
				ok = unicode.IsDigit(r)
			case "isalpha":
				ok = unicode.IsLetter(r)
			case "isspace":
				ok = unicode.IsSpace(r)
			default:
				ok = unicode.IsLetter(r) || unicode.IsDigit(r)
			}
			if !ok {
				return false, nil
			}
		}
		return true, nil
	})
}

func dictMethod(m *Map, name string) Value {
	switch name {
	case "items":
		return Func(func([]Value, map[string]Value) (Value, error) { return mapItems(m), nil })
	case "keys":
		return Func(func([]Value, map[string]Value) (Value, error) {
			out := make([]Value, len(m.keys))
			for i, k := range m.keys {
				out[i] = k
			}
			return out, nil
		})
	case "values":
		return Func(func([]Value, map[string]Value) (Value, error) {
			out := make([]Value, len(m.keys))
			for i, k := range m.keys {
				out[i] = m.vals[k]
			}
			return out, nil
		})
	case "get":
		return Func(func(args []Value, _ map[string]Value) (Value, error) {
			if len(args) == 0 {
				return nil, fmt.Errorf("get takes a key")
			}
			if v, ok := m.vals[str(args[0])]; ok {
				return v, nil
			}
			if len(args) > 1 {
				return args[1], nil
			}
			return nil, nil
		})
	}
	return nil
}

func listMethod(l []Value, name string) Value {
	switch name {
	case "index":
		return Func(func(args []Value, _ map[string]Value) (Value, error) {
			for i, x := range l {
				if len(args) > 0 && equal(x, args[0]) {
					return i, nil
				}
			}
			return nil, fmt.Errorf("value is not in list")
		})
	case "count":
		return Func(func(args []Value, _ map[string]Value) (Value, error) {
			n := 0
			for _, x := range l {
				if len(args) > 0 && equal(x, args[0]) {
					n++
				}
			}
			return n, nil
		})
	}
	return nil
}

// splitSpace is Python's str.split() without a separator: runs of
// whitespace separate, at most n parts (n <= 0: no limit), and the last
// part keeps the rest of the string, its leading whitespace removed.
func splitSpace(s string, n int) []string {
	var parts []string
	for {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		if s == "" {
			return parts
		}
		if n > 0 && len(parts) == n-1 {
			return append(parts, s)
		}
		end := strings.IndexFunc(s, unicode.IsSpace)
		if end < 0 {
			return append(parts, s)
		}
		parts = append(parts, s[:end])
		s = s[end:]
	}
}

// filter applies one Jinja filter (name is the name it was called by: some
// answer to several).
type filter func(name string, v Value, args []Value, kw map[string]Value) (Value, error)
