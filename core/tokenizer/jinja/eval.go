package jinja

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Template is a parsed template; safe for concurrent rendering.
type Template struct {
	body []stmt
}

// Parse compiles template source.
func Parse(src string) (*Template, error) {
	body, err := parseTemplate(src)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	return &Template{body: body}, nil
}

// RaiseError is what the template's raise_exception(msg) produced.
type RaiseError struct{ Msg string }

func (e *RaiseError) Error() string { return "template raised: " + e.Msg }

// Render runs the template with the given variables (converted from Go
// values with FromGo when they are not template values already).
func (t *Template) Render(vars map[string]Value) (string, error) {
	var b strings.Builder
	if err := t.RenderTo(&b, vars); err != nil {
		return "", err
	}
	return b.String(), nil
}

// RenderTo renders into b.
func (t *Template) RenderTo(b *strings.Builder, vars map[string]Value) error {
	globals := &frame{vars: map[string]Value{}}
	for k, v := range builtinGlobals {
		globals.vars[k] = v
	}
	for k, v := range vars {
		globals.vars[k] = v
	}
	st := &state{out: b}
	root := &frame{vars: map[string]Value{}, parent: globals}
	err := st.exec(t.body, root)
	if errors.Is(err, errLoopCtl) {
		return fmt.Errorf("break or continue outside a loop")
	}
	return err
}

type frame struct {
	vars   map[string]Value
	parent *frame
}

func (f *frame) lookup(name string) Value {
	for ; f != nil; f = f.parent {
		if v, ok := f.vars[name]; ok {
			return v
		}
	}
	return Undefined{}
}

type state struct {
	out   *strings.Builder
	depth int
	brk   bool
}

var errLoopCtl = errors.New("loop control")

const maxDepth = 64

func (st *state) exec(body []stmt, f *frame) error {
	for _, s := range body {
		switch s := s.(type) {
		case *textStmt:
			st.out.WriteString(s.s)
		case *outputStmt:
			v, err := st.eval(s.e, f)
			if err != nil {
				return err
			}
			st.out.WriteString(str(v))
		case *ifStmt:
			for i, c := range s.conds {
				v, err := st.eval(c, f)
				if err != nil {
					return err
				}
				if truthy(v) {
					if err := st.exec(s.bodies[i], f); err != nil {
						return err
					}
					goto next
				}
			}
			if len(s.bodies) > len(s.conds) {
				if err := st.exec(s.bodies[len(s.conds)], f); err != nil {
					return err
				}
			}
		case *forStmt:
			if err := st.execFor(s, f); err != nil {
				return err
			}
		case *setStmt:
			if err := st.execSet(s, f); err != nil {
				return err
			}
		case *macroStmt:
			f.vars[s.name] = st.macro(s, f)
		case *loopCtl:
			st.brk = s.brk
			return errLoopCtl
		}
	next:
	}
	return nil
}

func (st *state) execFor(s *forStmt, f *frame) error {
	it, err := st.eval(s.iter, f)
	if err != nil {
		return err
	}
	items, err := iterate(it)
	if err != nil {
		return err
	}
	bind := func(inner *frame, item Value) error { return assign(inner.vars, s.targets, item) }
	if s.filter != nil {
		var kept []Value
		for _, item := range items {
			inner := &frame{vars: map[string]Value{}, parent: f}
			if err := bind(inner, item); err != nil {
				return err
			}
			ok, err := st.eval(s.filter, inner)
			if err != nil {
				return err
			}
			if truthy(ok) {
				kept = append(kept, item)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return st.exec(s.orelse, f)
	}
	loop := &loopInfo{length: len(items), items: items}
	loop.cycle = func(args []Value, _ map[string]Value) (Value, error) {
		if len(args) == 0 {
			return Undefined{}, nil
		}
		return args[loop.index0%len(args)], nil
	}
	inner := &frame{vars: make(map[string]Value, 4), parent: f}
	for i, item := range items {
		loop.index0 = i
		clear(inner.vars)
		inner.vars["loop"] = loop
		if err := bind(inner, item); err != nil {
			return err
		}
		if err := st.exec(s.body, inner); err != nil {
			if errors.Is(err, errLoopCtl) {
				if st.brk {
					break
				}
				continue
			}
			return err
		}
	}
	return nil
}

func (st *state) execSet(s *setStmt, f *frame) error {
	var v Value
	if s.body != nil {
		saved := st.out
		var b strings.Builder
		st.out = &b
		err := st.exec(s.body, f)
		st.out = saved
		if err != nil {
			return err
		}
		v = b.String()
	} else {
		var err error
		if v, err = st.eval(s.value, f); err != nil {
			return err
		}
	}
	if len(s.targets) == 0 { // {% do %}
		return nil
	}
	if s.attr != "" {
		ns, ok := f.lookup(s.targets[0]).(*Namespace)
		if !ok {
			return fmt.Errorf("cannot set %s.%s: %s is not a namespace", s.targets[0], s.attr, s.targets[0])
		}
		ns.Set(s.attr, v)
		return nil
	}
	return assign(f.vars, s.targets, v)
}

// assign binds one name, or unpacks a tuple into several.
func assign(vars map[string]Value, targets []string, v Value) error {
	if len(targets) == 1 {
		vars[targets[0]] = v
		return nil
	}
	tup, ok := v.([]Value)
	if !ok || len(tup) != len(targets) {
		return fmt.Errorf("cannot unpack %s into %d names", typeName(v), len(targets))
	}
	for i, n := range targets {
		vars[n] = tup[i]
	}
	return nil
}

func (st *state) macro(s *macroStmt, def *frame) Func {
	return func(args []Value, kwargs map[string]Value) (Value, error) {
		if st.depth >= maxDepth {
			return nil, fmt.Errorf("macro %s: recursion too deep", s.name)
		}
		inner := &frame{vars: map[string]Value{}, parent: def}
		for i, p := range s.params {
			switch {
			case i < len(args):
				inner.vars[p] = args[i]
			case hasKey(kwargs, p):
				inner.vars[p] = kwargs[p]
			case s.defaults[i] != nil:
				v, err := st.eval(s.defaults[i], def)
				if err != nil {
					return nil, err
				}
				inner.vars[p] = v
			default:
				inner.vars[p] = Undefined{}
			}
		}
		saved := st.out
		var b strings.Builder
		st.out = &b
		st.depth++
		err := st.exec(s.body, inner)
		st.depth--
		st.out = saved
		if err != nil {
			return nil, err
		}
		return b.String(), nil
	}
}

func (st *state) eval(e expr, f *frame) (Value, error) {
	switch e := e.(type) {
	case *literal:
		return e.v, nil
	case *nameExpr:
		return f.lookup(e.name), nil
	case *listExpr:
		out := make([]Value, len(e.items))
		for i, x := range e.items {
			v, err := st.eval(x, f)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case *dictExpr:
		m := NewMap()
		for i := range e.keys {
			k, err := st.eval(e.keys[i], f)
			if err != nil {
				return nil, err
			}
			v, err := st.eval(e.vals[i], f)
			if err != nil {
				return nil, err
			}
			ks, ok := k.(string)
			if !ok {
				ks = str(k)
			}
			m.Set(ks, v)
		}
		return m, nil
	case *attrExpr:
		obj, err := st.eval(e.obj, f)
		if err != nil {
			return nil, err
		}
		if _, undef := obj.(Undefined); undef {
			// Jinja2's Undefined raises on any attribute (UndefinedError).
			return nil, fmt.Errorf("undefined value has no attribute %q", e.name)
		}
		return getAttr(obj, e.name), nil
	case *indexExpr:
		obj, err := st.eval(e.obj, f)
		if err != nil {
			return nil, err
		}
		if _, undef := obj.(Undefined); undef {
			return nil, fmt.Errorf("undefined value is not subscriptable")
		}
		idx, err := st.eval(e.index, f)
		if err != nil {
			return nil, err
		}
		return getItem(obj, idx)
	case *sliceExpr:
		return st.evalSlice(e, f)
	case *callExpr:
		return st.evalCall(e, f)
	case *filterExpr:
		return st.evalFilter(e, f)
	case *testExpr:
		v, err := st.eval(e.arg, f)
		if err != nil {
			return nil, err
		}
		args, err := st.evalArgs(e.args, f)
		if err != nil {
			return nil, err
		}
		ok, err := runTest(e.name, v, args)
		if err != nil {
			return nil, err
		}
		return ok != e.neg, nil
	case *unaryExpr:
		v, err := st.eval(e.x, f)
		if err != nil {
			return nil, err
		}
		switch e.op {
		case "not":
			return !truthy(v), nil
		case "-":
			switch x := v.(type) {
			case int:
				return -x, nil
			case float64:
				return -x, nil
			}
			return nil, fmt.Errorf("bad operand for unary -: %s", typeName(v))
		}
		return v, nil
	case *condExpr:
		c, err := st.eval(e.cond, f)
		if err != nil {
			return nil, err
		}
		if truthy(c) {
			return st.eval(e.yes, f)
		}
		return st.eval(e.no, f)
	case *binExpr:
		return st.evalBin(e, f)
	}
	return nil, fmt.Errorf("unknown expression %T", e)
}

func (st *state) evalArgs(es []expr, f *frame) ([]Value, error) {
	out := make([]Value, len(es))
	for i, x := range es {
		v, err := st.eval(x, f)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (st *state) evalKwargs(kws []kwarg, f *frame) (map[string]Value, error) {
	if len(kws) == 0 {
		return nil, nil
	}
	out := make(map[string]Value, len(kws))
	for _, kw := range kws {
		v, err := st.eval(kw.v, f)
		if err != nil {
			return nil, err
		}
		out[kw.name] = v
	}
	return out, nil
}

// evalCallArgs evaluates the positional and keyword arguments of a call or filter.
func (st *state) evalCallArgs(args []expr, kws []kwarg, f *frame) ([]Value, map[string]Value, error) {
	a, err := st.evalArgs(args, f)
	if err != nil {
		return nil, nil, err
	}
	k, err := st.evalKwargs(kws, f)
	return a, k, err
}

func (st *state) evalCall(e *callExpr, f *frame) (Value, error) {
	fn, err := st.eval(e.fn, f)
	if err != nil {
		return nil, err
	}
	args, kwargs, err := st.evalCallArgs(e.args, e.kwargs, f)
	if err != nil {
		return nil, err
	}
	call, ok := fn.(Func)
	if !ok {
		return nil, fmt.Errorf("%s is not callable", describe(e.fn))
	}
	return call(args, kwargs)
}

func describe(e expr) string {
	switch e := e.(type) {
	case *nameExpr:
		return e.name
	case *attrExpr:
		return describe(e.obj) + "." + e.name
	}
	return "expression"
}

func (st *state) evalFilter(e *filterExpr, f *frame) (Value, error) {
	v, err := st.eval(e.arg, f)
	if err != nil {
		return nil, err
	}
	args, kwargs, err := st.evalCallArgs(e.args, e.kwargs, f)
	if err != nil {
		return nil, err
	}
	return applyFilter(e.name, v, args, kwargs)
}

func (st *state) evalSlice(e *sliceExpr, f *frame) (Value, error) {
	obj, err := st.eval(e.obj, f)
	if err != nil {
		return nil, err
	}
	bound := func(x expr) (*int, error) {
		if x == nil {
			return nil, nil
		}
		v, err := st.eval(x, f)
		if err != nil {
			return nil, err
		}
		if v == nil {
			return nil, nil
		}
		n, ok := v.(int)
		if !ok {
			return nil, fmt.Errorf("slice indices must be integers, not %s", typeName(v))
		}
		return &n, nil
	}
	lo, err := bound(e.lo)
	if err != nil {
		return nil, err
	}
	hi, err := bound(e.hi)
	if err != nil {
		return nil, err
	}
	step, err := bound(e.step)
	if err != nil {
		return nil, err
	}
	switch x := obj.(type) {
	case []Value:
		idx, err := sliceIndexes(len(x), lo, hi, step)
		if err != nil {
			return nil, err
		}
		out := make([]Value, len(idx))
		for i, j := range idx {
			out[i] = x[j]
		}
		return out, nil
	case string:
		r := []rune(x)
		idx, err := sliceIndexes(len(r), lo, hi, step)
		if err != nil {
			return nil, err
		}
		out := make([]rune, len(idx))
		for i, j := range idx {
			out[i] = r[j]
		}
		return string(out), nil
	}
	return nil, fmt.Errorf("cannot slice %s", typeName(obj))
}

// sliceIndexes applies Python's slice rules.
func sliceIndexes(n int, lo, hi, step *int) ([]int, error) {
	st := 1
	if step != nil {
		st = *step
	}
	if st == 0 {
		return nil, fmt.Errorf("slice step cannot be zero")
	}
	clamp := func(p *int, def, lowLim, highLim int) int {
		if p == nil {
			return def
		}
		v := *p
		if v < 0 {
			v += n
			if v < lowLim {
				v = lowLim
			}
		} else if v > highLim {
			v = highLim
		}
		return v
	}
	var out []int
	if st > 0 {
		a, b := clamp(lo, 0, 0, n), clamp(hi, n, 0, n)
		for i := a; i < b; i += st {
			out = append(out, i)
		}
	} else {
		a, b := clamp(lo, n-1, -1, n-1), clamp(hi, -1, -1, n-1)
		for i := a; i > b; i += st {
			out = append(out, i)
		}
	}
	return out, nil
}

func (st *state) evalBin(e *binExpr, f *frame) (Value, error) {
	l, err := st.eval(e.l, f)
	if err != nil {
		return nil, err
	}
	switch e.op {
	case "and":
		if !truthy(l) {
			return l, nil
		}
		return st.eval(e.r, f)
	case "or":
		if truthy(l) {
			return l, nil
		}
		return st.eval(e.r, f)
	}
	r, err := st.eval(e.r, f)
	if err != nil {
		return nil, err
	}
	switch e.op {
	case "==":
		return equal(l, r), nil
	case "!=":
		return !equal(l, r), nil
	case "<", ">", "<=", ">=":
		c, err := compare(l, r)
		if err != nil {
			return nil, err
		}
		switch e.op {
		case "<":
			return c < 0, nil
		case ">":
			return c > 0, nil
		case "<=":
			return c <= 0, nil
		}
		return c >= 0, nil
	case "in", "not in":
		ok, err := contains(r, l)
		if err != nil {
			return nil, err
		}
		return ok == (e.op == "in"), nil
	case "~":
		return str(l) + str(r), nil
	case "+":
		switch x := l.(type) {
		case string:
			if y, ok := r.(string); ok {
				return x + y, nil
			}
		case []Value:
			if y, ok := r.([]Value); ok {
				out := make([]Value, 0, len(x)+len(y))
				return append(append(out, x...), y...), nil
			}
		}
	}
	return arith(e.op, l, r)
}

func arith(op string, l, r Value) (Value, error) {
	li, lInt := l.(int)
	ri, rInt := r.(int)
	if b, ok := l.(bool); ok {
		li, lInt = boolInt(b), true
	}
	if b, ok := r.(bool); ok {
		ri, rInt = boolInt(b), true
	}
	if op == "*" {
		if s, ok := l.(string); ok && rInt {
			if ri > 0 && len(s)*ri > 1<<24 {
				return nil, fmt.Errorf("string repetition too large")
			}
			return strings.Repeat(s, max(ri, 0)), nil
		}
	}
	if lInt && rInt {
		switch op {
		case "+":
			return li + ri, nil
		case "-":
			return li - ri, nil
		case "*":
			return li * ri, nil
		case "/":
			if ri == 0 {
				return nil, fmt.Errorf("division by zero")
			}
			return float64(li) / float64(ri), nil
		case "//":
			if ri == 0 {
				return nil, fmt.Errorf("division by zero")
			}
			q := li / ri
			if (li%ri != 0) && ((li < 0) != (ri < 0)) {
				q--
			}
			return q, nil
		case "%":
			if ri == 0 {
				return nil, fmt.Errorf("modulo by zero")
			}
			m := li % ri
			if m != 0 && (m < 0) != (ri < 0) {
				m += ri
			}
			return m, nil
		case "**":
			if ri >= 0 && ri <= 64 {
				out := 1
				for range ri {
					out *= li
				}
				return out, nil
			}
			return math.Pow(float64(li), float64(ri)), nil
		}
	}
	lf, okL := number(l)
	rf, okR := number(r)
	if !okL || !okR {
		return nil, fmt.Errorf("unsupported operand types for %s: %s and %s", op, typeName(l), typeName(r))
	}
	switch op {
	case "+":
		return lf + rf, nil
	case "-":
		return lf - rf, nil
	case "*":
		return lf * rf, nil
	case "/":
		if rf == 0 {
			return nil, fmt.Errorf("division by zero")
		}
		return lf / rf, nil
	case "//":
		return math.Floor(lf / rf), nil
	case "%":
		return lf - rf*math.Floor(lf/rf), nil
	case "**":
		return math.Pow(lf, rf), nil
	}
	return nil, fmt.Errorf("unknown operator %s", op)
}

func contains(container, item Value) (bool, error) {
	switch c := container.(type) {
	case string:
		s, ok := item.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' requires a string, not %s", typeName(item))
		}
		return strings.Contains(c, s), nil
	case []Value:
		for _, x := range c {
			if equal(x, item) {
				return true, nil
			}
		}
		return false, nil
	case *Map:
		s, ok := item.(string)
		if !ok {
			return false, nil
		}
		_, has := c.vals[s]
		return has, nil
	case *Namespace:
		s, _ := item.(string)
		_, has := c.vals[s]
		return has, nil
	case nil, Undefined:
		return false, fmt.Errorf("argument of type %s is not iterable", typeName(container))
	}
	return false, fmt.Errorf("argument of type %s is not iterable", typeName(container))
}

func getAttr(obj Value, name string) Value {
	switch x := obj.(type) {
	case *Map:
		if v, ok := x.vals[name]; ok {
			return v
		}
		if m := dictMethod(x, name); m != nil {
			return m
		}
		return Undefined{}
	case *Namespace:
		if v, ok := x.vals[name]; ok {
			return v
		}
		return Undefined{}
	case *loopInfo:
		return x.attr(name)
	case string:
		if m := stringMethod(x, name); m != nil {
			return m
		}
	case []Value:
		if m := listMethod(x, name); m != nil {
			return m
		}
	}
	return Undefined{}
}

func getItem(obj, idx Value) (Value, error) {
	switch x := obj.(type) {
	case *Map:
		if k, ok := idx.(string); ok {
			if v, ok := x.vals[k]; ok {
				return v, nil
			}
		}
		return Undefined{}, nil
	case *Namespace:
		k, _ := idx.(string)
		if v, ok := x.vals[k]; ok {
			return v, nil
		}
		return Undefined{}, nil
	case []Value:
		i, ok := idx.(int)
		if !ok {
			return Undefined{}, nil
		}
		if i < 0 {
			i += len(x)
		}
		if i < 0 || i >= len(x) {
			return Undefined{}, nil
		}
		return x[i], nil
	case string:
		i, ok := idx.(int)
		if !ok {
			return Undefined{}, nil
		}
		r := []rune(x)
		if i < 0 {
			i += len(r)
		}
		if i < 0 || i >= len(r) {
			return Undefined{}, nil
		}
		return string(r[i]), nil
	case *loopInfo:
		if k, ok := idx.(string); ok {
			return x.attr(k), nil
		}
	}
	if s, ok := idx.(string); ok {
		return getAttr(obj, s), nil
	}
	return Undefined{}, nil
}

func hasKey(m map[string]Value, k string) bool {
	_, ok := m[k]
	return ok
}
