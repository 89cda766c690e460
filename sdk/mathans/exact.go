package mathans

import (
	"math/big"
)

// Exact evaluates an expression built only from written numbers, + - * /,
// integer powers and factorials as an exact rational: distinct integers
// never compare equal under a tolerance, and 2^{2025} and 3^{2025} stay
// apart where floats overflow to the same infinity. ok is false for
// anything else (pi, roots, functions, variables) or past the size caps.
func Exact(e Expr) (r *big.Rat, ok bool) {
	budget := exactBudget
	return exact(e, &budget)
}

// exactBudget caps the bits of all intermediate values of one evaluation:
// the work stays bounded whatever the input (10^{10^{9}} is refused).
const (
	exactBudget  = 1 << 20
	maxExponent  = 100000
	maxFactorial = 2000
)

func spend(b *int, r *big.Rat) bool {
	*b -= r.Num().BitLen() + r.Denom().BitLen()
	return *b >= 0
}

func exact(e Expr, b *int) (*big.Rat, bool) {
	switch n := e.(type) {
	case lit:
		r, ok := new(big.Rat).SetString(string(n))
		if !ok || !spend(b, r) {
			return nil, false
		}
		return r, true
	case unary:
		x, ok := exact(n.x, b)
		if !ok {
			return nil, false
		}
		if n.op == '-' {
			x.Neg(x)
		}
		return x, true
	case binary:
		l, ok := exact(n.l, b)
		if !ok {
			return nil, false
		}
		r, ok := exact(n.r, b)
		if !ok {
			return nil, false
		}
		out := new(big.Rat)
		switch n.op {
		case '+':
			out.Add(l, r)
		case '-':
			out.Sub(l, r)
		case '*':
			out.Mul(l, r)
		case '/':
			if r.Sign() == 0 {
				return nil, false
			}
			out.Quo(l, r)
		case '^':
			if !r.IsInt() || !r.Num().IsInt64() {
				return nil, false
			}
			k := r.Num().Int64()
			if k > maxExponent || k < -maxExponent || (k < 0 && l.Sign() == 0) {
				return nil, false
			}
			// The result has about k times the base's bits: refused before
			// it is computed when that is over the budget.
			if bits := (l.Num().BitLen() + l.Denom().BitLen()) * int(max(k, -k)); bits > *b {
				return nil, false
			}
			neg := k < 0
			if neg {
				k = -k
			}
			kk := big.NewInt(k)
			num := new(big.Int).Exp(l.Num(), kk, nil)
			den := new(big.Int).Exp(l.Denom(), kk, nil)
			if neg {
				num, den = den, num
				if den.Sign() < 0 {
					num.Neg(num)
					den.Neg(den)
				}
			}
			out.SetFrac(num, den)
		default:
			return nil, false
		}
		if !spend(b, out) {
			return nil, false
		}
		return out, true
	case fact:
		x, ok := exact(n.x, b)
		if !ok || !x.IsInt() || x.Sign() < 0 || x.Num().Cmp(big.NewInt(maxFactorial)) > 0 {
			return nil, false
		}
		out := new(big.Int).MulRange(1, x.Num().Int64())
		if out.Sign() == 0 {
			out.SetInt64(1)
		}
		r := new(big.Rat).SetInt(out)
		if !spend(b, r) {
			return nil, false
		}
		return r, true
	}
	return nil, false
}
