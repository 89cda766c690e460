package stemans

import (
	"regexp"

	"github.com/prorl/prorl/sdk/mathans"
)

// FreeEqual compares a short free-form answer with the reference:
// normalised text (case, punctuation, spacing, \text{}) or, when the
// reference is mathematical, the math domain's equivalence. Words are not
// algebra: read as products of variables, "mitochondria1" would equal
// "mitochondria".
func FreeEqual(answer, reference string) bool {
	if a, r := normText(answer), normText(reference); a != "" && a == r {
		return true
	}
	return isMath(reference) && isMath(answer) && mathans.Equivalent(answer, reference)
}

var (
	latexCommandRe = regexp.MustCompile(`\\[A-Za-z]+`)
	functionRe     = regexp.MustCompile(`\b(?:sin|cos|tan|cot|sec|csc|arcsin|arccos|arctan|sinh|cosh|tanh|log|ln|exp|sqrt|pi|inf|infty|deg)\b`)
	wordRe         = regexp.MustCompile(`[A-Za-z]{2,}`)
)

// isMath: no word of two or more letters once LaTeX commands and function
// names are set aside ("x^2+2x+1", "\frac{1}{2}", "2\sin(x)" are; "oxygen",
// "Newton's law" are not).
func isMath(s string) bool {
	s = latexCommandRe.ReplaceAllString(stripTextMacroKeep(s), " ")
	s = functionRe.ReplaceAllString(s, " ")
	return !wordRe.MatchString(s)
}

// stripTextMacroKeep keeps \text{...} content: a unit or word inside it is
// still a word.
func stripTextMacroKeep(s string) string { return textMacroRe.ReplaceAllString(s, " $1 ") }

// FinalAnswer is the answer a response commits to: the last \boxed{}, an
// "answer is ..." phrase, else "" (method none).
func FinalAnswer(resp string) (answer, method string) {
	a, m := mathans.Extract(resp)
	switch m {
	case mathans.MethodBoxed:
		return a, MethodBoxed
	case mathans.MethodAnswerIs:
		return a, MethodAnswerIs
	}
	return "", MethodNone
}
