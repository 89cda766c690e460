package mathans

import (
	"math"
	"math/rand"
	"sort"
	"strings"
)

// Equivalent reports whether a predicted answer equals the reference:
// the same after normalisation, the same number, the same expression at
// random points, or the same tuple, interval or set element by element.
func Equivalent(pred, gold string) bool {
	a, b := Normalize(pred), Normalize(gold)
	if a == "" || b == "" {
		return false
	}
	budget := 2000 // comparisons; nested unordered lists could otherwise explode
	return equalNorm(a, b, 0, &budget)
}

func squash(s string) string { return strings.ToLower(strings.ReplaceAll(s, " ", "")) }

func equalNorm(a, b string, depth int, budget *int) bool {
	*budget--
	if depth > 8 || *budget < 0 {
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
		if equalValue(pa, pb) {
			return true
		}
		if aPct && !bPct {
			return equalScaled(pa, pb, 0.01)
		}
		if bPct && !aPct {
			return equalScaled(pb, pa, 0.01)
		}
		return false
	}
	if ua, ok := splitUnion(a); ok {
		ub, ok := splitUnion(b)
		return ok && equalLists(ua, ub, true, depth, budget)
	}
	la, ka := structure(a)
	lb, kb := structure(b)
	if ka != kb {
		return false
	}
	switch ka {
	case kindSet, kindList:
		return equalLists(la, lb, false, depth, budget)
	case kindTuple:
		return bracketsMatch(a, b) && equalLists(la, lb, true, depth, budget)
	}
	return equalValue(a, b)
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

// splitTop splits on commas outside brackets.
func splitTop(s string) []string {
	var out []string
	d, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{':
			d++
		case ')', ']', '}':
			d--
		case ',':
			if d == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

func equalLists(a, b []string, ordered bool, depth int, budget *int) bool {
	if len(a) != len(b) {
		return false
	}
	if ordered {
		for i := range a {
			if !equalNorm(a[i], b[i], depth+1, budget) {
				return false
			}
		}
		return true
	}
	used := make([]bool, len(b))
	for _, x := range a {
		found := false
		for j, y := range b {
			if !used[j] && equalNorm(x, y, depth+1, budget) {
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

func close(a, b float64) bool {
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return a == b
	}
	d := math.Abs(a - b)
	return d <= 1e-9 || d <= 1e-6*math.Max(math.Abs(a), math.Abs(b))
}

func equalScaled(pct, other string, scale float64) bool {
	ea, err1 := ParseExpr(pct)
	eb, err2 := ParseExpr(other)
	if err1 != nil || err2 != nil || len(Vars(ea)) > 0 || len(Vars(eb)) > 0 {
		return false
	}
	return close(ea.Eval(nil)*scale, eb.Eval(nil))
}

// equalValue compares two scalar answers as expressions: numbers exactly up
// to tolerance, expressions with variables at fixed pseudo-random points.
func equalValue(a, b string) bool {
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
		x, y := ea.Eval(nil), eb.Eval(nil)
		return !math.IsNaN(x) && !math.IsNaN(y) && close(x, y)
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
