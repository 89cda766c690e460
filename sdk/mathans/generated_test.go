package mathans

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// generatedCorpus: thousands of pairs over every kind of answer the
// category corpus names, right and wrong, from a fixed seed.
func generatedCorpus() []pair {
	g := &gen{rng: rand.New(rand.NewSource(1414))}
	for range 60 {
		g.equations()
		g.planes()
		g.tuples()
		g.sets()
		g.intervals()
		g.inequalities()
		g.percents()
		g.matrices()
		g.wrappers()
		g.mixed()
		g.polynomials()
		g.roots()
		g.logsAndTrig()
	}
	return g.ps
}

type gen struct {
	rng *rand.Rand
	ps  []pair
}

func (g *gen) add(pred, gold string) { g.ps = append(g.ps, pair{Pred: pred, Gold: gold}) }

// n is a random integer in [lo, hi].
func (g *gen) n(lo, hi int) int { return lo + g.rng.Intn(hi-lo+1) }

// other is an integer in [lo, hi] different from v.
func (g *gen) other(v, lo, hi int) int {
	for {
		if w := g.n(lo, hi); w != v {
			return w
		}
	}
}

func (g *gen) pick(ss ...string) string { return ss[g.rng.Intn(len(ss))] }

// linear writes sum c_i v_i as LaTeX ("2x - y + 3z"), skipping zero terms.
func linear(cs []int, vs []string) string {
	var b strings.Builder
	for i, c := range cs {
		if c == 0 {
			continue
		}
		switch {
		case b.Len() == 0 && c < 0:
			b.WriteString("-")
		case b.Len() > 0 && c < 0:
			b.WriteString(" - ")
		case b.Len() > 0:
			b.WriteString(" + ")
		}
		if a := abs(c); a != 1 {
			fmt.Fprint(&b, a)
		}
		b.WriteString(vs[i])
	}
	if b.Len() == 0 {
		return "0"
	}
	return b.String()
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func (g *gen) equations() {
	v := g.pick("x", "y", "a", "k", "n", "t")
	x := g.n(-50, 50)
	w := g.other(x, -50, 50)
	g.add(fmt.Sprintf("%s=%d", v, x), fmt.Sprint(x))
	g.add(fmt.Sprintf("%s=%d", v, w), fmt.Sprint(x))
	g.add(fmt.Sprintf("%d=%s", x, v), fmt.Sprintf("%s=%d", v, x))
	g.add(fmt.Sprintf("%d=%s", w, v), fmt.Sprintf("%s=%d", v, x))
}

func (g *gen) planes() {
	vs := []string{"x", "y", "z"}
	cs := []int{g.n(1, 9), g.n(-9, 9), g.n(-9, 9)}
	d := g.n(-20, 20)
	k := []int{-1, 2, -2, 3}[g.rng.Intn(4)]
	ks := []int{k * cs[0], k * cs[1], k * cs[2]}
	gold := fmt.Sprintf("%s = %d", linear(cs, vs), d)
	g.add(fmt.Sprintf("%s = %d", linear(ks, vs), k*d), gold)
	g.add(fmt.Sprintf("%s = %d", linear(ks, vs), k*(d+1)), gold)
	g.add(fmt.Sprintf("%s = %d", linear(cs, vs), d), gold)
}

func (g *gen) tuples() {
	a, b := g.n(-30, 30), g.n(-30, 30)
	if a == b {
		b++
	}
	gold := fmt.Sprintf("(%d, %d)", a, b)
	g.add(fmt.Sprintf("(%d,%d)", a, b), gold)
	g.add(fmt.Sprintf("(%d, %d)", b, a), gold)
	g.add(fmt.Sprintf("(p, q) = (%d, %d)", a, b), gold)
	g.add(fmt.Sprintf("(p, q) = (%d, %d)", a, b+1), gold)
	g.add(fmt.Sprintf("x=%d, y=%d", a, b), gold)
	g.add(fmt.Sprintf("x=%d, y=%d", b, a), gold)
	c := g.n(-30, 30)
	g.add(fmt.Sprintf("(%d, %d, %d)", a, b, c), fmt.Sprintf("(%d,%d,%d)", a, b, c))
	g.add(fmt.Sprintf("(%d, %d, %d)", a, b, c+1), fmt.Sprintf("(%d,%d,%d)", a, b, c))
}

func (g *gen) sets() {
	k := g.n(2, 5)
	xs := g.rng.Perm(40)[:k]
	els := make([]string, k)
	for i, x := range xs {
		els[i] = fmt.Sprint(x - 20)
	}
	gold := `\{` + strings.Join(els, ", ") + `\}`
	sh := append([]string(nil), els...)
	g.rng.Shuffle(len(sh), func(i, j int) { sh[i], sh[j] = sh[j], sh[i] })
	g.add(`\{`+strings.Join(sh, ",")+`\}`, gold)
	g.add(strings.Join(sh, ", "), gold)
	wrong := append([]string(nil), sh...)
	wrong[0] = fmt.Sprint(xs[0] + 21)
	g.add(`\{`+strings.Join(wrong, ",")+`\}`, gold)
	g.add(`\{`+strings.Join(sh[1:], ",")+`\}`, gold)
	a := g.n(1, 3000)
	g.add(fmt.Sprintf(`\pm %d`, a), fmt.Sprintf(`\{-%d, %d\}`, a, a))
	g.add(fmt.Sprintf(`%d, -%d`, a, a), fmt.Sprintf(`\pm %d`, a))
	g.add(fmt.Sprintf(`\pm %d`, a+1), fmt.Sprintf(`\{-%d, %d\}`, a, a))
	g.add(fmt.Sprintf(`%d`, a), fmt.Sprintf(`\pm %d`, a))
	b := g.other(a, 1, 3000)
	g.add(fmt.Sprintf(`%d \text{ and } %d`, a, b), fmt.Sprintf(`%d, %d`, b, a))
	g.add(fmt.Sprintf(`%d \text{ and } %d`, a, b+1), fmt.Sprintf(`%d, %d`, b, a))
}

// bound writes an interval endpoint, infinite ones as \infty.
func (g *gen) intervals() {
	a := g.n(-100, 100)
	b := a + g.n(1, 100)
	lo, hi := g.pick("(", "["), g.pick(")", "]")
	iv := fmt.Sprintf("%s%d, %d%s", lo, a, b, hi)
	lop, hip := map[string]string{"(": "<", "[": `\leq`}[lo], map[string]string{")": "<", "]": `\leq`}[hi]
	v := g.pick("x", "a", "t")
	g.add(fmt.Sprintf("%d %s %s %s %d", a, lop, v, hip, b), iv)
	g.add(iv, fmt.Sprintf("%d %s %s %s %d", a, lop, v, hip, b))
	flip := map[string]string{"(": "[", "[": "("}[lo]
	g.add(fmt.Sprintf("%s%d, %d%s", flip, a, b, hi), iv)
	g.add(fmt.Sprintf("%s%d, %d%s", lo, a, b+1, hi), iv)
	g.add(fmt.Sprintf(`%s \in %s`, v, iv), iv)
	g.add(fmt.Sprintf(`%s \in %s%d, %d%s`, v, lo, a-1, b, hi), iv)
	g.add(fmt.Sprintf(`%s > %d`, v, a), fmt.Sprintf(`(%d, \infty)`, a))
	g.add(fmt.Sprintf(`%s \geq %d`, v, a), fmt.Sprintf(`[%d, \infty)`, a))
	g.add(fmt.Sprintf(`%s > %d`, v, a), fmt.Sprintf(`[%d, \infty)`, a))
	g.add(fmt.Sprintf(`%s < %d`, v, b), fmt.Sprintf(`(-\infty, %d)`, b))
	g.add(fmt.Sprintf(`%s < %d`, v, b), fmt.Sprintf(`(-\infty, %d)`, b+1))
	c := b + g.n(1, 50)
	g.add(fmt.Sprintf(`(%d, %d) \cup (%d, %d)`, a, b, b, c), fmt.Sprintf(`(%d,%d)\cup(%d,%d)`, a, b, b, c))
	g.add(fmt.Sprintf(`(%d, %d) \cup (%d, %d)`, a, b, b, c), fmt.Sprintf(`(%d,%d)\cup(%d,%d]`, a, b, b, c))
}

func (g *gen) inequalities() {
	v := g.pick("x", "y", "m")
	a := g.n(-99, 99)
	rel := []struct{ op, rev string }{{`\leq`, `\geq`}, {`\geq`, `\leq`}, {"<", ">"}, {">", "<"}}[g.rng.Intn(4)]
	g.add(fmt.Sprintf(`%s %s %d`, v, rel.op, a), fmt.Sprintf(`%d %s %s`, a, rel.rev, v))
	g.add(fmt.Sprintf(`%s %s %d`, v, rel.rev, a), fmt.Sprintf(`%d %s %s`, a, rel.rev, v))
	g.add(fmt.Sprintf(`%s %s %d`, v, rel.op, a+1), fmt.Sprintf(`%s %s %d`, v, rel.op, a))
}

func (g *gen) percents() {
	p := g.n(1, 199)
	q := g.other(p, 1, 199)
	g.add(fmt.Sprintf(`%d\%%`, p), fmt.Sprint(p))
	g.add(fmt.Sprintf(`%d\%%`, q), fmt.Sprint(p))
	g.add(fmt.Sprintf(`%d \text{ percent}`, p), fmt.Sprintf(`%d\%%`, p))
	g.add(fmt.Sprintf(`%d \text{ percent}`, q), fmt.Sprintf(`%d\%%`, p))
	g.add(fmt.Sprintf(`%d.5\%%`, p), fmt.Sprintf(`%d.5`, p))
}

func (g *gen) matrices() {
	r, c := g.n(1, 3), g.n(1, 3)
	if r*c == 1 {
		c = 2
	}
	cells := make([][]string, r)
	for i := range cells {
		cells[i] = make([]string, c)
		for j := range cells[i] {
			cells[i][j] = fmt.Sprint(g.n(-9, 9))
		}
	}
	mat := func(env string, cells [][]string) string {
		rows := make([]string, len(cells))
		for i, row := range cells {
			rows[i] = strings.Join(row, " & ")
		}
		return `\begin{` + env + `}` + strings.Join(rows, ` \\ `) + `\end{` + env + `}`
	}
	e1, e2 := g.pick("pmatrix", "bmatrix"), g.pick("pmatrix", "bmatrix")
	g.add(mat(e1, cells), mat(e2, cells))
	wrong := make([][]string, r)
	for i := range cells {
		wrong[i] = append([]string(nil), cells[i]...)
	}
	i, j := g.rng.Intn(r), g.rng.Intn(c)
	wrong[i][j] = fmt.Sprint(g.n(10, 20))
	g.add(mat(e1, wrong), mat(e2, cells))
}

func (g *gen) wrappers() {
	v := g.n(1, 999)
	w := g.other(v, 1, 999)
	unit := g.pick("cm", "miles", "dollars", "degrees", "units", "meters")
	g.add(fmt.Sprintf(`\text{%d}`, v), fmt.Sprint(v))
	g.add(fmt.Sprintf(`%d\text{ %s}`, v, unit), fmt.Sprint(v))
	g.add(fmt.Sprintf(`%d\textnormal{ %s}`, w, unit), fmt.Sprint(v))
	g.add(fmt.Sprintf(`\mathrm{%d}`, v), fmt.Sprint(v))
	g.add(fmt.Sprintf(`\mathbf{%d}`, w), fmt.Sprint(v))
	g.add(fmt.Sprintf(`\$%d`, v), fmt.Sprint(v))
	g.add(fmt.Sprintf(`%d^\circ`, v), fmt.Sprint(v))
	g.add(fmt.Sprintf(`\boxed{%d}`, v), fmt.Sprint(v))
	g.add(fmt.Sprint(w), fmt.Sprintf(`\boxed{%d}`, v))
	l := g.pick("A", "B", "C", "D", "E")
	g.add(fmt.Sprintf(`\mathcal{%s}`, l), l)
	g.add(fmt.Sprintf(`\text{(%s)}`, l), l)
}

func (g *gen) mixed() {
	w, d := g.n(1, 500), g.pick("2", "3", "4", "5", "8")
	var den int
	fmt.Sscan(d, &den)
	n := g.n(1, den-1)
	g.add(fmt.Sprintf(`%d\frac{%d}{%s}`, w, n, d), fmt.Sprintf(`\frac{%d}{%s}`, w*den+n, d))
	g.add(fmt.Sprintf(`%d\frac{%d}{%s}`, w, n, d), fmt.Sprintf(`\frac{%d}{%s}`, w*den+n+1, d))
	g.add(fmt.Sprintf(`%d\frac{%d}{%s}`, w, n, d), fmt.Sprintf(`%d`, w*n))
	g.add(fmt.Sprintf(`\dfrac{%d}{%s}`, w*den+n, d), fmt.Sprintf(`%d\frac{%d}{%s}`, w, n, d))
	g.add(fmt.Sprintf(`\cfrac{%d}{%s}`, n, d), fmt.Sprintf(`\frac{%d}{%s}`, n, d))
}

func (g *gen) polynomials() {
	v := g.pick("x", "t", "a")
	a, b := g.n(-9, 9), g.n(-9, 9)
	factor := func(r int) string {
		switch {
		case r == 0:
			return v
		case r > 0:
			return fmt.Sprintf("(%s + %d)", v, r)
		}
		return fmt.Sprintf("(%s - %d)", v, -r)
	}
	expanded := func(s, p int) string { return linear([]int{1, s, p}, []string{v + "^2", v, ""}) }
	prod := factor(a) + factor(b)
	g.add(expanded(a+b, a*b), prod)
	g.add(expanded(a+b, a*b+1), prod)
	g.add(prod, expanded(a+b, a*b))
	g.add(expanded(a-b, -a*b), prod)
	k := g.n(2, 9)
	g.add(fmt.Sprintf("%d%s + %d", k, v, k*a), fmt.Sprintf("%d(%s + %d)", k, v, a))
	g.add(fmt.Sprintf("%d%s + %d", k, v, k*a+1), fmt.Sprintf("%d(%s + %d)", k, v, a))
	g.add(fmt.Sprintf(`\frac{%s^2 - %d}{%s - %d}`, v, a*a, v, a), fmt.Sprintf("%s + %d", v, a))
}

func (g *gen) roots() {
	k, m := g.n(2, 9), g.pick("2", "3", "5", "6", "7")
	var mi int
	fmt.Sscan(m, &mi)
	g.add(fmt.Sprintf(`%d\sqrt{%s}`, k, m), fmt.Sprintf(`\sqrt{%d}`, k*k*mi))
	g.add(fmt.Sprintf(`%d\sqrt{%s}`, k, m), fmt.Sprintf(`\sqrt{%d}`, k*k*mi+1))
	g.add(fmt.Sprintf(`\frac{%d}{\sqrt{%s}}`, mi, m), fmt.Sprintf(`\sqrt{%s}`, m))
	g.add(fmt.Sprintf(`\frac{%d}{\sqrt{%s}}`, mi+1, m), fmt.Sprintf(`\sqrt{%s}`, m))
	g.add(fmt.Sprintf(`%d\pi`, k), fmt.Sprintf(`\pi \cdot %d`, k))
	g.add(fmt.Sprintf(`\frac{%d\pi}{%s}`, k, m), fmt.Sprintf(`\frac{%d}{%s}\pi`, k, m))
	g.add(fmt.Sprintf(`%d\pi`, k+1), fmt.Sprintf(`%d\pi`, k))
	g.add(fmt.Sprintf(`\sqrt[3]{%d}`, k*k*k), fmt.Sprint(k))
	g.add(fmt.Sprintf(`\sqrt[3]{%d}`, k*k*k+1), fmt.Sprint(k))
}

func (g *gen) logsAndTrig() {
	b, k := g.n(2, 9), g.n(1, 6)
	g.add(fmt.Sprintf(`\log_{%d} %d`, b, pow(b, k)), fmt.Sprint(k))
	g.add(fmt.Sprintf(`\log_{%d} %d`, b, pow(b, k)+1), fmt.Sprint(k))
	g.add(fmt.Sprintf(`\ln(e^{%d})`, k), fmt.Sprint(k))
	g.add(fmt.Sprintf(`e^{%d}`, k), fmt.Sprintf(`e^%d`, k))
	g.add(fmt.Sprintf(`e^{%d}`, k+1), fmt.Sprintf(`e^%d`, k))
	g.add(fmt.Sprintf(`\ln %d + \ln %d`, b, k+1), fmt.Sprintf(`\ln %d`, b*(k+1)))
	g.add(fmt.Sprintf(`\ln %d + \ln %d`, b, k+1), fmt.Sprintf(`\ln %d`, b*(k+1)+1))
	angle := []struct{ tex, sin, cos string }{
		{`\frac{\pi}{6}`, `\frac{1}{2}`, `\frac{\sqrt{3}}{2}`},
		{`\frac{\pi}{4}`, `\frac{\sqrt{2}}{2}`, `\frac{\sqrt{2}}{2}`},
		{`\frac{\pi}{3}`, `\frac{\sqrt{3}}{2}`, `\frac{1}{2}`},
		{`\frac{\pi}{2}`, `1`, `0`},
	}[g.rng.Intn(4)]
	g.add(fmt.Sprintf(`\sin\left(%s\right)`, angle.tex), angle.sin)
	g.add(fmt.Sprintf(`\cos\left(%s\right)`, angle.tex), angle.cos)
	g.add(fmt.Sprintf(`\sin\left(%s\right)`, angle.tex), fmt.Sprintf(`%s + 1`, angle.sin))
	v := g.pick("x", "\\theta")
	g.add(fmt.Sprintf(`\sin^2 %s + \cos^2 %s`, v, v), "1")
	g.add(fmt.Sprintf(`2\sin %s \cos %s`, v, v), fmt.Sprintf(`\sin 2%s`, v))
	g.add(fmt.Sprintf(`2\sin %s \cos %s`, v, v), fmt.Sprintf(`\cos 2%s`, v))
}

func pow(b, k int) int {
	r := 1
	for range k {
		r *= b
	}
	return r
}

// TestGeneratedAgainstMathVerify: the generated corpus through both.
func TestGeneratedAgainstMathVerify(t *testing.T) {
	compareWithMathVerify(t, "generated", generatedCorpus())
}
