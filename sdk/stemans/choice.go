// Package stemans extracts and scores STEM answers: multiple-choice letters
// (GPQA, MMLU-Pro, SuperGPQA style, options A–J), numeric answers with units
// and tolerances (SciBench style), and free-form short answers (normalised
// match, or the math domain's equivalence through sdk/mathans).
package stemans

import (
	"regexp"
	"strings"
	"unicode"

	"github.com/prorl/prorl/sdk/mathans"
)

// Extraction methods, reported in scores so that format problems show.
const (
	MethodBoxed    = "boxed"
	MethodAnswerIs = "answer_is"
	MethodLetter   = "last_letter"
	MethodText     = "option_text"
	MethodNone     = "none"
)

// Letters are the option letters in order; a task with n options uses the
// first n.
const Letters = "ABCDEFGHIJ"

var (
	// "Answer: C", "the answer is (C)", "correct answer is: C.", "Final answer - C"
	answerIsRe = regexp.MustCompile(`(?i)(?:final\s+answer|correct\s+(?:answer|option|choice)|answer|option|choice)\s*(?:is|would\s+be|should\s+be|:|-|=)?\s*(?:option\s+|choice\s+)?[:\s]*[\(\[\*]*\s*([A-J])\s*[\)\]\*]*(?:[\s.,;:!]|$)`)
	// "(C)" anywhere, or a letter standing alone: "C." "C)" at the end of a line.
	parenLetterRe = regexp.MustCompile(`\(([A-J])\)`)
	lineLetterRe  = regexp.MustCompile(`(?m)^\s*\**\s*([A-J])\s*[\).:]?\s*\**\s*$`)
)

// Choice extracts the chosen option letter from a response to a question
// with the given options (their texts, in letter order; may be nil). In
// order of trust: the last \boxed{} (a letter, "(C)", "C. text", or an
// option's text), the last "answer is X" phrase, the last "(X)", the last
// line that is a lone letter, then a final line equal to an option's text.
func Choice(resp string, options []string) (letter, method string) {
	valid := Letters
	if n := len(options); n > 0 && n <= len(Letters) {
		valid = Letters[:n]
	}
	ok := func(l string) bool { return len(l) == 1 && strings.Contains(valid, l) }
	if b, found := mathans.LastBoxed(resp); found {
		if l := letterOf(b, options); ok(l) {
			return l, MethodBoxed
		}
	}
	if m := answerIsRe.FindAllStringSubmatch(resp, -1); len(m) > 0 {
		for i := len(m) - 1; i >= 0; i-- {
			if ok(m[i][1]) {
				return m[i][1], MethodAnswerIs
			}
		}
	}
	for _, re := range []*regexp.Regexp{parenLetterRe, lineLetterRe} {
		m := re.FindAllStringSubmatch(resp, -1)
		for i := len(m) - 1; i >= 0; i-- {
			if ok(m[i][1]) {
				return m[i][1], MethodLetter
			}
		}
	}
	lines := strings.Split(strings.TrimSpace(resp), "\n")
	if l := optionByText(lines[len(lines)-1], options); ok(l) {
		return l, MethodText
	}
	return "", MethodNone
}

// letterOf reads a boxed answer: "C", "(C)", "C.", "C: text", "\text{C}",
// or an option's text.
func letterOf(s string, options []string) string {
	s = strings.TrimSpace(stripTextMacro(s))
	t := strings.Trim(s, "()[]*. ")
	if len(t) == 1 && t[0] >= 'A' && t[0] <= 'J' {
		return t
	}
	if len(s) >= 2 && s[0] >= 'A' && s[0] <= 'J' && strings.ContainsRune(".):", rune(s[1])) {
		return s[:1]
	}
	if len(s) >= 3 && s[0] == '(' && s[1] >= 'A' && s[1] <= 'J' && s[2] == ')' {
		return s[1:2]
	}
	return optionByText(s, options)
}

func optionByText(s string, options []string) string {
	n := normText(s)
	if n == "" {
		return ""
	}
	found := ""
	for i, o := range options {
		if i < len(Letters) && normText(o) == n {
			if found != "" {
				return "" // two options with the same text: ambiguous
			}
			found = Letters[i : i+1]
		}
	}
	return found
}

var textMacroRe = regexp.MustCompile(`\\(?:text|textbf|mathrm|mathbf)\{([^{}]*)\}`)

func stripTextMacro(s string) string { return textMacroRe.ReplaceAllString(s, "$1") }

// normText lowercases, drops punctuation and collapses spaces, for matching
// an answer against option texts.
func normText(s string) string {
	s = stripTextMacro(s)
	var b strings.Builder
	space := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r == '\'' || r == '’':
			// "Newton's" and "Newtons" are the same answer.
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteRune(r)
		case unicode.IsSpace(r) || unicode.IsPunct(r):
			space = true
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
