package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/prorl/prorl/sdk"
	"github.com/prorl/prorl/sdk/taskrow"
)

// Test kinds.
const (
	ModeStdio    = "stdio"
	ModeFunction = "function"
)

// Test is one judged case. Expected values stay in the plugin: the
// sandbox sees only inputs.
type Test struct {
	Input string // stdio: the program's stdin
	// Call is the expression the solution process evaluates (function
	// tests), e.g. `add(*[1, 2])` or `candidate(3)` rewritten to `f(3)`.
	Call string
	// Expected is the stdout (stdio) or the JSON of the return value; for
	// assert-style tests ExpectedLiteral is a Python literal evaluated by
	// the judge before the solution exists.
	Expected        string
	ExpectedJSON    json.RawMessage
	ExpectedLiteral string
	// ReturnInList: APPS writes a function's expected result wrapped in a list.
	ReturnInList bool
}

// Task is a coding problem.
type Task struct {
	ID         string
	Prompt     string
	Mode       string
	FnName     string
	Tests      []Test
	TimeLimit  float64 // seconds per test; 0: the config's default
	MemoryMB   int     // per test; 0: the config's default
	AnswerFile string  // a file in the agent's sandbox holding the answer
	FloatTol   float64 // absolute/relative tolerance for float tokens; 0: exact
}

type rawTask struct {
	ID          string          `json:"id"`
	TaskID      string          `json:"task_id"`
	InstanceID  json.RawMessage `json:"instance_id"`
	Question    string          `json:"question"`
	Problem     string          `json:"problem"`
	Text        string          `json:"text"`
	Prompt      json.RawMessage `json:"prompt"`
	Tests       json.RawMessage `json:"tests"`
	InputOutput json.RawMessage `json:"input_output"`
	FnName      string          `json:"fn_name"`
	TestList    []string        `json:"test_list"`
	Test        string          `json:"test"`
	EntryPoint  string          `json:"entry_point"`
	TimeLimit   *float64        `json:"time_limit"`
	MemoryLimit *int            `json:"memory_limit"`
	AnswerFile  string          `json:"answer_file"`
	FloatTol    *float64        `json:"float_tolerance"`
	RewardModel *struct {
		GroundTruth json.RawMessage `json:"ground_truth"`
	} `json:"reward_model"`
}

// ioSpec is the APPS/TACO/CodeContests test JSON: {"inputs": [...],
// "outputs": [...], "fn_name"?}.
type ioSpec struct {
	Inputs  []json.RawMessage `json:"inputs"`
	Outputs []json.RawMessage `json:"outputs"`
	FnName  string            `json:"fn_name"`
}

// ParseTask reads a coding task:
//   - plain stdio: {question, tests: [{input, output}], time_limit?, memory_limit?}
//   - plain function: {question, fn_name, tests: [{args: [...], expected}]}
//   - verl/ProRL rows (codecontests, apps, taco, codeforces, deepcoder...):
//     {prompt, reward_model: {ground_truth: "{\"inputs\": [...], \"outputs\": [...], \"fn_name\"?}"}}
//     or the same JSON under input_output (APPS)
//   - assert tests (MBPP: test_list; HumanEval: test with check(candidate)
//     and entry_point): each `assert CALL == EXPECTED` becomes a function test.
func ParseTask(raw json.RawMessage) (*Task, error) {
	var r rawTask
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, sdk.InvalidTask("task", "not a JSON object of the expected shape: %v", err)
	}
	t := &Task{ID: firstNonEmpty(r.ID, r.TaskID, taskrow.Scalar(r.InstanceID)), AnswerFile: r.AnswerFile}
	t.Prompt = firstNonEmpty(r.Question, r.Problem, r.Text)
	if t.Prompt == "" && len(r.Prompt) > 0 {
		p, err := taskrow.PromptText(r.Prompt, "prompt")
		if err != nil {
			return nil, err
		}
		t.Prompt = p
	}
	if strings.TrimSpace(t.Prompt) == "" {
		return nil, sdk.InvalidTask("question", "missing: give question, problem, text or prompt")
	}
	if r.TimeLimit != nil {
		if *r.TimeLimit <= 0 || *r.TimeLimit > 60 {
			return nil, sdk.InvalidTask("time_limit", "must be in (0, 60] seconds, got %v", *r.TimeLimit)
		}
		t.TimeLimit = *r.TimeLimit
	}
	if r.MemoryLimit != nil {
		if *r.MemoryLimit < 16 || *r.MemoryLimit > 16384 {
			return nil, sdk.InvalidTask("memory_limit", "must be 16 to 16384 MB, got %d", *r.MemoryLimit)
		}
		t.MemoryMB = *r.MemoryLimit
	}
	if r.FloatTol != nil {
		if *r.FloatTol < 0 || *r.FloatTol >= 1 {
			return nil, sdk.InvalidTask("float_tolerance", "must be in [0, 1)")
		}
		t.FloatTol = *r.FloatTol
	}
	var err error
	switch {
	case len(r.Tests) > 0 && string(r.Tests) != "null":
		err = t.plainTests(r.Tests, r.FnName)
	case len(r.InputOutput) > 0:
		err = t.ioTests(r.InputOutput, "input_output", r.FnName)
	case r.RewardModel != nil && len(r.RewardModel.GroundTruth) > 0:
		err = t.ioTests(r.RewardModel.GroundTruth, "reward_model.ground_truth", r.FnName)
	case len(r.TestList) > 0:
		err = t.assertTests(strings.Join(r.TestList, "\n"), "", "test_list")
	case r.Test != "":
		err = t.assertTests(r.Test, r.EntryPoint, "test")
	default:
		return nil, sdk.InvalidTask("tests", "missing: give tests, input_output, reward_model.ground_truth, test_list or test")
	}
	if err != nil {
		return nil, err
	}
	if len(t.Tests) == 0 {
		return nil, sdk.InvalidTask("tests", "no test cases")
	}
	return t, nil
}

func (t *Task) plainTests(raw json.RawMessage, fn string) error {
	var tests []struct {
		Input    *string         `json:"input"`
		Output   *string         `json:"output"`
		Args     json.RawMessage `json:"args"`
		Expected json.RawMessage `json:"expected"`
	}
	if err := json.Unmarshal(raw, &tests); err != nil {
		return sdk.InvalidTask("tests", "must be a list of {input, output} or {args, expected}: %v", err)
	}
	t.Mode, t.FnName = ModeStdio, fn
	if fn != "" {
		t.Mode = ModeFunction
		if !identRe.MatchString(fn) {
			return sdk.InvalidTask("fn_name", "%q is not a Python name (or Class.method)", fn)
		}
	}
	for i, c := range tests {
		field := fmt.Sprintf("tests[%d]", i)
		if t.Mode == ModeStdio {
			if c.Input == nil || c.Output == nil {
				return sdk.InvalidTask(field, "a stdio test needs input and output")
			}
			t.Tests = append(t.Tests, Test{Input: *c.Input, Expected: *c.Output})
			continue
		}
		call, err := callOf(fn, c.Args, field+".args")
		if err != nil {
			return err
		}
		if len(c.Expected) == 0 {
			return sdk.InvalidTask(field+".expected", "missing")
		}
		t.Tests = append(t.Tests, Test{Call: call, ExpectedJSON: c.Expected})
	}
	return nil
}

func (t *Task) ioTests(raw json.RawMessage, field, fn string) error {
	// The ground truth is often a JSON string holding the JSON.
	var inner string
	if json.Unmarshal(raw, &inner) == nil {
		raw = json.RawMessage(inner)
	}
	if b := bytes.TrimSpace(raw); len(b) > 0 && b[0] == '[' {
		return t.listTests(raw, field, fn)
	}
	var spec ioSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return sdk.InvalidTask(field, "must be {\"inputs\": [...], \"outputs\": [...]} (or a JSON string of it): %v", err)
	}
	if len(spec.Inputs) != len(spec.Outputs) {
		return sdk.InvalidTask(field, "%d inputs but %d outputs", len(spec.Inputs), len(spec.Outputs))
	}
	if fn == "" {
		fn = spec.FnName
	}
	t.Mode, t.FnName = ModeStdio, fn
	if fn != "" {
		t.Mode = ModeFunction
		if !identRe.MatchString(fn) {
			return sdk.InvalidTask(field+".fn_name", "%q is not a Python name (or Class.method)", fn)
		}
	}
	for i := range spec.Inputs {
		f := fmt.Sprintf("%s.inputs[%d]", field, i)
		if t.Mode == ModeStdio {
			in, out := textOf(spec.Inputs[i]), textOf(spec.Outputs[i])
			t.Tests = append(t.Tests, Test{Input: in, Expected: out})
			continue
		}
		call, err := callOf(fn, spec.Inputs[i], f)
		if err != nil {
			return err
		}
		t.Tests = append(t.Tests, Test{Call: call, ExpectedJSON: spec.Outputs[i], ReturnInList: true})
	}
	return nil
}

// listTests reads DeepCoder/LiveCodeBench test lists: [{"input",
// "output", "testtype"?: "stdin" | "functional", "metadata"?: {"func_name"}}];
// a functional test's input holds one JSON argument per line.
func (t *Task) listTests(raw json.RawMessage, field, fn string) error {
	var list []struct {
		Input    string `json:"input"`
		Output   string `json:"output"`
		TestType string `json:"testtype"`
		Metadata struct {
			FuncName string `json:"func_name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return sdk.InvalidTask(field, "must be a list of {input, output}: %v", err)
	}
	t.Mode, t.FnName = ModeStdio, fn
	for i, c := range list {
		f := fmt.Sprintf("%s[%d]", field, i)
		if c.TestType != "functional" {
			if t.Mode == ModeFunction {
				return sdk.InvalidTask(f, "stdin and functional tests mixed")
			}
			t.Tests = append(t.Tests, Test{Input: c.Input, Expected: c.Output})
			continue
		}
		if t.FnName == "" {
			t.FnName = c.Metadata.FuncName
		}
		if i > 0 && t.Mode == ModeStdio {
			return sdk.InvalidTask(f, "stdin and functional tests mixed")
		}
		t.Mode = ModeFunction
		if !identRe.MatchString(t.FnName) {
			return sdk.InvalidTask(f, "a functional test needs fn_name or metadata.func_name (a Python name), got %q", t.FnName)
		}
		var args []json.RawMessage
		for _, line := range strings.Split(strings.TrimSpace(c.Input), "\n") {
			if !json.Valid([]byte(line)) {
				return sdk.InvalidTask(f+".input", "each line of a functional input must be a JSON value: %q", line)
			}
			args = append(args, json.RawMessage(line))
		}
		argJSON, _ := json.Marshal(args)
		call, err := callOf(t.FnName, argJSON, f+".input")
		if err != nil {
			return err
		}
		if !json.Valid([]byte(c.Output)) {
			return sdk.InvalidTask(f+".output", "a functional output must be JSON: %q", c.Output)
		}
		t.Tests = append(t.Tests, Test{Call: call, ExpectedJSON: json.RawMessage(c.Output)})
	}
	return nil
}

// textOf reads a stdio test value: a string, or a list of lines.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var lines []string
	if json.Unmarshal(raw, &lines) == nil {
		return strings.Join(lines, "\n") + "\n"
	}
	return string(raw)
}

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// callOf builds the call of fn on JSON arguments (a list of positional
// arguments). A Class.method name calls the method on a fresh instance
// (LeetCode's Solution().method).
func callOf(fn string, args json.RawMessage, field string) (string, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(args, &list); err != nil {
		return "", sdk.InvalidTask(field, "must be a list of arguments: %v", err)
	}
	target := fn
	if cls, method, ok := strings.Cut(fn, "."); ok {
		target = cls + "()." + method
	}
	// The arguments travel as JSON text the solution process decodes.
	quoted, _ := json.Marshal(string(args))
	return fmt.Sprintf("%s(*__import__('json').loads(%s))", target, quoted), nil
}

// assertLine is `assert CALL == EXPECTED` (with optional parentheses and a
// trailing message).
var assertRe = regexp.MustCompile(`^\s*assert\s+(.+)$`)

// assertTests turns assert statements into function tests: the call runs
// in the solution process, the expected literal in the judge. Only
// `assert CALL == LITERAL` is accepted: anything evaluated beside the
// solution could be patched by it.
func (t *Task) assertTests(src, entry, field string) error {
	t.Mode = ModeFunction
	for n, line := range strings.Split(src, "\n") {
		m := assertRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		expr := m[1]
		if i := topLevel(expr, ","); i >= 0 {
			expr = expr[:i] // drop the assert message
		}
		expr = strings.TrimSpace(expr)
		for strings.HasPrefix(expr, "(") && matching(expr) == len(expr)-1 {
			expr = strings.TrimSpace(expr[1 : len(expr)-1])
		}
		i := topLevel(expr, "==")
		if i < 0 {
			return sdk.InvalidTask(field, "line %d: only `assert CALL == EXPECTED` tests are supported: %q", n+1, strings.TrimSpace(line))
		}
		call, want := strings.TrimSpace(expr[:i]), strings.TrimSpace(expr[i+2:])
		if entry != "" {
			call = regexp.MustCompile(`\bcandidate\b`).ReplaceAllString(call, entry)
		}
		t.Tests = append(t.Tests, Test{Call: call, ExpectedLiteral: want})
	}
	return nil
}

// topLevel finds op outside brackets and string literals.
func topLevel(s, op string) int {
	depth := 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		case depth == 0 && strings.HasPrefix(s[i:], op):
			return i
		}
	}
	return -1
}

// matching is the index of the bracket closing s[0], or -1.
func matching(s string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}
