// Package testlog reads test runners' logs into a status per test, the way
// SWE-bench's harness grades: pytest (-rA summaries and verbose lines),
// unittest (-v) and Django's runner (-v 2, unittest's format).
package testlog

import (
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Status of one test.
type Status string

// Statuses. PASSED and XFAIL count as passing.
const (
	Passed  Status = "PASSED"
	Failed  Status = "FAILED"
	Error   Status = "ERROR"
	Skipped Status = "SKIPPED"
	XFail   Status = "XFAIL"
	XPass   Status = "XPASS"
)

// Passing reports whether a status counts as a pass.
func (s Status) Passing() bool { return s == Passed || s == XFail }

var (
	// A test id; parameters in brackets may hold spaces.
	pytestSummary = regexp.MustCompile(`^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+([^\s\[]+(?:\[[^\]]*\])?)(?:\s+-\s.*)?$`)
	pytestVerbose = regexp.MustCompile(`^([^\s\[]+::[^\s\[]+(?:\[[^\]]*\])?)\s+(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?:\s|$)`)
	// unittest -v / Django -v 2: "test_x (pkg.mod.Class) ... ok", possibly
	// with the docstring's first line between the name and " ... ".
	unittestName = regexp.MustCompile(`^\w+ \([\w.]+\)`)
)

// Parse reads a log of any of the supported runners, for a row that names
// its own test command and no log_parser: every test under its full id,
// and also under the ids SWE-bench's harness gives it, which its rows
// store (parse_log_pytest's, a parametrized id cut at its first space;
// parse_log_django's, a unittest docstring line in place of the name). A
// test reported more than once keeps its last status (a rerun).
func Parse(log string) map[string]Status {
	out := ParseDjango(log)
	for k, v := range ParsePytest(log) {
		if slices.Contains(statuses, v) { // not "ERROR:", which it takes from a unittest line
			out[k] = v
		}
	}
	maps.Copy(out, parseFull(log))
	return out
}

var statuses = []Status{Passed, Failed, Error, Skipped, XFail, XPass}

// parseFull reads every test under its full id.
func parseFull(log string) map[string]Status {
	out := map[string]Status{}
	lines := strings.Split(strings.ReplaceAll(log, "\r\n", "\n"), "\n")
	for i, raw := range lines {
		line := strings.TrimRight(raw, " \t")
		if m := pytestSummary.FindStringSubmatch(line); m != nil {
			out[m[2]] = Status(m[1])
			continue
		}
		if m := pytestVerbose.FindStringSubmatch(line); m != nil {
			out[m[1]] = Status(m[2])
			continue
		}
		name, result, ok := unittestResult(line)
		if ok && name == "" && i > 0 {
			// The docstring line carried the result; the name is on the line before.
			if n := unittestName.FindString(strings.TrimSpace(lines[i-1])); n != "" {
				name = n
			}
		}
		if ok && name != "" {
			out[name] = result
		}
	}
	return out
}

// unittestResult reads "NAME ... RESULT" (name may be empty when the
// line is a docstring).
func unittestResult(line string) (name string, st Status, ok bool) {
	i := strings.LastIndex(line, " ... ")
	if i < 0 {
		return "", "", false
	}
	res := strings.TrimSpace(line[i+5:])
	switch {
	case res == "ok":
		st = Passed
	case res == "FAIL":
		st = Failed
	case res == "ERROR":
		st = Error
	case strings.HasPrefix(res, "skipped"):
		st = Skipped
	case res == "expected failure":
		st = XFail
	case res == "unexpected success":
		st = XPass
	default:
		return "", "", false
	}
	head := strings.TrimSpace(line[:i])
	if n := unittestName.FindString(head); n != "" && n == head {
		return n, st, true
	}
	return "", st, true
}

// Grade is SWE-bench's rule: resolved iff every FAIL_TO_PASS test passes
// and every PASS_TO_PASS test still passes. A test missing from the log
// counts as failing.
func Grade(statuses map[string]Status, failToPass, passToPass []string) (resolved bool, f2p, p2p int) {
	for _, t := range failToPass {
		if statuses[t].Passing() {
			f2p++
		}
	}
	for _, t := range passToPass {
		if statuses[t].Passing() {
			p2p++
		}
	}
	return f2p == len(failToPass) && p2p == len(passToPass), f2p, p2p
}
