package mathans

import (
	"regexp"
	"strings"
)

var (
	thousandsRe = regexp.MustCompile(`^-?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?$`)
	// A decimal comma (European): "2,74", "1000,99", "0,111". Not "1,2"
	// (a list as often as a number) nor "1,000" (thousands).
	decimalCommaRe = regexp.MustCompile(`^(-?)(\d+),(\d{2}|\d{4,})$|^(-?)(0),(\d+)$`)
	// "14 {, }916": a braced thousands separator with spaces around.
	bracedCommaRe = regexp.MustCompile(`(\d)\s*\{\s*,\s*\}\s*(\d)`)
	doubledCmdRe  = regexp.MustCompile(`\\\\([A-Za-z]+)`)
	// A named quantity (letters, bars, colons: |AB|, A:B) and a plain number.
	namedQuantityRe = regexp.MustCompile(`^[|]?[A-Za-z]{1,3}(?::[A-Za-z]{1,3})?[|]?$`)
	plainNumberRe   = regexp.MustCompile(`^-?\d+(?:\.\d+)?(?:/\d+)?$`)
	negatedRelRe    = regexp.MustCompile(`^-\s*([A-Za-z])\s*(<|>|\\leq|\\geq)\s*(-?\d+(?:\.\d+)?)$`)
	// Relations as they are also written: \lt, <=, !=, ≤ ...
	relWordRe = regexp.MustCompile(`\\(lt|gt|le|ge|ne|leqslant|geqslant)\b`)
	// Currency and unit signs around a number ("$1,000.99", "1,000.99€",
	// "2,74 $", "1,000.99m²").
	moneyRe    = regexp.MustCompile(`^[€£¥]?\s*(-?\d[\d,.]*)\s*(?:[€£¥]|m²|m³|cm²|km²)?$`)
	spaceRe    = regexp.MustCompile(`\s+`)
	unitWordRe = regexp.MustCompile(`(?i)\s*(?:` + strings.Join(unitWords, "|") + `)\.?\s*(?:\^\{?[23]\}?|²|³)?\s*$`)
)

// Units and words dropped from the end of an answer ("5 cm", "12 dollars").
var unitWords = []string{
	"square units", "sq units", "square feet", "square inches", "square meters", "square centimeters", "square cm",
	"units", "unit", "degrees", "degree", "deg", "radians", "dollars", "dollar", "cents", "cent",
	"centimeters", "centimetres", "meters", "metres", "kilometers", "millimeters", "inches", "inch", "feet", "foot", "ft",
	"miles", "mile", "yards", "yard", "hours", "hour", "minutes", "minute", "seconds", "second", "days", "day",
	"years", "year", "mph", "km/h", "cm", "mm", "km", "kg", "g", "m", "s", "in", "ways", "people", "students",
}

// Normalize canonicalises the surface form of an answer (LaTeX spacing,
// \left/\right, \dfrac, \text{}, $, degrees, units, thousands separators)
// without changing its value.
func Normalize(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "\n", " ")
	// "\\frac" written with its backslash doubled (an escaped string) is
	// \frac; in a matrix "\\" ends a row.
	if strings.Contains(s, `\\`) && !strings.Contains(s, `\begin{`) {
		s = doubledCmdRe.ReplaceAllString(s, `\$1`)
	}
	// "11,\! 111" and "14{,}916" are thousands separators.
	s = strings.ReplaceAll(s, `,\! `, ",")
	s = strings.ReplaceAll(s, `,\!`, ",")
	for _, r := range []string{`\!`, `\,`, `\;`, `\:`, `\ `, `\quad`, `\qquad`, `\displaystyle`, `\left`, `\right`, `\big`, `\Big`} {
		s = strings.ReplaceAll(s, r, "")
	}
	s = strings.ReplaceAll(s, `\$`, "")
	s = strings.ReplaceAll(s, "$", "")
	// A reference may come boxed itself.
	if strings.HasPrefix(s, `\boxed{`) && strings.HasSuffix(s, "}") {
		if b, ok := LastBoxed(s); ok && len(b) == len(s)-len(`\boxed{}`) {
			s = strings.TrimSpace(b)
		}
	}
	s = strings.ReplaceAll(s, `\dfrac`, `\frac`)
	s = strings.ReplaceAll(s, `\tfrac`, `\frac`)
	s = strings.ReplaceAll(s, `\cfrac`, `\frac`)
	// Matrices in any environment are the same matrix.
	for _, env := range []string{"pmatrix", "vmatrix", "Bmatrix", "Vmatrix", "smallmatrix", "matrix"} {
		s = strings.ReplaceAll(s, `\begin{`+env+`}`, `\begin{bmatrix}`)
		s = strings.ReplaceAll(s, `\end{`+env+`}`, `\end{bmatrix}`)
	}
	s = strings.TrimPrefix(s, `\approx`)
	s = strings.TrimPrefix(strings.TrimSpace(s), `\sim`)
	s = bracedCommaRe.ReplaceAllString(s, "$1,$2")
	s = strings.ReplaceAll(s, `{,}`, ",")
	for _, d := range []string{`^{\circ}`, `^\circ`, `\circ`, `°`, `\degree`} {
		s = strings.ReplaceAll(s, d, "")
	}
	s = unwrapText(s)
	s = strings.ReplaceAll(s, `\%`, "%")
	s = relWordRe.ReplaceAllStringFunc(s, func(w string) string {
		return map[string]string{`\lt`: " < ", `\gt`: " > ", `\le`: ` \leq `, `\ge`: ` \geq `, `\ne`: ` \neq `,
			`\leqslant`: ` \leq `, `\geqslant`: ` \geq `}[w]
	})
	for _, r := range [][2]string{{"<=", ` \leq `}, {">=", ` \geq `}, {"!=", ` \neq `}, {"≤", ` \leq `}, {"≥", ` \geq `}, {"≠", ` \neq `}} {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	s = strings.TrimSpace(spaceRe.ReplaceAllString(s, " "))
	if m := moneyRe.FindStringSubmatch(s); m != nil {
		s = m[1]
	}
	for _, w := range []string{" percent", " per cent", " percentage", " pct"} {
		if strings.HasSuffix(s, w) {
			s = strings.TrimSuffix(s, w) + "%"
		}
	}
	// "6 and 8" is the list "6, 8"; so is "(11,7)or(7,11)".
	s = strings.ReplaceAll(s, " and ", ", ")
	s = strings.ReplaceAll(s, " or ", ", ")
	s = strings.ReplaceAll(s, ")or(", "), (")
	// Relations read left to right: "5 \geq x" is "x \leq 5".
	// "-x > -1" is "x < 1".
	if m := negatedRelRe.FindStringSubmatch(s); m != nil && isSimpleVar(m[1]) {
		s = m[1] + " " + map[string]string{"<": ">", ">": "<", `\leq`: `\geq`, `\geq`: `\leq`}[m[2]] + " " + negate(m[3])
	}
	s = canonicalRelation(s)
	// Drop trailing units only after something numeric-looking, so a bare
	// "m" (a variable) survives.
	for i := 0; i < 3; i++ {
		loc := unitWordRe.FindStringIndex(s)
		if loc == nil || loc[0] == 0 {
			break
		}
		head := strings.TrimSpace(s[:loc[0]])
		if head == "" || !endsNumeric(head) {
			break
		}
		s = head
	}
	s = strings.TrimSuffix(strings.TrimSpace(s), ".")
	// "12,345" is one number; "32, 349" (a space after the comma) is two.
	if thousandsRe.MatchString(s) {
		s = strings.ReplaceAll(s, ",", "")
	} else if m := decimalCommaRe.FindStringSubmatch(s); m != nil {
		s = m[1] + m[2] + m[4] + m[5] + "." + m[3] + m[6]
	}
	// "x = 5" -> "5" when one side is one variable (or a tuple of them:
	// "(p,q)=(3,2)"); "x \in [1,2]" -> "[1,2]".
	if i := strings.IndexByte(s, '='); i > 0 && strings.Count(s, "=") == 1 && !strings.ContainsAny(s, "<>") && !strings.Contains(s, `\leq`) && !strings.Contains(s, `\geq`) {
		lhs, rhs := strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:])
		switch {
		case isSimpleVar(lhs) || isVarTuple(lhs):
			s = rhs
		case isSimpleVar(rhs) || isVarTuple(rhs):
			s = lhs
		case namedQuantityRe.MatchString(lhs) && plainNumberRe.MatchString(rhs):
			// "|AB| = 1", "A:B = 1": a named quantity's value.
			s = rhs
		}
	}
	// "x \approx 11" states the value 11.
	if lhs, rhs, ok := strings.Cut(s, `\approx`); ok && isSimpleVar(strings.TrimSpace(lhs)) && plainNumberRe.MatchString(strings.TrimSpace(rhs)) {
		s = strings.TrimSpace(rhs)
	}
	if lhs, rhs, ok := strings.Cut(s, `\in `); ok && isSimpleVar(strings.TrimSpace(lhs)) {
		s = strings.TrimSpace(rhs)
	}
	// "a=1, b=2" is the tuple (1, 2).
	if t, ok := assignments(s); ok {
		s = t
	}
	// "-793 < a < 10" is the interval (-793, 10).
	if iv, ok := chainToInterval(s); ok {
		s = iv
	}
	// A mixed number.
	if m := mixedRe.FindStringSubmatch(s); m != nil {
		sign, whole := "", m[1]
		if strings.HasPrefix(whole, "-") {
			sign, whole = "-", whole[1:]
		}
		s = sign + "(" + whole + "+" + m[2] + "/" + m[3] + ")"
	}
	// "\pm 2" is the pair "-2, 2".
	if rest, ok := strings.CutPrefix(s, `\pm`); ok && strings.TrimSpace(rest) != "" && !strings.ContainsAny(rest, ",") {
		rest = strings.TrimSpace(rest)
		s = "-" + rest + ", " + rest
	}
	return strings.TrimSpace(s)
}

// negate is -n for a plain number n.
func negate(n string) string {
	if rest, ok := strings.CutPrefix(n, "-"); ok {
		return rest
	}
	return "-" + n
}

// "3\frac{1}{2}" is 3.5, as Math-Verify reads it ("3128 1/2" it does not).
var mixedRe = regexp.MustCompile(`^(-?\d+)\s*\\frac\{(\d+)\}\{(\d+)\}$`)

// chainToInterval reads "A < x < B" (< or \leq at either end) as an interval.
func chainToInterval(s string) (string, bool) {
	type op struct {
		tok    string
		closed bool
	}
	ops := []op{{`\leq`, true}, {`\le `, true}, {"<=", true}, {"≤", true}, {"<", false}}
	// The first relation in s, whichever it is ("a < x \leq b").
	find := func(s string) (int, op) {
		at, found := -1, op{}
		for _, o := range ops {
			if i := strings.Index(s, o.tok); i >= 0 && (at < 0 || i < at) {
				at, found = i, o
			}
		}
		return at, found
	}
	i, o1 := find(s)
	if i < 0 {
		return "", false
	}
	a, rest := strings.TrimSpace(s[:i]), s[i+len(o1.tok):]
	j, o2 := find(rest)
	if j < 0 {
		return "", false
	}
	v, b := strings.TrimSpace(rest[:j]), strings.TrimSpace(rest[j+len(o2.tok):])
	if a == "" || b == "" || !isSimpleVar(v) {
		return "", false
	}
	l, r := "(", ")"
	if o1.closed {
		l = "["
	}
	if o2.closed {
		r = "]"
	}
	return l + a + ", " + b + r, true
}

// assignments reads "a=1, b=2" (two or more, each a single variable) as
// the tuple of their values in order.
func assignments(s string) (string, bool) {
	parts := splitTop(s)
	if len(parts) < 2 {
		return "", false
	}
	vals := make([]string, len(parts))
	for i, p := range parts {
		l, r, ok := strings.Cut(p, "=")
		if !ok || strings.Contains(r, "=") || !isSimpleVar(strings.TrimSpace(l)) || strings.TrimSpace(r) == "" {
			return "", false
		}
		vals[i] = strings.TrimSpace(r)
	}
	return "(" + strings.Join(vals, ", ") + ")", true
}

// isVarTuple reports "(p,q)" and the like: a tuple of single variables.
func isVarTuple(s string) bool {
	if len(s) < 5 || s[0] != '(' || s[len(s)-1] != ')' {
		return false
	}
	for _, v := range strings.Split(s[1:len(s)-1], ",") {
		if !isSimpleVar(strings.TrimSpace(v)) {
			return false
		}
	}
	return true
}

// canonicalRelation turns "A \geq B" into "B \leq A" (and > into <), so a
// relation written from either side reads the same.
func canonicalRelation(s string) string {
	for _, r := range [][2]string{{`\geq`, `\leq`}, {`\ge `, `\leq `}, {">=", `\leq`}, {">", "<"}} {
		if strings.Count(s, r[0]) != 1 || strings.ContainsAny(s, "<=") && r[0] == ">" {
			continue
		}
		if r[0] == ">" && (strings.Contains(s, ">=") || strings.Contains(s, `\geq`)) {
			continue
		}
		a, b, _ := strings.Cut(s, r[0])
		a, b = strings.TrimSpace(a), strings.TrimSpace(b)
		if a == "" || b == "" || strings.ContainsAny(a+b, "<>") || strings.Contains(a+b, `\leq`) || strings.Contains(a+b, `\geq`) {
			return s
		}
		return b + " " + strings.TrimSpace(r[1]) + " " + a
	}
	return s
}

func endsNumeric(s string) bool {
	c := s[len(s)-1]
	return c >= '0' && c <= '9' || c == '}' || c == ')' || c == '%'
}

func isSimpleVar(s string) bool {
	if s == "" {
		return false
	}
	if len(s) == 1 {
		return s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z'
	}
	// x_1, \theta, f(x)
	if strings.HasPrefix(s, `\`) && !strings.ContainsAny(s[1:], `\ +-*/`) {
		return true
	}
	if len(s) >= 3 && strings.Contains(s, "_") && !strings.ContainsAny(s, " +-*/") {
		return true
	}
	if len(s) == 4 && s[1] == '(' && s[3] == ')' {
		return true
	}
	return false
}

var textCmds = []string{`\textbf`, `\textit`, `\textnormal`, `\textrm`, `\text`, `\mbox`, `\mathrm`, `\mathbf`, `\mathit`, `\operatorname`}

// unwrapText replaces \text{X} (and \mathrm, \textbf, ...) by " X ", nested
// or not, in one pass: linear in len(s), however deep the nesting.
func unwrapText(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	var groups []bool // per open brace: does it belong to a text command
	for i := 0; i < len(s); {
		if s[i] == '\\' {
			if j := textCmdAt(s, i); j > 0 {
				b.WriteByte(' ')
				groups = append(groups, true)
				i = j + 1
				continue
			}
			end := min(i+2, len(s))
			b.WriteString(s[i:end])
			i = end
			continue
		}
		switch s[i] {
		case '{':
			groups = append(groups, false)
			b.WriteByte('{')
		case '}':
			if n := len(groups); n > 0 {
				text := groups[n-1]
				groups = groups[:n-1]
				if text {
					b.WriteByte(' ')
					break
				}
			}
			b.WriteByte('}')
		default:
			b.WriteByte(s[i])
		}
		i++
	}
	return b.String()
}

// textCmdAt returns the index of the '{' opening a text command's group
// at s[i:], or 0.
func textCmdAt(s string, i int) int {
	for _, c := range textCmds {
		if strings.HasPrefix(s[i:], c) {
			j := i + len(c)
			if j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z') {
				continue // a longer command (\textstyle)
			}
			for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
				j++
			}
			if j < len(s) && s[j] == '{' {
				return j
			}
		}
	}
	return 0
}
