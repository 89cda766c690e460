package mathans

import (
	"regexp"
	"strings"
)

var (
	thousandsRe = regexp.MustCompile(`^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$`)
	spaceRe     = regexp.MustCompile(`\s+`)
	unitWordRe  = regexp.MustCompile(`(?i)\s*(?:` + strings.Join(unitWords, "|") + `)\.?\s*(?:\^\{?[23]\}?|²|³)?\s*$`)
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
	for _, r := range []string{`\!`, `\,`, `\;`, `\:`, `\ `, `\quad`, `\qquad`, `\displaystyle`, `\left`, `\right`, `\big`, `\Big`} {
		s = strings.ReplaceAll(s, r, "")
	}
	s = strings.ReplaceAll(s, `\$`, "")
	s = strings.ReplaceAll(s, "$", "")
	s = strings.ReplaceAll(s, `\dfrac`, `\frac`)
	s = strings.ReplaceAll(s, `\tfrac`, `\frac`)
	s = strings.ReplaceAll(s, `{,}`, ",")
	for _, d := range []string{`^{\circ}`, `^\circ`, `\circ`, `°`, `\degree`} {
		s = strings.ReplaceAll(s, d, "")
	}
	s = unwrapText(s)
	s = strings.ReplaceAll(s, `\%`, "%")
	s = strings.TrimSpace(spaceRe.ReplaceAllString(s, " "))
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
	}
	// "x = 5" -> "5" when the left side is one variable.
	if i := strings.IndexByte(s, '='); i > 0 && strings.Count(s, "=") == 1 {
		lhs := strings.TrimSpace(s[:i])
		if isSimpleVar(lhs) {
			s = strings.TrimSpace(s[i+1:])
		}
	}
	return strings.TrimSpace(s)
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

var textCmds = []string{`\textbf`, `\textit`, `\text`, `\mbox`, `\mathrm`, `\mathbf`, `\operatorname`}

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
