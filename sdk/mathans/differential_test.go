package mathans

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/prorl/prorl/sdk/sdktest"
)

// The differential test: our verdicts against Math-Verify's (PyPI
// math-verify, installed pinned by scripts/ref.py, which
// make test runs) on a generated corpus. The corpus covers what this
// package compares like Math-Verify today: numbers (integers, decimals,
// fractions, powers, scientific notation, roots and pi against decimals).

type pair struct {
	Pred string `json:"pred"`
	Gold string `json:"gold"`
	// Response: Pred is a whole model response to extract the answer from.
	Response bool `json:"response,omitempty"`
}

// numericCorpus is deterministic: the same pairs on every run.
func numericCorpus() []pair {
	rng := rand.New(rand.NewSource(14))
	var ps []pair
	add := func(pred, gold string) { ps = append(ps, pair{Pred: pred, Gold: gold}) }
	for i := 0; i < 150; i++ {
		n := rng.Int63n(1_000_000_000_000) - 500_000_000_000
		add(fmt.Sprint(n), fmt.Sprint(n))
		add(fmt.Sprint(n+1), fmt.Sprint(n))
		add(fmt.Sprint(n+int64(rng.Intn(1000))), fmt.Sprint(n))
		m := rng.Intn(10000)
		add(fmt.Sprint(m), fmt.Sprintf("%d.0", m))
		add(fmt.Sprintf("%d.%02d", m, rng.Intn(100)), fmt.Sprintf("%d.%02d", m, rng.Intn(100)))
	}
	for i := 0; i < 200; i++ {
		d := []int{3, 6, 7, 9, 11, 12, 13, 17, 4, 8, 5, 2}[rng.Intn(12)]
		n := rng.Intn(50) + 1
		if n%d == 0 {
			n++
		}
		v := float64(n) / float64(d)
		frac := fmt.Sprintf(`\frac{%d}{%d}`, n, d)
		places := 3 + rng.Intn(6)
		add(frac, fmt.Sprintf("%.*f", places, v))
		add(fmt.Sprintf("%.*f", places, v), frac)
		k := rng.Intn(5) + 2
		add(fmt.Sprintf(`\frac{%d}{%d}`, n*k, d*k), frac)
		add(fmt.Sprintf(`\frac{%d}{%d}`, n+1, d), frac)
		add(fmt.Sprintf(`-\frac{%d}{%d}`, n, d), fmt.Sprintf("-%.*f", places, v))
	}
	for i := 0; i < 60; i++ {
		b, e := rng.Intn(9)+2, rng.Intn(60)+1
		add(fmt.Sprintf("%d^{%d}", b, e), fmt.Sprint(new(bigPow).of(b, e)))
		add(fmt.Sprintf("%d^{%d}", b, e), fmt.Sprintf("%d^{%d}", b+1, e))
		add(fmt.Sprintf("%d^{%d}", b, e+1), fmt.Sprintf("%d^{%d}", b, e))
		m, x := rng.Intn(9000)+1000, rng.Intn(12)-6
		add(fmt.Sprintf(`%d.%d \times 10^{%d}`, m/1000, m%1000, x), fmt.Sprintf(`%d.%d \times 10^{%d}`, m/1000, m%1000, x))
		add(fmt.Sprintf(`%d.%d \times 10^{%d}`, m/1000, m%1000, x), fmt.Sprintf(`%d.%d \times 10^{%d}`, m/1000, m%1000+1, x))
	}
	for _, irr := range []struct {
		tex string
		v   float64
	}{{`\pi`, math.Pi}, {`\sqrt{2}`, math.Sqrt2}, {`\sqrt{3}`, math.Sqrt(3)}, {`2\pi`, 2 * math.Pi}, {`\frac{\sqrt{2}}{2}`, math.Sqrt2 / 2}, {`\sqrt{5}`, math.Sqrt(5)}} {
		for places := 2; places <= 10; places++ {
			add(fmt.Sprintf("%.*f", places, irr.v), irr.tex)
			add(irr.tex, fmt.Sprintf("%.*f", places, irr.v))
			add(fmt.Sprintf("%.*f", places, irr.v+math.Pow(10, -float64(places))), irr.tex)
		}
	}
	return ps
}

type bigPow struct{}

func (bigPow) of(b, e int) string {
	r, _ := Exact(binary{op: '^', l: lit(fmt.Sprint(b)), r: lit(fmt.Sprint(e))})
	return r.RatString()
}

func mathVerify(t *testing.T, ps []pair) []bool {
	t.Helper()
	py := sdktest.Reference(t, "../../scripts/ref.py", "mathverify")
	// Math-Verify takes about 4 ms a pair: one process per core.
	lines, err := sdktest.RunJSONLines(py, filepath.Join("..", "..", "scripts", "mathverify", "verdicts.py"), ps, runtime.NumCPU())
	if err != nil {
		t.Fatalf("Math-Verify: %v", err)
	}
	vs := make([]bool, len(lines))
	for i, l := range lines {
		var v struct{ Equal bool }
		if err := json.Unmarshal(l, &v); err != nil {
			t.Fatal(err)
		}
		vs[i] = v.Equal
	}
	return vs
}

// responseCorpus puts answers in whole responses, in the forms models write.
func responseCorpus() []pair {
	var ps []pair
	answers := []struct{ right, wrong, gold string }{
		{"42", "41", "42"}, {`\frac{1}{2}`, `\frac{1}{3}`, "0.5"}, {"9", "8", "9"}, {`3\sqrt{2}`, `2\sqrt{3}`, `\sqrt{18}`},
		{"-7", "7", "-7"}, {"2.5", "2.55", `\frac{5}{2}`}, {"1000", "1001", "1000"},
	}
	forms := []string{
		"The computation gives the result. Therefore the answer is $\\boxed{%s}$.",
		"So we get \\boxed{%s}",
		"Final answer: $%s$",
		"Thus, the answer is $%s$.",
		"We find $x = %s$.",
		"The answer is %s.",
		"Answer $ %s $",
		"After simplifying, \\[ %s \\]",
		"Therefore the value is \\(%s\\).",
		"First $a = 3$ and $b = 4$, so the result is $%s$.",
		"%s",
	}
	// Several boxes: a multi-answer, which hedging cannot turn into a
	// single right one.
	for _, r := range []string{`So \boxed{6} and \boxed{8}.`, `First \boxed{6}. Wait, no: \boxed{8}.`, `\boxed{8} \boxed{8}`, `\boxed{1} \boxed{2} \boxed{3} \boxed{8}`} {
		for _, g := range []string{"8", "6, 8", `\{6, 8\}`} {
			ps = append(ps, pair{Pred: r, Gold: g, Response: true})
		}
	}
	for _, a := range answers {
		for _, f := range forms {
			ps = append(ps, pair{Pred: fmt.Sprintf(f, a.right), Gold: a.gold, Response: true},
				pair{Pred: fmt.Sprintf(f, a.wrong), Gold: a.gold, Response: true})
		}
	}
	return ps
}

func TestAgainstMathVerify(t *testing.T) { compareWithMathVerify(t, "numeric", numericCorpus()) }

// compareWithMathVerify runs a corpus through our Extract (for whole
// responses) and Equivalent and through Math-Verify, and fails on every
// pair where the verdicts differ, unless it is listed, with its reason, in
// testdata/mathverify_disagreements.tsv.
func compareWithMathVerify(t *testing.T, name string, ps []pair) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs Math-Verify")
	}
	ref := mathVerify(t, ps)
	known := disagreements(t)
	agree, listed, weEqual, theyEqual, falsePos, falseNeg := 0, 0, 0, 0, 0, 0
	for i, p := range ps {
		pred := p.Pred
		if p.Response {
			pred, _ = Extract(p.Pred)
		}
		ours := Equivalent(pred, p.Gold)
		if ours {
			weEqual++
		}
		if ref[i] {
			theyEqual++
		}
		switch {
		case ours == ref[i]:
			agree++
		case known.has(p.Pred, p.Gold):
			listed++
		default:
			if ours {
				falsePos++
			} else {
				falseNeg++
			}
			t.Errorf("ours %v, Math-Verify %v: %q (answer %q, normalized %q) vs %q (normalized %q)", ours, ref[i], p.Pred, pred, Normalize(pred), p.Gold, Normalize(p.Gold))
		}
	}
	t.Logf("%s corpus: %d pairs, agreement %d (%.2f%%), %d listed disagreements; equal: ours %d, Math-Verify %d; unlisted: we say equal where it does not %d, the reverse %d",
		name, len(ps), agree, 100*float64(agree)/float64(len(ps)), listed, weEqual, theyEqual, falsePos, falseNeg)
}

// TestResponsesAgainstMathVerify: extraction from whole responses, then
// the verdict, against Math-Verify's parse and verify.
func TestResponsesAgainstMathVerify(t *testing.T) {
	compareWithMathVerify(t, "response", responseCorpus())
}

// disagreements reads the committed list of pairs where we differ from
// Math-Verify on purpose, with the reason: exact pairs, and classes of
// generated pairs (a line starting with "~": a regular expression each
// for the prediction and the reference, matched whole).
type listed struct {
	pairs   map[string]bool
	classes []class
}

type class struct {
	pred, gold *regexp.Regexp
	reason     string
}

func (l listed) has(pred, gold string) bool {
	if l.pairs[pred+"\t"+gold] {
		return true
	}
	for _, c := range l.classes {
		if c.pred.MatchString(pred) && c.gold.MatchString(gold) {
			return true
		}
	}
	return false
}

func disagreements(t *testing.T) listed {
	b, err := os.ReadFile(filepath.Join("testdata", "mathverify_disagreements.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	out := listed{pairs: map[string]bool{}}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 || f[2] == "" {
			t.Fatalf("disagreement without a reason: %q", line)
		}
		if re, ok := strings.CutPrefix(f[0], "~"); ok {
			out.classes = append(out.classes, class{regexp.MustCompile("^(?:" + re + ")$"), regexp.MustCompile("^(?:" + f[1] + ")$"), f[2]})
			continue
		}
		out.pairs[f[0]+"\t"+f[1]] = true
	}
	return out
}

// categoryCorpus: one or two pairs per kind of answer Math-Verify compares
// (equations either way round and scaled, tuples and assignments, sets and
// \\pm, intervals and inequalities, relations, percentages, matrices,
// wrappers, mixed numbers, logarithms, expressions), right and wrong.
func categoryCorpus() []pair {
	return []pair{
		{Pred: `x=2`, Gold: `2`},
		{Pred: `2=x`, Gold: `x=2`},
		{Pred: `(p,q)=(3,2)`, Gold: `(3,2)`},
		{Pred: `\pm 2021`, Gold: `\{-2021, 2021\}`},
		{Pred: `-2021, 2021`, Gold: `\pm 2021`},
		{Pred: `(-793, 10)`, Gold: `-793 < a < 10`},
		{Pred: `x \leq 5`, Gold: `5 \geq x`},
		{Pred: `x \in [1,2]`, Gold: `[1,2]`},
		{Pred: `[1,2]`, Gold: `(1,2)`},
		{Pred: `(1,2)`, Gold: `(1,2]`},
		{Pred: `50\%`, Gold: `50`},
		{Pred: `50\%`, Gold: `0.5`},
		{Pred: `50 percent`, Gold: `50\%`},
		{Pred: `\begin{pmatrix}1&2\\3&4\end{pmatrix}`, Gold: `\begin{bmatrix}1&2\\3&4\end{bmatrix}`},
		{Pred: `\begin{pmatrix}1&2\\3&4\end{pmatrix}`, Gold: `\begin{bmatrix}1&2\\3&5\end{bmatrix}`},
		{Pred: `\mathcal{B}`, Gold: `B`},
		{Pred: `10\textnormal{ miles}`, Gold: `10`},
		{Pred: `\cfrac{1}{2}`, Gold: `0.5`},
		{Pred: `3\frac{1}{2}`, Gold: `3.5`},
		{Pred: `\{1,2,3\}`, Gold: `\{3,2,1\}`},
		{Pred: `\{1,2\}`, Gold: `\{1,2,3\}`},
		{Pred: `2x+2`, Gold: `2(x+1)`},
		{Pred: `x^2-1`, Gold: `(x-1)(x+1)`},
		{Pred: `x^2-1`, Gold: `(x-1)(x+2)`},
		{Pred: `\sin^2 x + \cos^2 x`, Gold: `1`},
		{Pred: `e^{i\pi}`, Gold: `-1`},
		{Pred: `\ln e`, Gold: `1`},
		{Pred: `\log_2 8`, Gold: `3`},
		{Pred: `2x+3y=6`, Gold: `-2x-3y=-6`},
		{Pred: `2x+3y=6`, Gold: `4x+6y=12`},
		{Pred: `x+y=1`, Gold: `x+y=2`},
		{Pred: `\approx 3.14`, Gold: `3.14`},
		{Pred: `1,2`, Gold: `2,1`},
		{Pred: `6 and 8`, Gold: `6, 8`},
		{Pred: `y=2x`, Gold: `2x`},
		{Pred: `\frac{\sqrt{3}}{2}`, Gold: `\sin 60^\circ`},
		{Pred: `\infty`, Gold: `\infty`},
		{Pred: `-\infty`, Gold: `\infty`},
		{Pred: `(1,2)`, Gold: `(2,1)`},
		{Pred: `\{(1,2)\}`, Gold: `(1,2)`},
		{Pred: `5`, Gold: `\boxed{5}`},
		{Pred: `x>3`, Gold: `(3,\infty)`},
		{Pred: `x \geq 3`, Gold: `[3, \infty)`},
		{Pred: `x>3`, Gold: `[3,\infty)`},
		{Pred: `a=1, b=2`, Gold: `(1,2)`},
		{Pred: `1/2`, Gold: `\dfrac{1}{2}`},
		{Pred: `0.5`, Gold: `\frac12`},
		{Pred: `3128 1/2`, Gold: `3128.5`},
		{Pred: `x=3`, Gold: `2`},
		{Pred: `3=x`, Gold: `x=2`},
		{Pred: `(p,q)=(2,3)`, Gold: `(3,2)`},
		{Pred: `\pm 2020`, Gold: `\{-2021, 2021\}`},
		{Pred: `(-793, 11)`, Gold: `-793 < a < 10`},
		{Pred: `[-793, 10)`, Gold: `-793 < a < 10`},
		{Pred: `x \leq 6`, Gold: `5 \geq x`},
		{Pred: `x \geq 5`, Gold: `5 \geq x`},
		{Pred: `x \in [1,3]`, Gold: `[1,2]`},
		{Pred: `40 percent`, Gold: `50\%`},
		{Pred: `\cfrac{1}{3}`, Gold: `0.5`},
		{Pred: `3\frac{1}{3}`, Gold: `3.5`},
		{Pred: `\log_2 16`, Gold: `3`},
		{Pred: `2x+3y=7`, Gold: `-2x-3y=-6`},
		{Pred: `2x+3y=6`, Gold: `4x+6y=13`},
		{Pred: `a=2, b=1`, Gold: `(1,2)`},
		{Pred: `6 and 9`, Gold: `6, 8`},
		{Pred: `\approx 3.15`, Gold: `3.14`},
		{Pred: `6`, Gold: `\boxed{5}`},
		{Pred: `\begin{pmatrix}1&2\\3&4\end{pmatrix}`, Gold: `\begin{bmatrix}1&2\\4&3\end{bmatrix}`},
		{Pred: `10\textnormal{ miles}`, Gold: `11`},
	}
}

// TestCategoriesAgainstMathVerify runs the category corpus through both.
func TestCategoriesAgainstMathVerify(t *testing.T) {
	compareWithMathVerify(t, "category", categoryCorpus())
}
