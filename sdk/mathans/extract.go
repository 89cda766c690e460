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
func LastBoxed(s string) (string, bool) {
	best := -1
	bestLen := 0
	for _, cmd := range []string{`\boxed`, `\fbox`} {
		if i := strings.LastIndex(s, cmd); i > best {
			best, bestLen = i, len(cmd)
		}
	}
	// A later boxed of the other kind may hide behind an unbalanced one; scan
	// from the right for the last complete box.
	for best >= 0 {
		rest := s[best+bestLen:]
		if content, ok := braced(rest); ok {
			return content, true
		}
		if len(rest) > 0 && rest[0] == ' ' {
			tok := strings.TrimSpace(rest)
			if end := strings.IndexAny(tok, " $\n"); end >= 0 {
				tok = tok[:end]
			}
			if tok != "" {
				return tok, true
			}
		}
		prev := -1
		for _, cmd := range []string{`\boxed`, `\fbox`} {
			if i := strings.LastIndex(s[:best], cmd); i > prev {
				prev, bestLen = i, len(cmd)
			}
		}
		best = prev
	}
	return "", false
}

// braced returns the content of the brace group that s starts with
// (after optional spaces), or false when it is not balanced.
func braced(s string) (string, bool) {
	s = strings.TrimLeft(s, " ")
	if !strings.HasPrefix(s, "{") {
		return "", false
	}
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // skip escaped char such as \{ or \}
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return s[1:i], true
			}
		}
	}
	return "", false
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
