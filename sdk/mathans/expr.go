package mathans

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Expr is a parsed arithmetic expression over real numbers.
type Expr interface {
	Eval(vars map[string]float64) float64
}

type (
	num    float64 // a constant with no exact value (pi, e, infinity)
	lit    string  // a number as written: exact (a decimal or scientific literal)
	varRef string
	unary  struct {
		op byte
		x  Expr
	}
	binary struct {
		op   byte
		l, r Expr
	}
	call struct {
		fn string
		x  Expr
	}
	root struct{ n, x Expr }
	fact struct{ x Expr }
)

func (n num) Eval(map[string]float64) float64 { return float64(n) }
func (l lit) Eval(map[string]float64) float64 {
	v, _ := strconv.ParseFloat(string(l), 64)
	return v
}
func (v varRef) Eval(vars map[string]float64) float64 {
	if x, ok := vars[string(v)]; ok {
		return x
	}
	return math.NaN()
}
func (u unary) Eval(v map[string]float64) float64 {
	x := u.x.Eval(v)
	if u.op == '-' {
		return -x
	}
	return x
}
func (b binary) Eval(v map[string]float64) float64 {
	l, r := b.l.Eval(v), b.r.Eval(v)
	switch b.op {
	case '+':
		return l + r
	case '-':
		return l - r
	case '*':
		return l * r
	case '/':
		return l / r
	case '^':
		return math.Pow(l, r)
	}
	return math.NaN()
}
func (c call) Eval(v map[string]float64) float64 {
	x := c.x.Eval(v)
	switch c.fn {
	case "sqrt":
		return math.Sqrt(x)
	case "sin":
		return math.Sin(x)
	case "cos":
		return math.Cos(x)
	case "tan":
		return math.Tan(x)
	case "cot":
		return 1 / math.Tan(x)
	case "sec":
		return 1 / math.Cos(x)
	case "csc":
		return 1 / math.Sin(x)
	case "arcsin":
		return math.Asin(x)
	case "arccos":
		return math.Acos(x)
	case "arctan":
		return math.Atan(x)
	case "ln":
		return math.Log(x)
	case "log":
		return math.Log10(x)
	case "exp":
		return math.Exp(x)
	case "abs":
		return math.Abs(x)
	}
	return math.NaN()
}
func (r root) Eval(v map[string]float64) float64 {
	n, x := r.n.Eval(v), r.x.Eval(v)
	if x < 0 && math.Mod(n, 2) == 1 {
		return -math.Pow(-x, 1/n)
	}
	return math.Pow(x, 1/n)
}
func (f fact) Eval(v map[string]float64) float64 {
	x := f.x.Eval(v)
	if x < 0 || x != math.Trunc(x) || x > 170 {
		return math.NaN()
	}
	return math.Gamma(x + 1)
}

// token kinds
const (
	tNum = iota
	tIdent
	tCmd
	tOp
	tEOF
)

type token struct {
	kind int
	s    string
	v    float64
}

var funcs = map[string]bool{"sqrt": true, "sin": true, "cos": true, "tan": true, "cot": true, "sec": true, "csc": true,
	"arcsin": true, "arccos": true, "arctan": true, "ln": true, "log": true, "exp": true}

func lex(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			j := i
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
				j++
			}
			// scientific notation: 1.5e3, 2E-4
			if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
				k := j + 1
				if k < len(s) && (s[k] == '+' || s[k] == '-') {
					k++
				}
				if k < len(s) && s[k] >= '0' && s[k] <= '9' {
					for k < len(s) && s[k] >= '0' && s[k] <= '9' {
						k++
					}
					j = k
				}
			}
			v, err := strconv.ParseFloat(s[i:j], 64)
			if err != nil {
				return nil, fmt.Errorf("bad number %q", s[i:j])
			}
			out = append(out, token{kind: tNum, s: s[i:j], v: v})
			i = j
		case c == '\\':
			j := i + 1
			for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z') {
				j++
			}
			if j == i+1 {
				if j < len(s) && (s[j] == '{' || s[j] == '}') {
					out = append(out, token{kind: tOp, s: s[j : j+1]})
					i = j + 1
					continue
				}
				return nil, fmt.Errorf("bad command at %d", i)
			}
			out = append(out, token{kind: tCmd, s: s[i+1 : j]})
			i = j
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z') {
				j++
			}
			word := s[i:j]
			if funcs[word] {
				out = append(out, token{kind: tCmd, s: word})
			} else {
				// letters multiply: "xy" is x*y
				for _, r := range word {
					out = append(out, token{kind: tIdent, s: string(r)})
				}
			}
			i = j
		case strings.IndexByte("+-*/^()[]{}!|_", c) >= 0:
			out = append(out, token{kind: tOp, s: s[i : i+1]})
			i++
		default:
			return nil, fmt.Errorf("unexpected %q", c)
		}
	}
	return append(out, token{kind: tEOF}), nil
}

type parser struct {
	toks []token
	pos  int
	// depth bounds recursion so adversarial input cannot blow the stack.
	depth int
}

var errTooDeep = errors.New("expression nests too deeply")

// ParseExpr parses a LaTeX or plain arithmetic expression.
func ParseExpr(s string) (Expr, error) {
	if len(s) > 2000 {
		return nil, errors.New("expression too long")
	}
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	e, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.peek().kind != tEOF {
		return nil, fmt.Errorf("unexpected %q", p.peek().s)
	}
	return e, nil
}

func (p *parser) peek() token { return p.toks[p.pos] }
func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tEOF {
		p.pos++
	}
	return t
}
func (p *parser) isOp(s string) bool { t := p.peek(); return t.kind == tOp && t.s == s }

func (p *parser) expect(s string) error {
	if !p.isOp(s) {
		return fmt.Errorf("expected %q, got %q", s, p.peek().s)
	}
	p.next()
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > 200 {
		return errTooDeep
	}
	return nil
}

func (p *parser) expr() (Expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	l, err := p.term()
	if err != nil {
		return nil, err
	}
	for p.isOp("+") || p.isOp("-") {
		op := p.next().s[0]
		r, err := p.term()
		if err != nil {
			return nil, err
		}
		l = binary{op, l, r}
	}
	return l, nil
}

func (p *parser) startsPrimary() bool {
	t := p.peek()
	switch t.kind {
	case tNum, tIdent:
		return true
	case tCmd:
		switch t.s {
		case "cdot", "times", "div":
			return false
		}
		return true
	case tOp:
		return t.s == "(" || t.s == "{" || t.s == "["
	}
	return false
}

func (p *parser) term() (Expr, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		var op byte
		switch {
		case t.kind == tOp && (t.s == "*" || t.s == "/"):
			op = t.s[0]
			p.next()
		case t.kind == tCmd && (t.s == "cdot" || t.s == "times"):
			op = '*'
			p.next()
		case t.kind == tCmd && t.s == "div":
			op = '/'
			p.next()
		case p.startsPrimary():
			op = '*' // implicit multiplication: 2x, 2\pi, x(y+1)
		default:
			return l, nil
		}
		r, err := p.unary()
		if err != nil {
			return nil, err
		}
		l = binary{op, l, r}
	}
}

func (p *parser) unary() (Expr, error) {
	if p.isOp("-") || p.isOp("+") {
		op := p.next().s[0]
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return unary{op, x}, nil
	}
	return p.power()
}

func (p *parser) power() (Expr, error) {
	b, err := p.postfix()
	if err != nil {
		return nil, err
	}
	if p.isOp("^") {
		p.next()
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		var e Expr
		if p.isOp("-") || p.isOp("+") {
			e, err = p.unary()
		} else {
			e, err = p.power()
		}
		if err != nil {
			return nil, err
		}
		return binary{'^', b, e}, nil
	}
	return b, nil
}

func (p *parser) postfix() (Expr, error) {
	x, err := p.primary()
	if err != nil {
		return nil, err
	}
	for p.isOp("!") {
		p.next()
		x = fact{x}
	}
	return x, nil
}

// greek are the Greek letters read as variables.
var greek = map[string]bool{"alpha": true, "beta": true, "gamma": true, "theta": true, "phi": true, "lambda": true,
	"mu": true, "sigma": true, "omega": true, "tau": true, "rho": true}

// startsFactor: the next token is a number, a letter or a Greek letter,
// which juxtaposed multiply.
func (p *parser) startsFactor() bool {
	t := p.peek()
	switch t.kind {
	case tNum, tIdent:
		return true
	case tCmd:
		return greek[t.s] || t.s == "pi"
	}
	return false
}

// arg parses a LaTeX argument: a brace group, or a single digit/letter (\frac12).
func (p *parser) arg() (Expr, error) {
	if p.isOp("{") {
		p.next()
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		return e, p.expect("}")
	}
	t := p.next()
	switch t.kind {
	case tNum:
		// \frac12: one digit per argument
		if len(t.s) > 1 && !strings.Contains(t.s, ".") {
			rest := t.s[1:]
			rv, _ := strconv.ParseFloat(rest, 64)
			p.pos--
			p.toks[p.pos] = token{kind: tNum, s: rest, v: rv}
			return lit(t.s[:1]), nil
		}
		return lit(t.s), nil
	case tIdent:
		return varRef(t.s), nil
	}
	return nil, fmt.Errorf("expected an argument, got %q", t.s)
}

func (p *parser) primary() (Expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	t := p.next()
	switch t.kind {
	case tNum:
		return lit(t.s), nil
	case tIdent:
		if t.s == "e" {
			return num(math.E), nil
		}
		// subscripted variable: x_1, a_{n}
		if p.isOp("_") {
			p.next()
			sub := p.next()
			if sub.kind == tOp && sub.s == "{" {
				var b strings.Builder
				for !p.isOp("}") && p.peek().kind != tEOF {
					b.WriteString(p.next().s)
				}
				if err := p.expect("}"); err != nil {
					return nil, err
				}
				return varRef(t.s + "_" + b.String()), nil
			}
			return varRef(t.s + "_" + sub.s), nil
		}
		return varRef(t.s), nil
	case tOp:
		switch t.s {
		case "(", "[":
			closing := map[string]string{"(": ")", "[": "]"}[t.s]
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			return e, p.expect(closing)
		case "{":
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			return e, p.expect("}")
		case "|":
			e, err := p.expr()
			if err != nil {
				return nil, err
			}
			return call{"abs", e}, p.expect("|")
		}
	case tCmd:
		switch t.s {
		case "pi":
			return num(math.Pi), nil
		case "infty":
			return num(math.Inf(1)), nil
		case "frac":
			n, err := p.arg()
			if err != nil {
				return nil, err
			}
			d, err := p.arg()
			if err != nil {
				return nil, err
			}
			return binary{'/', n, d}, nil
		case "sqrt":
			if p.isOp("[") {
				p.next()
				n, err := p.expr()
				if err != nil {
					return nil, err
				}
				if err := p.expect("]"); err != nil {
					return nil, err
				}
				x, err := p.arg()
				if err != nil {
					return nil, err
				}
				return root{n, x}, nil
			}
			if p.isOp("{") || p.peek().kind == tNum || p.peek().kind == tIdent {
				x, err := p.arg()
				if err != nil {
					return nil, err
				}
				return call{"sqrt", x}, nil
			}
			x, err := p.primary()
			if err != nil {
				return nil, err
			}
			return call{"sqrt", x}, nil
		default:
			if greek[t.s] {
				return varRef(t.s), nil
			}
			if funcs[t.s] {
				// \log_2 8, \log_{b} x: a logarithm to a base.
				var base Expr
				if t.s == "log" && p.isOp("_") {
					p.next()
					b, err := p.arg()
					if err != nil {
						return nil, err
					}
					base = b
				}
				// \sin^2 x
				var pow Expr
				if p.isOp("^") {
					p.next()
					e, err := p.arg()
					if err != nil {
						return nil, err
					}
					pow = e
				}
				parens := p.isOp("(")
				x, err := p.power()
				if err != nil {
					return nil, err
				}
				// Without parentheses the argument is the whole product of
				// numbers and letters that follows: \sin 2x is sin(2x), and
				// \sin x \cos x stops at the next function.
				for !parens && p.startsFactor() {
					y, err := p.power()
					if err != nil {
						return nil, err
					}
					x = binary{'*', x, y}
				}
				var e Expr = call{t.s, x}
				if base != nil {
					e = binary{'/', call{"ln", x}, call{"ln", base}}
				}
				if pow != nil {
					e = binary{'^', e, pow}
				}
				return e, nil
			}
		}
		return nil, fmt.Errorf("unsupported command \\%s", t.s)
	}
	return nil, fmt.Errorf("unexpected %q", t.s)
}

// Vars lists the free variables of e.
func Vars(e Expr) map[string]bool {
	out := map[string]bool{}
	var walk func(Expr)
	walk = func(e Expr) {
		switch x := e.(type) {
		case varRef:
			out[string(x)] = true
		case unary:
			walk(x.x)
		case binary:
			walk(x.l)
			walk(x.r)
		case call:
			walk(x.x)
		case root:
			walk(x.n)
			walk(x.x)
		case fact:
			walk(x.x)
		}
	}
	walk(e)
	return out
}
