package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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
	Time      float64      `json:"time"`
	TimedOut  bool         `json:"timed_out"`
	Stdout    string       `json:"stdout"`
	Truncated bool         `json:"stdout_truncated"`
	Stderr    string       `json:"stderr"`
	Exit      *int         `json:"exit"`
	Signal    *int         `json:"signal"`
	Check     *checkResult `json:"check"`
}

// checkResult is what the checker process made of a check test.
type checkResult struct {
	Passed bool     `json:"passed"`
	Kind   string   `json:"kind"` // assert, remote, memory, error, load, syntax, dead
	Error  string   `json:"error"`
	Failed []string `json:"failed"`
}

type judgeOutput struct {
	CompileError string       `json:"compile_error"`
	Results      []*runResult `json:"results"`
	Checks       []struct {
		Exit    int    `json:"exit"`
		Message string `json:"message"`
	} `json:"checks"`
}

// limits of one judge run.
type limits struct {
	time    float64
	memMB   int
	workers int
}

// answer is the solution to judge.
type answer struct {
	lang, code string
}

// judgement is what the judge made of an answer.
type judgement struct {
	verdicts        []string
	runs            []*runResult
	compileError    string
	checkerFailures int
}

// judge runs the solution on every test in the sandbox. Expected stdio
// outputs and function results never enter the sandbox; check tests carry
// theirs into a checker process the solution cannot reach.
func judge(ctx context.Context, h sdk.Sandboxes, sandboxID string, t *Task, ans answer, lim limits) (*judgement, error) {
	j := &judgement{verdicts: make([]string, len(t.Tests))}
	spec := map[string]any{"mode": t.Mode, "language": ans.lang, "solution": ans.code, "time_limit": lim.time,
		"memory_mb": lim.memMB, "workers": lim.workers, "max_output": maxOutput}
	tests := make([]map[string]string, len(t.Tests))
	for i, c := range t.Tests {
		switch t.Mode {
		case ModeStdio:
			tests[i] = map[string]string{"input": c.Input}
		case ModeFunction:
			tests[i] = map[string]string{"fn": c.Fn, "args": string(c.Args)}
		default:
			if c.Pytest != "" {
				tests[i] = map[string]string{"pytest": c.Pytest}
			} else {
				tests[i] = map[string]string{"check": c.Check, "then": c.Then, "candidate": c.Candidate}
			}
		}
	}
	spec["tests"] = tests
	if ans.lang == "python" {
		switch t.Mode {
		case ModeCheck:
			spec["prelude"] = "from typing import *\n"
			spec["setup"] = t.Setup
			if t.PromptCode != "" {
				spec["prompt"] = t.PromptCode
			}
		default:
			spec["prelude"] = pythonPrelude
		}
	}
	body, _ := json.Marshal(spec)
	var out judgeOutput
	// The judge ends each test itself (CPU limit, and a wall-clock backstop
	// of 3·limit+2 s that does not count waiting for a CPU: judge.py's
	// wall_limit). This outer wall clock counts everything, waiting
	// included, and its expiry scores every test TLE, so it must not fire
	// before the judge's own limits could: under load a correct answer
	// once got 0 here (8 evaluations at once in CI, limit 10 s, budget 25 s;
	// then 0.5 s of CPU beside busy loops on every core, limit 1 s, 15 s).
	// The minute on top is for starting the sandbox and the interpreter on
	// a loaded machine; only a solution that stalls its driver waits it out.
	budget := (3*lim.time+2)*math.Ceil(float64(len(t.Tests))/float64(max(lim.workers, 1))) + 60
	if ans.lang != "python" {
		budget += 60 // compilation
	}
	if t.Mode == ModeCheck {
		budget += 30 // fresh interpreters for the solution, not counted in a test's time
	}
	if err := runJudge(ctx, h, sandboxID, body, budget, &out); err != nil {
		var k *judgeKilled
		if !errors.As(err, &k) {
			return nil, err
		}
		// The code under test killed or stalled its driver: that is the
		// solution failing, scored as such, never an infrastructure failure.
		v := VerdictRE
		if k.timedOut {
			v = VerdictTLE
		}
		for i := range j.verdicts {
			j.verdicts[i] = v
		}
		return j, nil
	}
	if out.CompileError != "" {
		j.compileError = out.CompileError
		for i := range j.verdicts {
			j.verdicts[i] = VerdictCE
		}
		return j, nil
	}
	if len(out.Results) != len(t.Tests) {
		return nil, fmt.Errorf("judge returned %d results for %d tests", len(out.Results), len(t.Tests))
	}
	j.runs = out.Results
	var toCheck []int
	for i, r := range out.Results {
		j.verdicts[i] = verdict(t, i, r)
		if t.Checker != nil && j.verdicts[i] == verdictCompare {
			toCheck = append(toCheck, i)
		}
	}
	if len(toCheck) > 0 {
		if err := special(ctx, h, sandboxID, t, toCheck, j); err != nil {
			return nil, err
		}
	}
	return j, nil
}

// verdictCompare marks a clean run whose output a checker judges.
const verdictCompare = "compare"

// special runs the task's checker on the outputs of clean runs, in a second
// command: by then no process of the solution is left in the sandbox, so
// the expected outputs can go in.
func special(ctx context.Context, h sdk.Sandboxes, sandboxID string, t *Task, idx []int, j *judgement) error {
	cases := make([]map[string]string, len(idx))
	for k, i := range idx {
		cases[k] = map[string]string{"input": t.Tests[i].Input, "output": j.runs[i].Stdout, "answer": t.Tests[i].Expected}
	}
	body, _ := json.Marshal(map[string]any{"mode": "checker", "language": t.Checker.Language, "source": t.Checker.Source,
		"cases": cases, "time_limit": 10})
	var out judgeOutput
	if err := runJudge(ctx, h, sandboxID, body, float64(len(idx))*10+70, &out); err != nil {
		return fmt.Errorf("checker: %w", err)
	}
	if out.CompileError != "" {
		return sdk.InvalidTask("checker", "does not compile: %.500s", out.CompileError)
	}
	if len(out.Checks) != len(idx) {
		return fmt.Errorf("checker returned %d results for %d outputs", len(out.Checks), len(idx))
	}
	for k, i := range idx {
		switch c := out.Checks[k]; c.Exit {
		case 0:
			j.verdicts[i] = VerdictAC
		case 1, 2:
			j.verdicts[i] = VerdictWA
		default:
			// The checker failed (testlib's exit 3, a crash, a timeout): not
			// an accepted answer, and counted so it shows.
			j.verdicts[i] = VerdictWA
			j.checkerFailures++
		}
	}
	return nil
}

// pythonPrelude is LiveCodeBench's import header (TACO's is alike): the
// names a solution may use without importing them.
const pythonPrelude = "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\nfrom heapq import *\n" +
	"from bisect import *\nfrom copy import *\nfrom math import *\nfrom random import *\nfrom statistics import *\n" +
	"from itertools import *\nfrom functools import *\nfrom operator import *\nfrom io import *\nfrom sys import *\n" +
	"from json import *\nfrom builtins import *\nfrom typing import *\nimport string\nimport re\nimport datetime\n" +
	"import collections\nimport heapq\nimport bisect\nimport copy\nimport math\nimport random\nimport statistics\n" +
	"import itertools\nimport functools\nimport operator\nimport io\nimport sys\nimport json\nsys.setrecursionlimit(50000)\n"

const maxOutput = 1 << 16

func runJudge(ctx context.Context, h sdk.Sandboxes, sandboxID string, spec []byte, budget float64, out *judgeOutput) error {
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

func verdict(t *Task, i int, r *runResult) string {
	if r == nil {
		return VerdictRE
	}
	if t.Mode == ModeCheck {
		return checkVerdict(r)
	}
	switch {
	case overTime(r):
		return VerdictTLE
	case memoryExhausted(r.Stderr):
		return VerdictMLE
	case r.Signal != nil || r.Exit == nil || *r.Exit != 0:
		return VerdictRE
	case r.Truncated:
		return VerdictOLE
	}
	if t.Mode == ModeStdio {
		if t.Checker != nil {
			return verdictCompare
		}
		if outputsMatch(r.Stdout, t.Tests[i].Expected, t.Compare, t.FloatTol) {
			return VerdictAC
		}
		return VerdictWA
	}
	got, ok := resultOf(r.Stdout)
	if !ok {
		return VerdictRE // returned without a result: exited early
	}
	want := t.Tests[i].ExpectedJSON
	if jsonEqual(got, want, t.FloatTol) || (t.Tests[i].ReturnInList && jsonEqual(json.RawMessage("["+string(got)+"]"), want, t.FloatTol)) {
		return VerdictAC
	}
	return VerdictWA
}

func checkVerdict(r *runResult) string {
	c := r.Check
	switch {
	case c != nil && c.Passed:
		return VerdictAC
	case overTime(r):
		return VerdictTLE
	case c == nil:
		return VerdictRE
	}
	switch c.Kind {
	case "assert":
		return VerdictWA
	case "syntax":
		return VerdictCE
	case "memory":
		return VerdictMLE
	case "dead":
		if memoryExhausted(r.Stderr) || (r.Exit != nil && *r.Exit == 3) {
			return VerdictMLE
		}
	}
	return VerdictRE
}

// overTime: over the CPU time limit (the judge checks it on every test), past
// the wall-clock backstop, or killed by SIGXCPU.
func overTime(r *runResult) bool {
	return r.TimedOut || (r.Signal != nil && *r.Signal == 24)
}

func memoryExhausted(stderr string) bool {
	for _, s := range []string{"MemoryError", "std::bad_alloc", "java.lang.OutOfMemoryError", "JavaScript heap out of memory"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
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
