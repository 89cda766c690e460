package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/prorl/prorl/sdk"
)

//go:embed judge.py
var judgeSource []byte

// Verdicts, as judges write them.
const (
	VerdictAC  = "AC"  // accepted
	VerdictWA  = "WA"  // wrong answer
	VerdictTLE = "TLE" // time limit exceeded
	VerdictMLE = "MLE" // memory limit exceeded
	VerdictRE  = "RE"  // runtime error (or no result)
	VerdictCE  = "CE"  // compile error
	VerdictOLE = "OLE" // output larger than the judge keeps
)

type runResult struct {
	Time      float64 `json:"time"`
	TimedOut  bool    `json:"timed_out"`
	Stdout    string  `json:"stdout"`
	Truncated bool    `json:"stdout_truncated"`
	Stderr    string  `json:"stderr"`
	Exit      *int    `json:"exit"`
	Signal    *int    `json:"signal"`
}

type judgeOutput struct {
	CompileError string       `json:"compile_error"`
	Results      []*runResult `json:"results"`
	Literals     []struct {
		OK    bool            `json:"ok"`
		Value json.RawMessage `json:"value"`
		Error string          `json:"error"`
	} `json:"literals"`
}

// limits of one judge run.
type limits struct {
	time    float64
	memMB   int
	workers int
}

// judge runs the solution on every test in the sandbox and returns one
// verdict per test. Expected values never enter the sandbox.
func judge(ctx context.Context, h sdk.Host, sandboxID string, t *Task, solution string, lim limits) ([]string, []*runResult, error) {
	expected := make([]json.RawMessage, len(t.Tests))
	if t.Mode == ModeFunction {
		if err := literalExpectations(ctx, h, sandboxID, t, expected); err != nil {
			return nil, nil, err
		}
	}
	tests := make([]map[string]string, len(t.Tests))
	for i, c := range t.Tests {
		if t.Mode == ModeStdio {
			tests[i] = map[string]string{"input": c.Input}
		} else {
			tests[i] = map[string]string{"call": c.Call}
		}
	}
	spec, _ := json.Marshal(map[string]any{"mode": t.Mode, "solution": solution, "tests": tests,
		"time_limit": lim.time, "memory_mb": lim.memMB, "workers": lim.workers, "max_output": maxOutput})
	var out judgeOutput
	verdicts := make([]string, len(t.Tests))
	if err := runJudge(ctx, h, sandboxID, spec, len(t.Tests), lim, &out); err != nil {
		var k *judgeKilled
		if !errors.As(err, &k) {
			return nil, nil, err
		}
		// The code under test killed or stalled its driver: that is the
		// solution failing, scored as such, never an infrastructure failure.
		v := VerdictRE
		if k.timedOut {
			v = VerdictTLE
		}
		for i := range verdicts {
			verdicts[i] = v
		}
		return verdicts, nil, nil
	}
	if out.CompileError != "" {
		for i := range verdicts {
			verdicts[i] = VerdictCE
		}
		return verdicts, nil, nil
	}
	if len(out.Results) != len(t.Tests) {
		return nil, nil, fmt.Errorf("judge returned %d results for %d tests", len(out.Results), len(t.Tests))
	}
	for i, r := range out.Results {
		verdicts[i] = verdict(t, i, r, expected[i])
	}
	return verdicts, out.Results, nil
}

const maxOutput = 1 << 16

func runJudge(ctx context.Context, h sdk.Host, sandboxID string, spec []byte, n int, lim limits, out *judgeOutput) error {
	// Wall time: every test at its limit, spread over the workers, plus start-up.
	budget := lim.time*math.Ceil(float64(n)/float64(max(lim.workers, 1)))*1.5 + 10
	// The judge travels on the command line and the spec (solution and
	// inputs) on stdin: nothing is left in the sandbox's files.
	res, err := h.Exec(ctx, sandboxID, sdk.ExecRequest{Argv: []string{"python3", "-I", "-c", string(judgeSource)}, Stdin: spec,
		Timeout: uint32(budget * 1000)})
	if err != nil {
		return fmt.Errorf("run judge: %w", err)
	}
	if res.TimedOut || res.ExitCode >= 128 {
		return &judgeKilled{timedOut: res.TimedOut, code: res.ExitCode}
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("judge failed (exit %d): %.500s", res.ExitCode, res.Stderr)
	}
	if err := json.Unmarshal(bytes.TrimSpace(res.Stdout), out); err != nil {
		return fmt.Errorf("judge output: %w (%.200s)", err, res.Stdout)
	}
	return nil
}

// judgeKilled is a judge that was killed by a signal or ran past its wall
// time: only the code under test runs beside it.
type judgeKilled struct {
	timedOut bool
	code     int
}

func (k *judgeKilled) Error() string {
	if k.timedOut {
		return "judge timed out"
	}
	return fmt.Sprintf("judge killed (exit %d)", k.code)
}

// literalExpectations evaluates assert-style expected literals in the
// sandbox before the solution is written there.
func literalExpectations(ctx context.Context, h sdk.Host, sandboxID string, t *Task, expected []json.RawMessage) error {
	var lits []string
	for _, c := range t.Tests {
		if c.ExpectedLiteral != "" {
			lits = append(lits, c.ExpectedLiteral)
		}
	}
	if len(lits) > 0 {
		spec, _ := json.Marshal(map[string]any{"mode": "literals", "literals": lits})
		var out judgeOutput
		if err := runJudge(ctx, h, sandboxID, spec, 1, limits{time: 5, workers: 1}, &out); err != nil {
			return err
		}
		if len(out.Literals) != len(lits) {
			return fmt.Errorf("judge evaluated %d of %d literals", len(out.Literals), len(lits))
		}
		k := 0
		for i, c := range t.Tests {
			if c.ExpectedLiteral == "" {
				continue
			}
			l := out.Literals[k]
			k++
			if !l.OK {
				return sdk.InvalidTask("tests", "expected value %q of test %d is not a Python literal: %s", c.ExpectedLiteral, i, l.Error)
			}
			expected[i] = l.Value
		}
	}
	for i, c := range t.Tests {
		if expected[i] == nil {
			expected[i] = c.ExpectedJSON
		}
	}
	return nil
}

func verdict(t *Task, i int, r *runResult, expectedJSON json.RawMessage) string {
	switch {
	case r == nil:
		return VerdictRE
	case r.TimedOut || (r.Signal != nil && *r.Signal == 24): // SIGXCPU: the CPU limit
		return VerdictTLE
	case strings.Contains(r.Stderr, "MemoryError") || (r.Exit != nil && *r.Exit == 3 && strings.Contains(r.Stderr, "MemoryError")):
		return VerdictMLE
	case r.Signal != nil || r.Exit == nil || *r.Exit != 0:
		return VerdictRE
	case r.Truncated:
		return VerdictOLE
	}
	if t.Mode == ModeStdio {
		if outputsMatch(r.Stdout, t.Tests[i].Expected, t.FloatTol) {
			return VerdictAC
		}
		return VerdictWA
	}
	got, ok := resultOf(r.Stdout)
	if !ok {
		return VerdictRE // returned without a result: exited early
	}
	if jsonEqual(got, expectedJSON, t.FloatTol) || (t.Tests[i].ReturnInList && jsonEqual(json.RawMessage("["+string(got)+"]"), expectedJSON, t.FloatTol)) {
		return VerdictAC
	}
	return VerdictWA
}

const resultMark = "\x00prorl-result\x00"

// resultOf is the JSON after the last result mark (the function's value).
func resultOf(stdout string) (json.RawMessage, bool) {
	i := strings.LastIndex(stdout, resultMark)
	if i < 0 {
		return nil, false
	}
	line, _, _ := strings.Cut(stdout[i+len(resultMark):], "\n")
	if !json.Valid([]byte(line)) {
		return nil, false
	}
	return json.RawMessage(line), true
}

// outputsMatch applies the usual judge rules: line endings and trailing
// whitespace (of lines and of the whole output) do not matter; with a
// float tolerance, numeric tokens compare within it.
func outputsMatch(got, want string, tol float64) bool {
	g, w := normLines(got), normLines(want)
	if len(g) != len(w) {
		return false
	}
	for i := range g {
		if g[i] == w[i] {
			continue
		}
		if tol <= 0 {
			return false
		}
		gt, wt := strings.Fields(g[i]), strings.Fields(w[i])
		if len(gt) != len(wt) {
			return false
		}
		for k := range gt {
			if gt[k] != wt[k] && !floatsClose(gt[k], wt[k], tol) {
				return false
			}
		}
	}
	return true
}

func normLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	lines := strings.Split(strings.TrimRight(s, " \t\n\r"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	return lines
}

func floatsClose(a, b string, tol float64) bool {
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	if err1 != nil || err2 != nil || math.IsNaN(x) || math.IsNaN(y) {
		return false
	}
	return math.Abs(x-y) <= tol*math.Max(1, math.Abs(y))
}

// jsonEqual compares JSON values; numbers within tol when it is set, and
// an integer-valued float equal to the integer.
func jsonEqual(a, b json.RawMessage, tol float64) bool {
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return false
	}
	return valuesEqual(x, y, tol)
}

func valuesEqual(x, y any, tol float64) bool {
	switch a := x.(type) {
	case json.Number:
		b, ok := y.(json.Number)
		if !ok {
			return false
		}
		if a == b {
			return true
		}
		fa, err1 := a.Float64()
		fb, err2 := b.Float64()
		if err1 != nil || err2 != nil {
			return false
		}
		return fa == fb || (tol > 0 && math.Abs(fa-fb) <= tol*math.Max(1, math.Abs(fb)))
	case []any:
		b, ok := y.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !valuesEqual(a[i], b[i], tol) {
				return false
			}
		}
		return true
	case map[string]any:
		b, ok := y.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			w, ok := b[k]
			if !ok || !valuesEqual(v, w, tol) {
				return false
			}
		}
		return true
	}
	return x == y
}
