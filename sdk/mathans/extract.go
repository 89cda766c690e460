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
	// MethodMathSpan is the last $...$, \(...\) or \[...\] of a response
	// without a box or "answer is"; MethodLastNumber its last number.
	MethodMathSpan   = "math_span"
	MethodLastNumber = "last_number"
	MethodNone       = "none"
)

// LastBoxed returns the content of the last \boxed{...} or \fbox{...} in s,
// with nested braces balanced. "\boxed 5" (no braces) takes the next token.
func LastBoxed(s string) (string, bool) {
	bs := Boxed(s)
	if len(bs) == 0 {
		return "", false
	}
	return bs[len(bs)-1], true
}

// Boxed returns the contents of every outermost \boxed{...} or \fbox{...}
// in s, in order. One pass matches every brace, so the cost is linear in
// len(s) however many unbalanced boxes a response holds.
func Boxed(s string) []string {
	closeOf := matchBraces(s)
	var out []string
	end := -1 // the end of the last box taken: boxes inside it are its content
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '\\')
		if j < 0 {
			break
		}
		i += j
		n := 0
		switch {
		case strings.HasPrefix(s[i:], `\boxed`):
			n = len(`\boxed`)
		case strings.HasPrefix(s[i:], `\fbox`):
			n = len(`\fbox`)
		}
		if n == 0 || i < end {
			i++
			continue
		}
		j = i + n
		for j < len(s) && s[j] == ' ' {
			j++
		}
		switch {
		case j < len(s) && s[j] == '{':
			if c, ok := closeOf[j]; ok {
				out, end = append(out, s[j+1:c]), c
			}
		case j > i+n && j < len(s):
			tok := s[j:]
			if e := strings.IndexAny(tok, " $\n"); e >= 0 {
				tok = tok[:e]
			}
			if tok != "" {
				out, end = append(out, tok), j+len(tok)
			}
		}
		i++
	}
	return out
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

var (
	answerIsRe    = regexp.MustCompile(`(?i)answer\s*(?:is|:)[:\s]*`)
	finalAnswerRe = regexp.MustCompile(`(?i)final answer is\s*\$`)
)

// Extract returns the final answer in a model's response, in this order:
// the boxed answers (several distinct boxes are one multi-answer, "6, 8",
// as Math-Verify reads them); the text after the last "the answer is";
// the last math span; a last line that is an expression; the last number.
func Extract(s string) (answer, method string) {
	ms := answerIsRe.FindAllStringIndex(s, -1)
	if bs := Boxed(s); len(bs) > 0 {
		// A box, unless Minerva's closing statement follows the last box
		// ("\boxed{255} ... The final answer is $10,455$. I hope it is
		// correct."), which Math-Verify ranks first; a plain "the answer
		// is" after a box does not displace it.
		if f := finalAnswerRe.FindAllStringIndex(s, -1); len(f) > 0 && f[len(f)-1][0] > strings.LastIndex(s, `box`) {
			if a, ok := answerText(s[f[len(f)-1][1]-1:]); ok {
				return a, MethodAnswerIs
			}
		}
		return joinDistinct(bs), MethodBoxed
	}
	if len(ms) > 0 {
		if a, ok := answerText(s[ms[len(ms)-1][1]:]); ok {
			return a, MethodAnswerIs
		}
	}
	return extractRest(s)
}

// answerText is the answer stated after "the answer is": its first
// sentence, without $; a sentence about the answer ("The largest $n$ is
// 34") gives its one number, and none when it holds several (a hedge).
func answerText(a string) (string, bool) {
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
	if inner, ok := strings.CutPrefix(a, `\(`); ok && strings.HasSuffix(inner, `\)`) {
		a = strings.TrimSpace(strings.TrimSuffix(inner, `\)`))
	}
	if a == "" {
		return "", false
	}
	if !wordRe.MatchString(latexCmdRe.ReplaceAllString(a, "")) {
		return a, true
	}
	if ns := numberRe.FindAllString(a, 3); len(ns) == 1 {
		return ns[0], true
	}
	return a, true
}

// A word of prose (three letters or more, LaTeX commands aside) makes an
// answer a sentence.
var (
	wordRe     = regexp.MustCompile(`[A-Za-z]{3,}`)
	latexCmdRe = regexp.MustCompile(`\\[A-Za-z]+|\\text\{[^}]*\}`)
)

// numberRe is a number as a sentence holds one ("34", "2,74", "-1.5").
var numberRe = regexp.MustCompile(`-?\d+(?:[.,]\d+)*`)

// extractRest reads a response with neither a box nor "the answer is".
func extractRest(s string) (answer, method string) {
	// Then, as Math-Verify: the last math span, unless the prose after it
	// states a number ("... $d = \frac{90}{n}$ ... so there are 12
	// sequences."); else a last number.
	if m, end, ok := lastMathSpanAt(s); ok {
		if n := lastNumber(s); n != "" && strings.LastIndex(s, n) > end {
			return n, MethodLastNumber
		}
		return m, MethodMathSpan
	}
	// A response whose last line is an expression by itself (\frac{1}{2}).
	last := strings.TrimSpace(s[strings.LastIndexByte(strings.TrimSpace(s), '\n')+1:])
	if last != "" && len(last) <= 200 && strings.ContainsAny(last, `0123456789\`) {
		if _, err := ParseExpr(Normalize(last)); err == nil {
			return last, MethodLastNumber
		}
	}
	if n := lastNumber(s); n != "" {
		return n, MethodLastNumber
	}
	return "", MethodNone
}

// joinDistinct joins answers, each once, in order of first appearance.
func joinDistinct(bs []string) string {
	seen := make(map[string]bool, len(bs))
	var out []string
	for _, b := range bs {
		b = strings.TrimSpace(b)
		if k := squash(b); b != "" && !seen[k] {
			seen[k] = true
			out = append(out, b)
		}
	}
	return strings.Join(out, ", ")
}

// lastNumber is the last number in s, found scanning from the end: digits
// with "." or "," between digit groups ("1,000.99", "2,74"), and a sign.
func lastNumber(s string) string {
	isDigit := func(c byte) bool { return c >= '0' && c <= '9' }
	end := len(s)
	for end > 0 && !isDigit(s[end-1]) {
		end--
	}
	if end == 0 {
		return ""
	}
	start := end
	for start > 0 {
		switch {
		case isDigit(s[start-1]):
			start--
		case (s[start-1] == '.' || s[start-1] == ',') && start >= 2 && isDigit(s[start-2]):
			start--
		default:
			goto done
		}
	}
done:
	// A fraction written a/b.
	if start >= 2 && s[start-1] == '/' && isDigit(s[start-2]) {
		start--
		for start > 0 && isDigit(s[start-1]) {
			start--
		}
	}
	if start > 0 && s[start-1] == '-' {
		start--
	}
	return s[start:end]
}

// lastDollar is the position of the last $ in s that is not escaped, or -1.
func lastDollar(s string) int {
	for i := strings.LastIndexByte(s, '$'); i >= 0; i = strings.LastIndexByte(s[:i], '$') {
		if i == 0 || s[i-1] != '\\' {
			return i
		}
	}
	return -1
}

// lastMathSpanAt returns the content of the last $...$, $$...$$, \(...\)
// or \[...\] in s and the position of its end. One scan from the end, so
// its cost is linear.
func lastMathSpanAt(s string) (string, int, bool) {
	type span struct{ open, close string }
	best, content := -1, ""
	for _, sp := range []span{{`\(`, `\)`}, {`\[`, `\]`}} {
		end := strings.LastIndex(s, sp.close)
		if end < 0 {
			continue
		}
		start := strings.LastIndex(s[:end], sp.open)
		if start >= 0 && end > best {
			best, content = end, s[start+len(sp.open):end]
		}
	}
	// Dollars: the last closing $ and the $ before it (a $$ pair counts
	// once; an escaped \$ is a dollar sign, not a delimiter).
	if end := lastDollar(s); end > best {
		inner := strings.TrimRight(s[:end], "$")
		if start := lastDollar(inner); start >= 0 {
			best, content = end, strings.TrimLeft(inner[start+1:], "$")
		}
	}
	content = strings.TrimSpace(content)
	return content, best, best >= 0 && content != ""
}
