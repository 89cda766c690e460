package main

import (
	"math"
	"math/big"
	"strconv"
	"strings"
)

// outputsMatch compares a program's output with the expected one the way
// the mode's reference harness does (compareModes). With tol > 0 numeric
// tokens also match within tol, absolute or relative.
func outputsMatch(got, want, mode string, tol float64) bool {
	switch mode {
	case "exact":
		return strings.TrimRight(crlf(got), " \t\n") == strings.TrimRight(crlf(want), " \t\n")
	case "lines_decimal":
		return linesDecimal(got, want, tol)
	case "float":
		return linesOfTokens(got, want, func(a, b string) bool { return numClose(a, b, 1e-5, 1e-8) || (tol > 0 && numClose(a, b, tol, tol)) })
	case "lines":
		return linesOfTokens(got, want, tolerant(tol))
	}
	return tokensMatch(strings.Fields(got), strings.Fields(want), tolerant(tol))
}

func crlf(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }

func tolerant(tol float64) func(a, b string) bool {
	return func(a, b string) bool { return tol > 0 && numClose(a, b, tol, tol) }
}

func tokensMatch(g, w []string, near func(a, b string) bool) bool {
	if len(g) != len(w) {
		return false
	}
	for i := range g {
		if g[i] != w[i] && !near(g[i], w[i]) {
			return false
		}
	}
	return true
}

// strippedLines: line endings normalised, each line stripped, empty lines
// dropped (TACO's and our "lines" mode).
func strippedLines(s string) [][]string {
	var out [][]string
	for _, l := range strings.Split(crlf(s), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, f)
		}
	}
	return out
}

func linesOfTokens(got, want string, near func(a, b string) bool) bool {
	g, w := strippedLines(got), strippedLines(want)
	if len(g) != len(w) {
		return false
	}
	for i := range g {
		if !tokensMatch(g[i], w[i], near) {
			return false
		}
	}
	return true
}

// linesDecimal is LiveCodeBench's grade_stdio: the whole output stripped,
// split on "\n", each line stripped; lines equal, or their whitespace
// tokens all Decimals and equal.
func linesDecimal(got, want string, tol float64) bool {
	g := strings.Split(strings.TrimSpace(got), "\n")
	w := strings.Split(strings.TrimSpace(want), "\n")
	if len(g) != len(w) {
		return false
	}
	for i := range g {
		a, b := strings.TrimSpace(g[i]), strings.TrimSpace(w[i])
		if a == b {
			continue
		}
		ga, wa := strings.Fields(a), strings.Fields(b)
		if len(ga) != len(wa) {
			return false
		}
		for k := range ga {
			x, ok1 := decimal(ga[k])
			y, ok2 := decimal(wa[k])
			if !ok1 || !ok2 {
				return false
			}
			if x.Cmp(y) != 0 && !(tol > 0 && numClose(ga[k], wa[k], tol, tol)) {
				return false
			}
		}
	}
	return true
}

// decimal parses what Python's Decimal() parses of ordinary numbers:
// sign, digits, a point, an exponent.
func decimal(s string) (*big.Rat, bool) {
	if s == "" || strings.ContainsAny(s, "/xXpP_") {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

// numClose: both tokens numbers with |a-b| <= atol + rtol*|b|
// (numpy.isclose), one of them written as a float. Integers compare
// exactly: TACO's allclose would take 1000000001 for 1000000000, a wrong
// answer a policy would learn from.
func numClose(a, b string, rtol, atol float64) bool {
	if !strings.ContainsAny(a, ".eE") && !strings.ContainsAny(b, ".eE") {
		return false
	}
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	if err1 != nil || err2 != nil || math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) {
		return false
	}
	return math.Abs(x-y) <= atol+rtol*math.Abs(y)
}
