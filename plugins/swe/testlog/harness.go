package testlog

import (
	"regexp"
	"strings"
	"unicode"
)

// The parsers SWE-bench's harness (swebench 4.1.0,
// swebench/harness/log_parsers/python.py) maps each repository to, with
// its id conventions reproduced exactly: ids are the whitespace-split
// token after the status (so parameters with spaces are truncated, as in
// the datasets' FAIL_TO_PASS lists), Django tests are keyed by the line
// before " ... " (a docstring's first line when there is one), sympy's
// bin/test lines read "test_x ok". differential_test.go runs the
// harness's own functions on real logs and requires the same maps.

// Parser reads a test log into a status per test id.
type Parser func(log string) map[string]Status

// Parsers by the harness's names (parse_log_<name>).
var Parsers = map[string]Parser{
	"pytest":         ParsePytest,
	"pytest_options": ParsePytestOptions,
	"pytest_v2":      ParsePytestV2,
	"django":         ParseDjango,
	"seaborn":        ParseSeaborn,
	"sympy":          ParseSympy,
	"matplotlib":     ParseMatplotlib,
}

// harnessStatuses are TestStatus's values, in its order.
var harnessStatuses = []Status{Failed, Passed, Skipped, Error, XFail}

// pyFields is Python's str.split() with no argument: runs of whitespace as
// str.isspace defines it (which, unlike Go's, counts \x1c-\x1f).
func pyFields(s string) []string {
	return strings.FieldsFunc(s, pyIsSpace)
}

func pyIsSpace(r rune) bool { return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f }

// pyStrip is Python's str.strip().
func pyStrip(s string) string { return strings.TrimFunc(s, pyIsSpace) }

func statusPrefix(line string) (Status, bool) {
	for _, s := range harnessStatuses {
		if strings.HasPrefix(line, string(s)) {
			return s, true
		}
	}
	return "", false
}

// pytestLine is the shared step of parse_log_pytest and its variants:
// a line starting with a status gives its second token's status.
func pytestLine(line string) (id string, st Status, ok bool) {
	if _, ok := statusPrefix(line); !ok {
		return "", "", false
	}
	if strings.HasPrefix(line, string(Failed)) {
		line = strings.ReplaceAll(line, " - ", " ")
	}
	f := pyFields(line)
	if len(f) <= 1 {
		return "", "", false
	}
	return f[1], Status(f[0]), true
}

// ParsePytest is parse_log_pytest.
func ParsePytest(log string) map[string]Status {
	out := map[string]Status{}
	for _, line := range strings.Split(log, "\n") {
		if id, st, ok := pytestLine(line); ok {
			out[id] = st
		}
	}
	return out
}

var optionRe = regexp.MustCompile(`(.*?)\[(.*)\]`)

// ParsePytestOptions is parse_log_pytest_options: a parameter that is an
// absolute path keeps only its last element.
func ParsePytestOptions(log string) map[string]Status {
	out := map[string]Status{}
	for _, line := range strings.Split(log, "\n") {
		id, st, ok := pytestLine(line)
		if !ok {
			continue
		}
		if m := optionRe.FindStringSubmatch(id); m != nil {
			main, option := m[1], m[2]
			if strings.HasPrefix(option, "/") && !strings.HasPrefix(option, "//") && !strings.Contains(option, "*") {
				option = "/" + option[strings.LastIndex(option, "/")+1:]
			}
			id = main + "[" + option + "]"
		}
		out[id] = st
	}
	return out
}

// \p{Nd}: Python's \d matches any Unicode digit.
var colourCodeRe = regexp.MustCompile(`\[(\p{Nd}+)m`)

// ParsePytestV2 is parse_log_pytest_v2: colour codes and control
// characters removed, status first or last on the line.
func ParsePytestV2(log string) map[string]Status {
	out := map[string]Status{}
	for _, line := range strings.Split(log, "\n") {
		line = colourCodeRe.ReplaceAllString(line, "")
		line = strings.Map(func(r rune) rune {
			if r >= 1 && r < 32 {
				return -1
			}
			return r
		}, line)
		if _, ok := statusPrefix(line); ok {
			if strings.HasPrefix(line, string(Failed)) {
				line = strings.ReplaceAll(line, " - ", " ")
			}
			if f := pyFields(line); len(f) >= 2 {
				out[f[1]] = Status(f[0])
			}
			continue
		}
		for _, s := range harnessStatuses {
			if strings.HasSuffix(line, string(s)) {
				if f := pyFields(line); len(f) >= 2 {
					out[f[0]] = Status(f[1])
				}
				break
			}
		}
	}
	return out
}

// pyS is Python's \s in a str pattern (Unicode whitespace); Go's \s is ASCII.
const pyS = `[\t\n\v\f\r \x1c-\x1f\x85\p{Z}]`

var djangoPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?m)^(.*?)` + pyS + `\.\.\.` + pyS + `Testing against Django installed in ((?s:.*?)) silenced\)\.\nok$`),
	regexp.MustCompile(`(?m)^(.*?)` + pyS + `\.\.\.` + pyS + `Internal Server Error: \/(.*)\/\nok$`),
	regexp.MustCompile(`(?m)^(.*?)` + pyS + `\.\.\.` + pyS + `System check identified no issues \(0 silenced\)\nok$`),
}

// ParseDjango is parse_log_django.
func ParseDjango(log string) map[string]Status {
	out := map[string]Status{}
	prev, havePrev := "", false
	for _, line := range strings.Split(log, "\n") {
		line = pyStrip(line)
		if strings.Contains(line, "--version is equivalent to version") {
			out["--version is equivalent to version"] = Passed
		}
		if i := strings.Index(line, " ... "); i >= 0 {
			prev, havePrev = line[:i], true
		}
		for _, suffix := range []string{" ... ok", " ... OK", " ...  OK"} {
			if strings.HasSuffix(line, suffix) {
				if strings.HasPrefix(pyStrip(line), "Applying sites.0002_alter_domain_unique...test_no_migrations") {
					_, after, _ := strings.Cut(line, "...")
					line = pyStrip(after)
				}
				out[line[:strings.LastIndex(line, suffix)]] = Passed
				break
			}
		}
		if i := strings.Index(line, " ... skipped"); i >= 0 {
			out[line[:i]] = Skipped
		}
		if strings.HasSuffix(line, " ... FAIL") {
			out[line[:strings.Index(line, " ... FAIL")]] = Failed
		}
		if strings.HasPrefix(line, "FAIL:") {
			if f := pyFields(line); len(f) > 1 {
				out[pyStrip(f[1])] = Failed
			}
		}
		if strings.HasSuffix(line, " ... ERROR") {
			out[line[:strings.Index(line, " ... ERROR")]] = Error
		}
		if strings.HasPrefix(line, "ERROR:") {
			if f := pyFields(line); len(f) > 1 {
				out[pyStrip(f[1])] = Error
			}
		}
		if strings.HasPrefix(strings.TrimLeftFunc(line, pyIsSpace), "ok") && havePrev {
			out[prev] = Passed
		}
	}
	for _, re := range djangoPatterns {
		for _, m := range re.FindAllStringSubmatch(log, -1) {
			out[m[1]] = Passed
		}
	}
	return out
}

// ParseSeaborn is parse_log_seaborn.
func ParseSeaborn(log string) map[string]Status {
	out := map[string]Status{}
	for _, line := range strings.Split(log, "\n") {
		f := pyFields(line)
		switch {
		case strings.HasPrefix(line, string(Failed)):
			if len(f) > 1 {
				out[f[1]] = Failed
			}
		case strings.Contains(line, " PASSED "):
			if len(f) > 1 && f[1] == string(Passed) {
				out[f[0]] = Passed
			}
		case strings.HasPrefix(line, string(Passed)):
			if len(f) > 1 {
				out[f[1]] = Passed
			}
		}
	}
	return out
}

var sympyFailRe = regexp.MustCompile(`(_*) (.*)\.py:(.*) (_*)`)

// ParseSympy is parse_log_sympy: bin/test's "test_x ok|F|E" lines and its
// "____ path.py:test_x ____" failure headers.
func ParseSympy(log string) map[string]Status {
	out := map[string]Status{}
	for _, m := range sympyFailRe.FindAllStringSubmatch(log, -1) {
		out[m[2]+".py:"+m[3]] = Failed
	}
	for _, line := range strings.Split(log, "\n") {
		line = pyStrip(line)
		if !strings.HasPrefix(line, "test_") {
			continue
		}
		f := pyFields(line)
		if strings.HasSuffix(line, " E") {
			out[f[0]] = Error
		}
		if strings.HasSuffix(line, " F") {
			out[f[0]] = Failed
		}
		if strings.HasSuffix(line, " ok") {
			out[f[0]] = Passed
		}
	}
	return out
}

// ParseMatplotlib is parse_log_matplotlib.
func ParseMatplotlib(log string) map[string]Status {
	out := map[string]Status{}
	r := strings.NewReplacer("MouseButton.LEFT", "1", "MouseButton.RIGHT", "3")
	for _, line := range strings.Split(log, "\n") {
		if id, st, ok := pytestLine(r.Replace(line)); ok {
			out[id] = st
		}
	}
	return out
}

var ansiRe = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)

// StripANSI removes terminal escape sequences: a log written with colour
// on reads like one written without (the harness's parsers, but
// pytest_v2, would otherwise miss every coloured status line).
func StripANSI(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	return ansiRe.ReplaceAllString(s, "")
}
