package mathans

import (
	"context"
	"errors"
	"math"
	"math/big"
	"math/rand"
	"sort"
	"strings"
)

// Equivalent reports whether a predicted answer equals the reference:
// the same after normalisation, the same number, the same expression at
// random points, or the same tuple, interval or set element by element.
// An answer the grader cannot decide within its work budget is not equal.
func Equivalent(pred, gold string) bool {
	eq, _ := EquivalentContext(context.Background(), pred, gold)
	return eq
}

// ErrBudget: the comparison needed more work than one evaluation may spend.
var ErrBudget = errors.New("mathans: comparison over its work budget")

// EquivalentContext is Equivalent that stops when ctx ends (returning
// ctx's error) and reports ErrBudget when the comparison ran out of work
// budget; the verdict is then false.
func EquivalentContext(ctx context.Context, pred, gold string) (bool, error) {
	return equivalent(ctx, pred, gold, workBudget)
}

func equivalent(ctx context.Context, pred, gold string, budget int) (bool, error) {
	// No answer is this long; a response that is costs nothing to refuse.
	if len(pred) > maxAnswer || len(gold) > maxAnswer {
		return false, nil
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	a, b := Normalize(pred), Normalize(gold)
	if a == "" || b == "" {
		return false, nil
	}
	m := &meter{ctx: ctx, left: budget}
	eq := equalNorm(a, b, 0, m)
	if m.err != nil {
		return false, m.err
	}
	return eq, nil
}

// maxAnswer caps the length of an answer Equivalent looks at.
const maxAnswer = 16 << 10

// workBudget bounds one comparison's work, counted deterministically (bytes
// compared and parsed, expression nodes evaluated) so that a verdict never
// depends on the machine's load. It allows any answer of ordinary size (a
// set of any size against a permutation spelt the same way, 100 elements
// spelt differently) and stops crafted ones (thousands of elements
// compared pairwise) after about 25 ms of one core.
const workBudget = 2 << 20

// compareCost is the fixed cost of one element comparison in work units
// (about 10 ns each on a 2020s core: a comparison of two short numbers,
// parses included, takes about 3 µs).
const compareCost = 256

// meter counts the work of one comparison and watches its context.
type meter struct {
	ctx  context.Context
	left int
	err  error
}

// spend charges n units; false once the budget is gone or ctx has ended.
func (m *meter) spend(n int) bool {
	if m.err != nil {
		return false
	}
	m.left -= n
	if m.left < 0 {
		m.err = ErrBudget
		return false
	}
	if err := m.ctx.Err(); err != nil {
		m.err = err
		return false
	}
	return true
}

func squash(s string) string { return strings.ToLower(strings.ReplaceAll(s, " ", "")) }

func equalNorm(a, b string, depth int, m *meter) bool {
	if depth > 8 || !m.spend(len(a)+len(b)+compareCost) {
		return false
	}
	if squash(a) == squash(b) {
		return true
	}
	// Percentages: "50%" matches 50 and 0.5.
	pa, aPct := strings.CutSuffix(a, "%")
	pb, bPct := strings.CutSuffix(b, "%")
	if aPct || bPct {
		pa, pb = strings.TrimSpace(pa), strings.TrimSpace(pb)
		if equalValue(pa, pb, m) {
			return true
		}
		if aPct && !bPct {
			return equalPercent(pa, pb)
		}
		if bPct && !aPct {
			return equalPercent(pb, pa)
		}
		return false
	}
	if ea, ok := equation(a); ok {
		if eb, ok := equation(b); ok {
			return equalEquations(ea, eb, m)
		}
	}
	if ua, ok := splitUnion(a); ok {
		ub, ok := splitUnion(b)
		return ok && equalLists(ua, ub, true, depth, m)
	}
	la, ka := structure(a)
	lb, kb := structure(b)
	// A set and a bare list of answers ("-2, 2" and "\{-2, 2\}") are both
	// unordered collections.
	if ka == kindList && kb == kindSet || ka == kindSet && kb == kindList {
		ka, kb = kindSet, kindSet
	}
	if ka != kb {
		return false
	}
	switch ka {
	case kindSet, kindList:
		return equalLists(la, lb, false, depth, m)
	case kindTuple:
		return bracketsMatch(a, b) && equalLists(la, lb, true, depth, m)
	}
	return equalValue(a, b, m)
}

const (
	kindScalar = iota
	kindTuple  // (a, b) or [a, b): order and brackets matter
	kindSet    // \{a, b\}
	kindList   // a, b: solutions, order does not matter
)

func structure(s string) ([]string, int) {
	if strings.HasPrefix(s, `\{`) && strings.HasSuffix(s, `\}`) {
		return splitTop(s[2 : len(s)-2]), kindSet
	}
	// "{1, 2, 3}": braces that group a list in LaTeX, read as a set (as
	// Math-Verify reads them).
	if len(s) >= 2 && s[0] == '{' && s[len(s)-1] == '}' && balanced(s[1:len(s)-1]) {
		if parts := splitTop(s[1 : len(s)-1]); len(parts) > 1 {
			return parts, kindSet
		}
	}
	if len(s) >= 2 && strings.ContainsRune("([", rune(s[0])) && strings.ContainsRune(")]", rune(s[len(s)-1])) {
		inner := s[1 : len(s)-1]
		if parts := splitTop(inner); len(parts) > 1 && balanced(inner) {
			return parts, kindTuple
		}
	}
	if parts := splitTop(s); len(parts) > 1 {
		return parts, kindList
	}
	return nil, kindScalar
}

func bracketsMatch(a, b string) bool {
	return a[0] == b[0] && a[len(a)-1] == b[len(b)-1]
}

func splitUnion(s string) ([]string, bool) {
	if !strings.Contains(s, `\cup`) {
		return nil, false
	}
	parts := strings.Split(s, `\cup`)
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts, true
}

// balanced reports whether brackets in s never close below depth zero.
func balanced(s string) bool {
	d := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{':
			d++
		case ')', ']', '}':
			d--
			if d < 0 {
				return false
			}
		}
	}
	return d == 0
}

// splitTop splits on commas outside brackets; with none, on semicolons
// ("-12;-11;-10", "(0;-2;6)": lists as some datasets write them).
func splitTop(s string) []string {
	if out := splitTopOn(s, ','); len(out) > 1 {
		return out
	}
	return splitTopOn(s, ';')
}

func splitTopOn(s string, sep byte) []string {
	var out []string
	d, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{':
			d++
		case ')', ']', '}':
			d--
		case sep:
			if d == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

func equalLists(a, b []string, ordered bool, depth int, m *meter) bool {
	if !ordered {
		// Against a set (no element twice), an element written twice is one
		// element; two lists with repeats are multisets (roots counted with
		// their multiplicity: "1, 1, 2" is not "1, 2, 2").
		if da, db := distinct(a), distinct(b); len(da) == len(a) || len(db) == len(b) {
			a, b = da, db
		}
	}
	if len(a) != len(b) {
		return false
	}
	if ordered {
		for i := range a {
			if !equalNorm(a[i], b[i], depth+1, m) {
				return false
			}
		}
		return true
	}
	// The same elements spelt the same way in another order: n log n, where
	// the pairwise search below is quadratic.
	if sameMultiset(a, b) {
		return m.spend(len(a) * compareCost)
	}
	used := make([]bool, len(b))
	for _, x := range a {
		found := false
		for j, y := range b {
			if !used[j] && equalNorm(x, y, depth+1, m) {
				used[j], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// distinct is xs with each element (as spelt, spaces aside) once.
func distinct(xs []string) []string {
	seen := make(map[string]bool, len(xs))
	out := xs[:0:0]
	for _, x := range xs {
		if k := squash(x); !seen[k] {
			seen[k] = true
			out = append(out, x)
		}
	}
	return out
}

func sameMultiset(a, b []string) bool {
	sa, sb := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		sa[i], sb[i] = squash(a[i]), squash(b[i])
	}
	sort.Strings(sa)
	sort.Strings(sb)
	for i := range sa {
		if sa[i] != sb[i] {
			return false
		}
	}
	return true
}

// close compares values that have no exact form (pi, roots, functions,
// expressions at sample points): a relative tolerance for float rounding,
// an absolute one only for float noise around zero (sin(pi)). Infinities
// and overflows are never equal to anything: an answer that overflows a
// float is not known to match.
func close(a, b float64) bool {
	if math.IsInf(a, 0) || math.IsInf(b, 0) || math.IsNaN(a) || math.IsNaN(b) {
		return false
	}
	d := math.Abs(a - b)
	return d <= 1e-12 || d <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

// equalPercent reports whether pct percent is other ("50" and "0.5").
func equalPercent(pct, other string) bool {
	ea, err1 := ParseExpr(pct)
	eb, err2 := ParseExpr(other)
	if err1 != nil || err2 != nil || len(Vars(ea)) > 0 || len(Vars(eb)) > 0 {
		return false
	}
	if xa, ok := Exact(ea); ok {
		if xb, ok := Exact(eb); ok {
			return xa.Mul(xa, big.NewRat(1, 100)).Cmp(xb) == 0
		}
	}
	return close(ea.Eval(nil)/100, eb.Eval(nil))
}

// equalValue compares two scalar answers as expressions: numbers as
// equalNumbers does, expressions with variables at fixed pseudo-random points.
func equalValue(a, b string, m *meter) bool {
	ea, err := ParseExpr(a)
	if err != nil {
		return false
	}
	eb, err := ParseExpr(b)
	if err != nil {
		return false
	}
	va, vb := Vars(ea), Vars(eb)
	if len(va) == 0 && len(vb) == 0 {
		return equalNumbers(ea, eb)
	}
	names := make([]string, 0, len(va)+len(vb))
	for v := range va {
		names = append(names, v)
	}
	for v := range vb {
		if !va[v] {
			names = append(names, v)
		}
	}
	sort.Strings(names)
	// A fixed seed keeps scoring deterministic across runs and hosts.
	rng := rand.New(rand.NewSource(20240607))
	checked := 0
	for try := 0; try < 40 && checked < 6; try++ {
		if !m.spend(len(a) + len(b)) {
			return false
		}
		vars := make(map[string]float64, len(names))
		for _, n := range names {
			vars[n] = 0.3 + rng.Float64()*2.7
		}
		x, y := ea.Eval(vars), eb.Eval(vars)
		if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) {
			continue
		}
		if !close(x, y) {
			return false
		}
		checked++
	}
	return checked >= 3
}

// roundRat rounds r to k decimal places, halves away from zero.
func roundRat(r *big.Rat, k int) *big.Rat {
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(k)), nil)
	x := new(big.Rat).Mul(r, new(big.Rat).SetInt(scale))
	num, den := new(big.Int).Set(x.Num()), x.Denom()
	neg := num.Sign() < 0
	num.Abs(num)
	q, m := new(big.Int).QuoRem(num, den, new(big.Int))
	if new(big.Int).Mul(m, big.NewInt(2)).Cmp(den) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	if neg {
		q.Neg(q)
	}
	return new(big.Rat).SetFrac(q, scale)
}

// equalNumbers compares two answers without variables as Math-Verify
// does. Written numbers with finite decimal expansions compare exactly:
// no tolerance between distinct integers or decimals (1000001 is not
// 1000000, 6.626e-34 is not 0), whatever their size (2^{2025} is not
// 3^{2025}). Where one side has no finite decimal form (1/3, sqrt 2, pi)
// both are rounded to six decimal places (0.333333 stands for 1/3,
// 0.33333 does not). Infinities and overflows are equal to nothing.
func equalNumbers(ea, eb Expr) bool {
	xa, okA := Exact(ea)
	xb, okB := Exact(eb)
	if okA && okB {
		if xa.Cmp(xb) == 0 {
			return true
		}
		if terminating(xa) && terminating(xb) {
			return false
		}
		return roundRat(xa, 6).Cmp(roundRat(xb, 6)) == 0
	}
	x, y := ea.Eval(nil), eb.Eval(nil)
	if math.IsInf(x, 0) || math.IsInf(y, 0) || math.IsNaN(x) || math.IsNaN(y) {
		return false
	}
	if !okA {
		xa = new(big.Rat).SetFloat64(x)
	}
	if !okB {
		xb = new(big.Rat).SetFloat64(y)
	}
	if roundRat(xa, 6).Cmp(roundRat(xb, 6)) == 0 {
		return true
	}
	// Past about 1e9 a float has fewer than six decimals to round: there
	// only the float's own precision is asked for.
	return math.Max(math.Abs(x), math.Abs(y)) >= 1e9 && math.Abs(x-y) <= 1e-14*math.Max(math.Abs(x), math.Abs(y))
}

// terminating reports whether r has a finite decimal expansion (its
// denominator has no prime factor but 2 and 5).
func terminating(r *big.Rat) bool {
	d := new(big.Int).Set(r.Denom())
	for _, p := range []int64{2, 5} {
		bp := big.NewInt(p)
		m := new(big.Int)
		for {
			q, rem := new(big.Int).QuoRem(d, bp, m)
			if rem.Sign() != 0 {
				break
			}
			d = q
		}
	}
	return d.Cmp(big.NewInt(1)) == 0
}

// equation parses "L = R" (one "=", nothing else relational) as L - R.
func equation(s string) (Expr, bool) {
	if strings.Count(s, "=") != 1 || strings.ContainsAny(s, "<>,") || strings.Contains(s, `\leq`) || strings.Contains(s, `\geq`) {
		return nil, false
	}
	l, r, _ := strings.Cut(s, "=")
	el, err := ParseExpr(strings.TrimSpace(l))
	if err != nil {
		return nil, false
	}
	er, err := ParseExpr(strings.TrimSpace(r))
	if err != nil {
		return nil, false
	}
	return binary{'-', el, er}, true
}

// equalEquations: two equations are the same when one's L - R is a nonzero
// constant multiple of the other's (2x+3y=6 and -4x-6y=-12), checked at
// fixed pseudo-random points.
func equalEquations(fa, fb Expr, m *meter) bool {
	names := map[string]bool{}
	for v := range Vars(fa) {
		names[v] = true
	}
	for v := range Vars(fb) {
		names[v] = true
	}
	if len(names) == 0 {
		return false
	}
	keys := make([]string, 0, len(names))
	for v := range names {
		keys = append(keys, v)
	}
	sort.Strings(keys)
	rng := rand.New(rand.NewSource(20240607))
	ratio, checked := 0.0, 0
	for try := 0; try < 40 && checked < 6; try++ {
		if !m.spend(256) {
			return false
		}
		vars := make(map[string]float64, len(keys))
		for _, n := range keys {
			vars[n] = 0.3 + rng.Float64()*2.7
		}
		x, y := fa.Eval(vars), fb.Eval(vars)
		if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) || math.Abs(y) < 1e-9 {
			continue
		}
		k := x / y
		if checked == 0 {
			if math.Abs(k) < 1e-12 {
				return false
			}
			ratio = k
		} else if !close(k, ratio) {
			return false
		}
		checked++
	}
	return checked >= 3
}

// EqualNumbers compares two written numbers (no variables) by the rules of
// equalNumbers; false when either is not one.
func EqualNumbers(a, b string) bool {
	ea, err := ParseExpr(a)
	if err != nil || len(Vars(ea)) > 0 {
		return false
	}
	eb, err := ParseExpr(b)
	if err != nil || len(Vars(eb)) > 0 {
		return false
	}
	return equalNumbers(ea, eb)
}
