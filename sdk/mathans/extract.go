// Package mathans extracts final answers from model output and decides
// whether two math answers are equivalent. It lives in the SDK so every
// domain that scores math (math, STEM) shares one implementation.
package mathans

import (
	"regexp"
	"strings"
)

// Extraction methods reported in metrics.
const (
	MethodBoxed    = "boxed"
	MethodAnswerIs = "answer_is"
	MethodNone     = "none"
)

// LastBoxed returns the content of the last \boxed{...} or \fbox{...} in s,
// with nested braces balanced. "\boxed 5" (no braces) takes the next token.
// One pass matches every brace, so the cost is linear in len(s) however
// many unbalanced boxes a response holds.
func LastBoxed(s string) (string, bool) {
	closeOf := matchBraces(s)
	type box struct{ at, n int }
	var boxes []box
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '\\')
		if j < 0 {
			break
		}
		i += j
		switch {
		case strings.HasPrefix(s[i:], `\boxed`):
			boxes = append(boxes, box{i, len(`\boxed`)})
		case strings.HasPrefix(s[i:], `\fbox`):
			boxes = append(boxes, box{i, len(`\fbox`)})
		}
		i++
	}
	for k := len(boxes) - 1; k >= 0; k-- {
		j := boxes[k].at + boxes[k].n
		for j < len(s) && s[j] == ' ' {
			j++
		}
		switch {
		case j < len(s) && s[j] == '{':
			if c, ok := closeOf[j]; ok {
				return s[j+1 : c], true
			}
		case j > boxes[k].at+boxes[k].n && j < len(s):
			tok := s[j:]
			if e := strings.IndexAny(tok, " $\n"); e >= 0 {
				tok = tok[:e]
			}
			if tok != "" {
				return tok, true
			}
		}
	}
	return "", false
}

// matchBraces maps the position of every '{' that is closed to the
// position of its '}' (escaped braces, \{ and \}, do not count).
func matchBraces(s string) map[int]int {
	out := map[int]int{}
	var open []int
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			open = append(open, i)
		case '}':
			if n := len(open); n > 0 {
				out[open[n-1]] = i
				open = open[:n-1]
			}
		}
	}
	return out
}

var answerIsRe = regexp.MustCompile(`(?i)answer\s*(?:is|:)[:\s]*`)

// Extract returns the final answer in a model's response: the last boxed
// expression, else the text after the last "the answer is".
func Extract(s string) (answer, method string) {
	if b, ok := LastBoxed(s); ok {
		return strings.TrimSpace(b), MethodBoxed
	}
	ms := answerIsRe.FindAllStringIndex(s, -1)
	if len(ms) > 0 {
		a := s[ms[len(ms)-1][1]:]
		// "answer is 3. Next sentence" keeps only the first sentence.
		if i := strings.Index(a, ". "); i >= 0 {
			a = a[:i]
		}
		if i := strings.IndexByte(a, '\n'); i >= 0 {
			a = a[:i]
		}
		a = strings.TrimSpace(a)
		a = strings.TrimRight(a, ".")
		a = strings.TrimSpace(a)
		if strings.HasPrefix(a, "$") && strings.HasSuffix(a, "$") && len(a) >= 2 {
			a = strings.Trim(a, "$")
		}
		if a != "" {
			return a, MethodAnswerIs
		}
	}
	return "", MethodNone
}
