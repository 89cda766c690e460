package jinja

import (
	"fmt"
	"strconv"
	"strings"
)

// Statement nodes.
type (
	stmt interface{}

	textStmt   struct{ s string }
	outputStmt struct{ e expr }
	ifStmt     struct {
		conds  []expr
		bodies [][]stmt // len(bodies) == len(conds) or +1 for else
	}
	forStmt struct {
		targets []string
		iter    expr
		filter  expr
		body    []stmt
		orelse  []stmt
	}
	setStmt struct {
		targets []string // one name or several to unpack
		attr    string   // set ns.attr = ...
		value   expr
		body    []stmt // block set
	}
	macroStmt struct {
		name     string
		params   []string
		defaults []expr // aligned with params; nil when required
		body     []stmt
	}
	loopCtl struct{ brk bool }
)

// Expression nodes.
type (
	expr interface{}

	literal  struct{ v Value }
	nameExpr struct{ name string }
	listExpr struct {
		items []expr
		tuple bool
	}
	dictExpr struct{ keys, vals []expr }
	attrExpr struct {
		obj  expr
		name string
	}
	indexExpr struct{ obj, index expr }
	sliceExpr struct{ obj, lo, hi, step expr }
	callExpr  struct {
		fn     expr
		args   []expr
		kwargs []kwarg
	}
	filterExpr struct {
		arg    expr
		name   string
		args   []expr
		kwargs []kwarg
	}
	testExpr struct {
		arg  expr
		name string
		args []expr
		neg  bool
	}
	unaryExpr struct {
		op string
		x  expr
	}
	binExpr struct {
		op   string
		l, r expr
	}
	condExpr struct{ cond, yes, no expr }
)

type kwarg struct {
	name string
	v    expr
}

type parser struct {
	segs []segment
	pos  int
}

func parseTemplate(src string) ([]stmt, error) {
	segs, err := split(src)
	if err != nil {
		return nil, err
	}
	p := &parser{segs: segs}
	body, end, err := p.block()
	if err != nil {
		return nil, err
	}
	if end != "" {
		return nil, fmt.Errorf("unexpected {%% %s %%}", end)
	}
	return body, nil
}

// block parses statements until an end/else tag, which it returns (its
// full text) without consuming further; "" at the end of input.
func (p *parser) block() ([]stmt, string, error) {
	var out []stmt
	for p.pos < len(p.segs) {
		seg := p.segs[p.pos]
		switch seg.kind {
		case tText:
			out = append(out, &textStmt{seg.text})
			p.pos++
		case tOutput:
			e, err := parseExprString(seg.text)
			if err != nil {
				return nil, "", fmt.Errorf("line %d: {{%s}}: %w", seg.line, seg.text, err)
			}
			out = append(out, &outputStmt{e})
			p.pos++
		case tBlock:
			body := strings.TrimSpace(seg.text)
			word, _, _ := strings.Cut(body, " ")
			switch word {
			case "endif", "else", "elif", "endfor", "endmacro", "endset":
				return out, body, nil
			}
			p.pos++
			s, err := p.statement(word, body, seg.line)
			if err != nil {
				return nil, "", fmt.Errorf("line %d: {%% %s %%}: %w", seg.line, body, err)
			}
			if s != nil {
				out = append(out, s)
			}
		}
	}
	return out, "", nil
}

func (p *parser) expectEnd(got string, want ...string) error {
	word, _, _ := strings.Cut(got, " ")
	for _, w := range want {
		if word == w {
			return nil
		}
	}
	if got == "" {
		return fmt.Errorf("missing {%% %s %%}", want[len(want)-1])
	}
	return fmt.Errorf("unexpected {%% %s %%}, want %s", got, strings.Join(want, " or "))
}

func (p *parser) statement(word, body string, line int) (stmt, error) {
	rest := strings.TrimSpace(strings.TrimPrefix(body, word))
	switch word {
	case "if":
		return p.ifStatement(rest)
	case "for":
		return p.forStatement(rest)
	case "set":
		return p.setStatement(rest)
	case "macro":
		return p.macroStatement(rest)
	case "break", "continue":
		return &loopCtl{brk: word == "break"}, nil
	case "do":
		e, err := parseExprString(rest)
		if err != nil {
			return nil, err
		}
		return &setStmt{value: e}, nil
	}
	return nil, fmt.Errorf("unsupported statement %q", word)
}

// ifStatement parses a {% if %} statement, rest its text after the keyword.
func (p *parser) ifStatement(rest string) (stmt, error) {
	s := &ifStmt{}
	cond := rest
	for {
		e, err := parseExprString(cond)
		if err != nil {
			return nil, err
		}
		blk, end, err := p.block()
		if err != nil {
			return nil, err
		}
		s.conds = append(s.conds, e)
		s.bodies = append(s.bodies, blk)
		if err := p.expectEnd(end, "elif", "else", "endif"); err != nil {
			return nil, err
		}
		p.pos++
		if strings.HasPrefix(end, "elif") {
			cond = strings.TrimSpace(strings.TrimPrefix(end, "elif"))
			continue
		}
		if end == "else" {
			blk, end, err := p.block()
			if err != nil {
				return nil, err
			}
			if err := p.expectEnd(end, "endif"); err != nil {
				return nil, err
			}
			p.pos++
			s.bodies = append(s.bodies, blk)
		}
		return s, nil
	}
}

// forStatement parses a {% for %} statement, rest its text after the keyword.
func (p *parser) forStatement(rest string) (stmt, error) {
	toks, err := lexExpr(rest)
	if err != nil {
		return nil, err
	}
	ep := &exprParser{toks: toks}
	s := &forStmt{}
	for {
		t := ep.next()
		if t.kind != "name" {
			return nil, fmt.Errorf("bad loop target")
		}
		s.targets = append(s.targets, t.s)
		if !ep.acceptOp(",") {
			break
		}
	}
	if !ep.acceptName("in") {
		return nil, fmt.Errorf("missing 'in'")
	}
	if s.iter, err = ep.orExpr(); err != nil {
		return nil, err
	}
	if ep.acceptName("if") {
		if s.filter, err = ep.orExpr(); err != nil {
			return nil, err
		}
	}
	if ep.peek().kind != "eof" {
		return nil, fmt.Errorf("unexpected %q", ep.peek().s)
	}
	blk, end, err := p.block()
	if err != nil {
		return nil, err
	}
	s.body = blk
	if err := p.expectEnd(end, "else", "endfor"); err != nil {
		return nil, err
	}
	p.pos++
	if end == "else" {
		blk, end, err := p.block()
		if err != nil {
			return nil, err
		}
		if err := p.expectEnd(end, "endfor"); err != nil {
			return nil, err
		}
		p.pos++
		s.orelse = blk
	}
	return s, nil
}

// setStatement parses a {% set %} statement, rest its text after the keyword.
func (p *parser) setStatement(rest string) (stmt, error) {
	lhs, rhs, hasEq := strings.Cut(rest, "=")
	s := &setStmt{}
	lhs = strings.TrimSpace(lhs)
	if !hasEq {
		lhs = rest
	}
	if name, attr, ok := strings.Cut(lhs, "."); ok {
		s.targets, s.attr = []string{strings.TrimSpace(name)}, strings.TrimSpace(attr)
	} else {
		for _, t := range strings.Split(lhs, ",") {
			s.targets = append(s.targets, strings.TrimSpace(t))
		}
	}
	for _, t := range s.targets {
		if !isIdent(t) {
			return nil, fmt.Errorf("bad assignment target %q", t)
		}
	}
	if !hasEq {
		blk, end, err := p.block()
		if err != nil {
			return nil, err
		}
		if err := p.expectEnd(end, "endset"); err != nil {
			return nil, err
		}
		p.pos++
		s.body = blk
		return s, nil
	}
	e, err := parseExprString(rhs)
	if err != nil {
		return nil, err
	}
	s.value = e
	return s, nil
}

// macroStatement parses a {% macro %} statement, rest its text after the keyword.
func (p *parser) macroStatement(rest string) (stmt, error) {
	toks, err := lexExpr(rest)
	if err != nil {
		return nil, err
	}
	ep := &exprParser{toks: toks}
	name := ep.next()
	if name.kind != "name" || !ep.acceptOp("(") {
		return nil, fmt.Errorf("bad macro signature")
	}
	m := &macroStmt{name: name.s}
	for !ep.acceptOp(")") {
		pn := ep.next()
		if pn.kind != "name" {
			return nil, fmt.Errorf("bad macro parameter")
		}
		m.params = append(m.params, pn.s)
		var def expr
		if ep.acceptOp("=") {
			if def, err = ep.expression(); err != nil {
				return nil, err
			}
		}
		m.defaults = append(m.defaults, def)
		ep.acceptOp(",")
	}
	blk, end, err := p.block()
	if err != nil {
		return nil, err
	}
	if err := p.expectEnd(end, "endmacro"); err != nil {
		return nil, err
	}
	p.pos++
	m.body = blk
	return m, nil
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func parseExprString(src string) (expr, error) {
	toks, err := lexExpr(src)
	if err != nil {
		return nil, err
	}
	ep := &exprParser{toks: toks}
	e, err := ep.expression()
	if err != nil {
		return nil, err
	}
	if ep.peek().kind != "eof" {
		return nil, fmt.Errorf("unexpected %q", ep.peek().s)
	}
	return e, nil
}

type exprParser struct {
	toks []exprTok
	pos  int
}

func (p *exprParser) peek() exprTok { return p.toks[p.pos] }
func (p *exprParser) next() exprTok {
	t := p.toks[p.pos]
	if t.kind != "eof" {
		p.pos++
	}
	return t
}
func (p *exprParser) acceptOp(op string) bool {
	if t := p.peek(); t.kind == "op" && t.s == op {
		p.pos++
		return true
	}
	return false
}
func (p *exprParser) acceptName(n string) bool {
	if t := p.peek(); t.kind == "name" && t.s == n {
		p.pos++
		return true
	}
	return false
}
func (p *exprParser) expectOp(op string) error {
	if !p.acceptOp(op) {
		return fmt.Errorf("expected %q, got %q", op, p.peek().s)
	}
	return nil
}

// expression: a conditional expression, or an unparenthesised tuple.
func (p *exprParser) expression() (expr, error) {
	e, err := p.condExpr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind == "op" && t.s == "," {
		items := []expr{e}
		for p.acceptOp(",") {
			if t := p.peek(); t.kind == "eof" || t.kind == "op" && (t.s == ")" || t.s == "]") {
				break
			}
			x, err := p.condExpr()
			if err != nil {
				return nil, err
			}
			items = append(items, x)
		}
		return &listExpr{items: items, tuple: true}, nil
	}
	return e, nil
}

func (p *exprParser) condExpr() (expr, error) {
	e, err := p.orExpr()
	if err != nil {
		return nil, err
	}
	if p.acceptName("if") {
		cond, err := p.orExpr()
		if err != nil {
			return nil, err
		}
		var no expr = &literal{Undefined{}}
		if p.acceptName("else") {
			if no, err = p.condExpr(); err != nil {
				return nil, err
			}
		}
		return &condExpr{cond: cond, yes: e, no: no}, nil
	}
	return e, nil
}

func (p *exprParser) orExpr() (expr, error) {
	l, err := p.andExpr()
	for err == nil && p.acceptName("or") {
		var r expr
		r, err = p.andExpr()
		l = &binExpr{op: "or", l: l, r: r}
	}
	return l, err
}

func (p *exprParser) andExpr() (expr, error) {
	l, err := p.notExpr()
	for err == nil && p.acceptName("and") {
		var r expr
		r, err = p.notExpr()
		l = &binExpr{op: "and", l: l, r: r}
	}
	return l, err
}

func (p *exprParser) notExpr() (expr, error) {
	if p.acceptName("not") {
		x, err := p.notExpr()
		return &unaryExpr{op: "not", x: x}, err
	}
	return p.compare()
}

func (p *exprParser) compare() (expr, error) {
	l, err := p.math1()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		var op string
		switch {
		case t.kind == "op" && (t.s == "==" || t.s == "!=" || t.s == "<" || t.s == ">" || t.s == "<=" || t.s == ">="):
			op = t.s
			p.pos++
		case t.kind == "name" && t.s == "in":
			op = "in"
			p.pos++
		case t.kind == "name" && t.s == "not" && p.toks[p.pos+1].kind == "name" && p.toks[p.pos+1].s == "in":
			op = "not in"
			p.pos += 2
		default:
			return l, nil
		}
		r, err := p.math1()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: op, l: l, r: r}
	}
}

func (p *exprParser) math1() (expr, error) {
	l, err := p.concat()
	for err == nil {
		t := p.peek()
		if t.kind != "op" || (t.s != "+" && t.s != "-") {
			break
		}
		p.pos++
		var r expr
		r, err = p.concat()
		l = &binExpr{op: t.s, l: l, r: r}
	}
	return l, err
}

func (p *exprParser) concat() (expr, error) {
	l, err := p.math2()
	for err == nil && p.acceptOp("~") {
		var r expr
		r, err = p.math2()
		l = &binExpr{op: "~", l: l, r: r}
	}
	return l, err
}

func (p *exprParser) math2() (expr, error) {
	l, err := p.pow()
	for err == nil {
		t := p.peek()
		if t.kind != "op" || (t.s != "*" && t.s != "/" && t.s != "//" && t.s != "%") {
			break
		}
		p.pos++
		var r expr
		r, err = p.pow()
		l = &binExpr{op: t.s, l: l, r: r}
	}
	return l, err
}

func (p *exprParser) pow() (expr, error) {
	l, err := p.unary()
	for err == nil && p.acceptOp("**") {
		var r expr
		r, err = p.unary()
		l = &binExpr{op: "**", l: l, r: r}
	}
	return l, err
}

func (p *exprParser) unary() (expr, error) {
	if t := p.peek(); t.kind == "op" && (t.s == "-" || t.s == "+") {
		p.pos++
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return p.filters(&unaryExpr{op: t.s, x: x})
	}
	x, err := p.primary()
	if err != nil {
		return nil, err
	}
	x, err = p.postfix(x)
	if err != nil {
		return nil, err
	}
	return p.filters(x)
}

// filters parses `| name(args)` and `is [not] test(args)` chains.
func (p *exprParser) filters(x expr) (expr, error) {
	for {
		switch {
		case p.acceptOp("|"):
			name := p.next()
			if name.kind != "name" {
				return nil, fmt.Errorf("bad filter name")
			}
			f := &filterExpr{arg: x, name: name.s}
			if p.acceptOp("(") {
				var err error
				if f.args, f.kwargs, err = p.callArgs(); err != nil {
					return nil, err
				}
			}
			x = f
		case p.acceptName("is"):
			neg := p.acceptName("not")
			name := p.next()
			if name.kind != "name" {
				return nil, fmt.Errorf("bad test name")
			}
			te := &testExpr{arg: x, name: name.s, neg: neg}
			if p.acceptOp("(") {
				var err error
				if te.args, _, err = p.callArgs(); err != nil {
					return nil, err
				}
			} else if t := p.peek(); t.kind == "str" || t.kind == "int" || t.kind == "float" || t.kind == "name" && t.s != "and" && t.s != "or" && t.s != "else" && t.s != "if" && t.s != "in" && t.s != "not" && t.s != "is" {
				arg, err := p.primary()
				if err != nil {
					return nil, err
				}
				te.args = []expr{arg}
			}
			x = te
		default:
			return x, nil
		}
	}
}

func (p *exprParser) callArgs() ([]expr, []kwarg, error) {
	var args []expr
	var kws []kwarg
	for !p.acceptOp(")") {
		if t := p.peek(); t.kind == "name" && p.toks[p.pos+1].kind == "op" && p.toks[p.pos+1].s == "=" {
			p.pos += 2
			v, err := p.condExpr()
			if err != nil {
				return nil, nil, err
			}
			kws = append(kws, kwarg{t.s, v})
		} else {
			v, err := p.condExpr()
			if err != nil {
				return nil, nil, err
			}
			args = append(args, v)
		}
		if !p.acceptOp(",") {
			if err := p.expectOp(")"); err != nil {
				return nil, nil, err
			}
			break
		}
	}
	return args, kws, nil
}

func (p *exprParser) postfix(x expr) (expr, error) {
	for {
		switch {
		case p.acceptOp("."):
			t := p.next()
			if t.kind != "name" && t.kind != "int" {
				return nil, fmt.Errorf("bad attribute")
			}
			if t.kind == "int" {
				n, _ := strconv.Atoi(t.s)
				x = &indexExpr{obj: x, index: &literal{n}}
			} else {
				x = &attrExpr{obj: x, name: t.s}
			}
		case p.acceptOp("["):
			var parts [3]expr
			n := 0
			isSlice := false
			for {
				if t := p.peek(); t.kind == "op" && (t.s == ":" || t.s == "]") {
					if t.s == ":" {
						p.pos++
						isSlice = true
						n++
						if n > 2 {
							return nil, fmt.Errorf("bad slice")
						}
						continue
					}
					p.pos++
					break
				}
				e, err := p.expression()
				if err != nil {
					return nil, err
				}
				parts[n] = e
			}
			if isSlice {
				x = &sliceExpr{obj: x, lo: parts[0], hi: parts[1], step: parts[2]}
			} else {
				if parts[0] == nil {
					return nil, fmt.Errorf("empty subscript")
				}
				x = &indexExpr{obj: x, index: parts[0]}
			}
		case p.acceptOp("("):
			args, kws, err := p.callArgs()
			if err != nil {
				return nil, err
			}
			x = &callExpr{fn: x, args: args, kwargs: kws}
		default:
			return x, nil
		}
	}
}

func (p *exprParser) primary() (expr, error) {
	t := p.next()
	switch t.kind {
	case "str":
		s := t.s
		// Adjacent string literals concatenate, as in Python.
		for p.peek().kind == "str" {
			s += p.next().s
		}
		return &literal{s}, nil
	case "int":
		n, err := strconv.Atoi(t.s)
		if err != nil {
			return nil, err
		}
		return &literal{n}, nil
	case "float":
		f, err := strconv.ParseFloat(t.s, 64)
		if err != nil {
			return nil, err
		}
		return &literal{f}, nil
	case "name":
		switch t.s {
		case "true", "True":
			return &literal{true}, nil
		case "false", "False":
			return &literal{false}, nil
		case "none", "None":
			return &literal{nil}, nil
		}
		return &nameExpr{t.s}, nil
	case "op":
		switch t.s {
		case "(":
			if p.acceptOp(")") {
				return &listExpr{tuple: true}, nil
			}
			e, err := p.expression()
			if err != nil {
				return nil, err
			}
			return e, p.expectOp(")")
		case "[":
			l := &listExpr{}
			for !p.acceptOp("]") {
				e, err := p.condExpr()
				if err != nil {
					return nil, err
				}
				l.items = append(l.items, e)
				if !p.acceptOp(",") {
					if err := p.expectOp("]"); err != nil {
						return nil, err
					}
					break
				}
			}
			return l, nil
		case "{":
			d := &dictExpr{}
			for !p.acceptOp("}") {
				k, err := p.condExpr()
				if err != nil {
					return nil, err
				}
				if err := p.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := p.condExpr()
				if err != nil {
					return nil, err
				}
				d.keys, d.vals = append(d.keys, k), append(d.vals, v)
				if !p.acceptOp(",") {
					if err := p.expectOp("}"); err != nil {
						return nil, err
					}
					break
				}
			}
			return d, nil
		}
	}
	if t.kind == "eof" {
		return nil, fmt.Errorf("unexpected end of expression")
	}
	return nil, fmt.Errorf("unexpected %q", t.s)
}
