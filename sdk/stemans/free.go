package stemans

import "github.com/prorl/prorl/sdk/mathans"

// FreeEqual compares a short free-form answer with the reference:
// normalised text (case, punctuation, spacing, \text{}) or, for anything
// mathematical, the math domain's equivalence.
func FreeEqual(answer, reference string) bool {
	if a, r := normText(answer), normText(reference); a != "" && a == r {
		return true
	}
	return mathans.Equivalent(answer, reference)
}

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
