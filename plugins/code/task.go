package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/prorl/prorl/sdk"
	"github.com/prorl/prorl/sdk/taskrow"
)

// Test kinds.
const (
	ModeStdio    = "stdio"    // stdin → stdout, compared by the plugin
	ModeFunction = "function" // a Python call, its value compared by the plugin
	ModeCheck    = "check"    // the dataset's own Python checks, run beside the solution
)

// Test is one judged case. Stdio and function expectations stay in the
// plugin; a check holds its expectations in its own source, which only
// the checker process sees.
type Test struct {
	Input    string // stdio: the program's stdin
	Expected string // stdio: the expected stdout

	Fn           string          // function: the name called (Class.method, or a method of LeetCode's Solution)
	Args         json.RawMessage // function: a JSON list of positional arguments
	ExpectedJSON json.RawMessage
	ReturnInList bool // APPS/TACO write a function's result wrapped in a list

	Check     string // check: Python statements (asserts of any form, a check function)
	Then      string // check: run after Check, e.g. `check(candidate)`
	Candidate string // check: the solution's name that `candidate` stands for
	Pytest    string // check: a pytest-style test file, one test for the whole file
	Name      string
}

// Checker is a special judge shipped with a row.
type Checker struct {
	Language string // python or cpp
	Source   string
}

// Task is a coding problem.
type Task struct {
	ID         string
	Prompt     string
	Starter    string // starter code shown with the problem (LeetCode signatures)
	Mode       string
	FnName     string
	Tests      []Test
	Source     string  // the dataset family; picks comparison and time defaults
	TimeLimit  float64 // seconds per test from the row (before scaling); 0: the default
	MemoryMB   int     // per test; 0: the config's default
	AnswerFile string  // a file in the agent's sandbox holding the answer
	FloatTol   float64 // absolute/relative tolerance for float tokens; 0: per Compare
	Compare    string  // how stdio outputs compare; see compareModes
	Setup      string  // check: Python run in the checker before each check (imports, setup code)
	PromptCode string  // check: the prompt's code (HumanEval), run before the answer
	Language   string  // the answer's required language; "" any the config allows
	Checker    *Checker
}

// Comparison modes for stdio outputs, as the reference harnesses compare.
var compareModes = map[string]string{
	"tokens":        "whitespace-separated tokens equal (testlib's wcmp; Codeforces' default checker)",
	"lines":         "lines equal after stripping each line; trailing empty lines ignored",
	"lines_decimal": "LiveCodeBench: lines stripped, equal or equal as Decimal numbers token by token",
	"float":         "TACO/APPS: lines of tokens, numeric tokens equal within rtol 1e-5, atol 1e-8 (numpy.allclose)",
	"exact":         "byte-equal after normalising line endings and trailing whitespace at the end",
}

type rawTask struct {
	ID          json.RawMessage `json:"id"`
	TaskID      json.RawMessage `json:"task_id"`
	InstanceID  json.RawMessage `json:"instance_id"`
	ProblemID   json.RawMessage `json:"problem_id"`
	QuestionID  json.RawMessage `json:"question_id"`
	Name        string          `json:"name"`
	DataSource  string          `json:"data_source"`
	Question    string          `json:"question"`
	Problem     string          `json:"problem"`
	Text        string          `json:"text"`
	Content     string          `json:"question_content"`
	Description string          `json:"description"`
	InputFormat string          `json:"input_format"`
	OutputFmt   string          `json:"output_format"`
	Prompt      json.RawMessage `json:"prompt"`
	Starter     string          `json:"starter_code"`

	Tests          json.RawMessage `json:"tests"`
	InputOutput    json.RawMessage `json:"input_output"`
	FnName         string          `json:"fn_name"`
	TestList       []string        `json:"test_list"`
	ChallengeList  []string        `json:"challenge_test_list"`
	TestImports    []string        `json:"test_imports"`
	TestSetup      string          `json:"test_setup_code"`
	Test           string          `json:"test"`
	EntryPoint     string          `json:"entry_point"`
	PublicCases    json.RawMessage `json:"public_test_cases"`
	PrivateCases   json.RawMessage `json:"private_test_cases"`
	Metadata       json.RawMessage `json:"metadata"`
	PublicTests    json.RawMessage `json:"public_tests"`
	PrivateTests   json.RawMessage `json:"private_tests"`
	GeneratedTests json.RawMessage `json:"generated_tests"`
	OfficialTests  json.RawMessage `json:"official_tests"`
	Verification   json.RawMessage `json:"verification_info"`

	TimeLimit   json.RawMessage `json:"time_limit"`
	MemoryLimit json.RawMessage `json:"memory_limit"`
	MemoryBytes json.RawMessage `json:"memory_limit_bytes"`
	AnswerFile  string          `json:"answer_file"`
	FloatTol    *float64        `json:"float_tolerance"`
	Compare     string          `json:"compare"`
	Language    string          `json:"language"`
	Checker     json.RawMessage `json:"checker"`
	RewardModel *struct {
		GroundTruth json.RawMessage `json:"ground_truth"`
	} `json:"reward_model"`
}

// ParseTask reads a coding task in any of the published shapes (see the
// README's table): our plain {question, tests}; APPS/TACO (input_output);
// code_contests (public/private/generated_tests); Codeforces
// (official_tests); LiveCodeBench (public/private_test_cases, metadata);
// DeepCoder and rLLM rows (tests as a list, a dict or a JSON string of
// either); PrimeIntellect (verification_info, stdin_stdout and
// function_call); MBPP (test_list, test_imports, challenge_test_list);
// HumanEval(+) (test with check(candidate), entry_point); KodCode (a
// pytest file); LeetCode rows ({"functional": code}); and verl rows
// carrying any of these in reward_model.ground_truth.
func ParseTask(raw json.RawMessage) (*Task, error) {
	var r rawTask
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, sdk.InvalidTask("task", "not a JSON object of the expected shape: %v", err)
	}
	t := &Task{ID: taskrow.First(taskrow.Scalar(r.ID), taskrow.Scalar(r.TaskID), taskrow.Scalar(r.InstanceID),
		taskrow.Scalar(r.ProblemID), taskrow.Scalar(r.QuestionID), r.Name), AnswerFile: r.AnswerFile, Starter: r.Starter}
	t.Source = sourceOf(&r)
	if err := t.prompt(&r); err != nil {
		return nil, err
	}
	if err := t.limits(&r); err != nil {
		return nil, err
	}
	if err := t.tests(&r); err != nil {
		return nil, err
	}
	if len(t.Tests) == 0 {
		return nil, sdk.InvalidTask("tests", "no test cases")
	}
	if r.Compare != "" {
		if _, ok := compareModes[r.Compare]; !ok {
			return nil, sdk.InvalidTask("compare", "%q is not one of tokens, lines, lines_decimal, float, exact", r.Compare)
		}
		t.Compare = r.Compare
	} else {
		t.Compare = defaultCompare(t.Source)
	}
	if r.Language != "" {
		lang, ok := languageOf(r.Language)
		if !ok {
			return nil, sdk.InvalidTask("language", "%q is not one of python, cpp, c, java, javascript", r.Language)
		}
		if lang != "python" && t.Mode != ModeStdio {
			return nil, sdk.InvalidTask("language", "%s tests are Python calls; only stdin/stdout tests can be answered in %s", t.Mode, lang)
		}
		t.Language = lang
	}
	if len(r.Checker) > 0 && string(r.Checker) != "null" {
		if t.Mode != ModeStdio {
			return nil, sdk.InvalidTask("checker", "a checker judges stdin/stdout tests, not %s tests", t.Mode)
		}
		c, err := checkerOf(r.Checker)
		if err != nil {
			return nil, err
		}
		t.Checker = c
	}
	return t, nil
}

func (t *Task) prompt(r *rawTask) error {
	t.Prompt = taskrow.First(r.Question, r.Problem, r.Text, r.Content)
	if t.Prompt == "" && r.Description != "" {
		t.Prompt = r.Description
		if r.InputFormat != "" {
			t.Prompt += "\n\nInput\n" + r.InputFormat
		}
		if r.OutputFmt != "" {
			t.Prompt += "\n\nOutput\n" + r.OutputFmt
		}
	}
	if len(r.Prompt) > 0 && string(r.Prompt) != "null" {
		p, err := taskrow.PromptText(r.Prompt, "prompt")
		if err != nil {
			return err
		}
		if r.EntryPoint != "" && r.Test != "" {
			// HumanEval: the prompt is the code to complete.
			t.PromptCode = p
		}
		if t.Prompt == "" {
			t.Prompt = p
		}
	}
	if strings.TrimSpace(t.Prompt) == "" {
		return sdk.InvalidTask("question", "missing: give question, problem, text, question_content, description or prompt")
	}
	return nil
}

func (t *Task) limits(r *rawTask) error {
	if len(r.TimeLimit) > 0 && string(r.TimeLimit) != "null" {
		s, err := seconds(r.TimeLimit)
		if err != nil {
			return sdk.InvalidTask("time_limit", "%v", err)
		}
		if s <= 0 || s > 60 {
			return sdk.InvalidTask("time_limit", "must be in (0, 60] seconds, got %v", s)
		}
		t.TimeLimit = s
	}
	mb := 0.0
	switch {
	case len(r.MemoryBytes) > 0 && string(r.MemoryBytes) != "null":
		b, err := strconv.ParseFloat(taskrow.Scalar(r.MemoryBytes), 64)
		if err != nil {
			return sdk.InvalidTask("memory_limit_bytes", "not a number: %s", r.MemoryBytes)
		}
		mb = b / (1 << 20)
	case len(r.MemoryLimit) > 0 && string(r.MemoryLimit) != "null":
		m, err := megabytes(r.MemoryLimit)
		if err != nil {
			return sdk.InvalidTask("memory_limit", "%v", err)
		}
		mb = m
	}
	if mb != 0 {
		if mb < 16 || mb > 16384 {
			return sdk.InvalidTask("memory_limit", "must be 16 to 16384 MB, got %v", mb)
		}
		t.MemoryMB = int(mb)
	}
	if r.FloatTol != nil {
		if *r.FloatTol < 0 || *r.FloatTol >= 1 {
			return sdk.InvalidTask("float_tolerance", "must be in [0, 1)")
		}
		t.FloatTol = *r.FloatTol
	}
	return nil
}

var unitRe = regexp.MustCompile(`^\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*$`)

// Units of time limits (in seconds) and memory limits (in MB).
var (
	secondUnits = map[string]float64{"": 1, "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
		"ms": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3}
	megabyteUnits = map[string]float64{"": 1, "mb": 1, "mib": 1, "megabyte": 1, "megabytes": 1, "m": 1,
		"gb": 1024, "gib": 1024, "gigabyte": 1024, "gigabytes": 1024, "g": 1024,
		"kb": 1.0 / 1024, "kib": 1.0 / 1024, "kilobytes": 1.0 / 1024, "k": 1.0 / 1024}
)

// quantity reads a number with an optional unit ("2", "2 seconds",
// "256 megabytes") in the units of the table.
func quantity(raw json.RawMessage, units map[string]float64, example string) (float64, error) {
	m := unitRe.FindStringSubmatch(taskrow.Scalar(raw))
	if m == nil {
		return 0, fmt.Errorf("want a number with an optional unit, e.g. %s: %s", example, raw)
	}
	f, ok := units[strings.ToLower(m[2])]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q", m[2])
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v * f, nil
}

// seconds reads a time limit: a number of seconds, "2 seconds", "1.5 s",
// "1000 ms", or code_contests' {"seconds": 2, "nanos": 0}.
func seconds(raw json.RawMessage) (float64, error) {
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		var obj struct {
			Seconds *float64 `json:"seconds"`
			Nanos   float64  `json:"nanos"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil || obj.Seconds == nil {
			return 0, fmt.Errorf("want {\"seconds\": N, \"nanos\": N}: %s", raw)
		}
		return *obj.Seconds + obj.Nanos/1e9, nil
	}
	return quantity(raw, secondUnits, `2 or "2 seconds"`)
}

// megabytes reads a memory limit: a number of MB, "256 megabytes", "512 MB".
func megabytes(raw json.RawMessage) (float64, error) {
	return quantity(raw, megabyteUnits, `256 or "256 megabytes"`)
}

// sourceOf is the dataset family: the row's data_source, or its shape.
func sourceOf(r *rawTask) string {
	ds := strings.ToLower(r.DataSource)
	for _, k := range []string{"livecodebench", "lcb", "humaneval", "mbpp", "kodcode", "leetcode", "primeintellect", "taco", "apps", "code_contests", "codecontests", "codeforces", "deepcoder"} {
		if strings.Contains(ds, k) {
			switch k {
			case "lcb":
				return "livecodebench"
			case "codecontests":
				return "code_contests"
			}
			return k
		}
	}
	switch {
	case len(r.PublicCases) > 0:
		return "livecodebench"
	case len(r.PublicTests) > 0 || len(r.PrivateTests) > 0:
		return "code_contests"
	case len(r.OfficialTests) > 0:
		return "codeforces"
	case len(r.Verification) > 0:
		return "primeintellect"
	case len(r.InputOutput) > 0:
		return "taco"
	case len(r.TestList) > 0:
		return "mbpp"
	case r.EntryPoint != "":
		return "humaneval"
	}
	return ds
}

func defaultCompare(source string) string {
	switch source {
	case "livecodebench":
		return "lines_decimal"
	case "taco", "apps", "primeintellect", "code_contests", "deepcoder":
		return "float"
	}
	return "tokens"
}

func (t *Task) tests(r *rawTask) error {
	switch {
	case r.Test != "" && r.EntryPoint != "":
		// HumanEval(+): a check(candidate) function, one test, as the harness runs it.
		if !assertRe.MatchString(r.Test) {
			return sdk.InvalidTask("test", "no assert: nothing in it could fail")
		}
		t.Mode = ModeCheck
		t.FnName = r.EntryPoint
		tc := Test{Check: r.Test, Name: "test"}
		if checkDefRe.MatchString(r.Test) && !checkCallRe.MatchString(r.Test) {
			// HumanEval: check(candidate) is defined, the harness calls it.
			tc.Then, tc.Candidate = "check(candidate)", r.EntryPoint
		} // MBPP+ (evalplus): the test calls the function by name itself.
		t.Tests = []Test{tc}
		return nil
	case len(r.TestList) > 0:
		t.Mode = ModeCheck
		t.Setup = strings.Join(append(append([]string{}, r.TestImports...), r.TestSetup), "\n")
		for i, s := range append(append([]string{}, r.TestList...), r.ChallengeList...) {
			name := fmt.Sprintf("test_list[%d]", i)
			if i >= len(r.TestList) {
				name = fmt.Sprintf("challenge_test_list[%d]", i-len(r.TestList))
			}
			if !assertRe.MatchString(s) {
				return sdk.InvalidTask(name, "no assert: nothing in it could fail (%.60q)", s)
			}
			t.Tests = append(t.Tests, Test{Check: s, Name: name})
		}
		return nil
	case r.Test != "":
		return t.codeTests(r.Test, "test", r.FnName)
	case len(r.PublicCases) > 0:
		// LiveCodeBench: public and private cases, func_name in metadata.
		fn := r.FnName
		if len(r.Metadata) > 0 {
			var md struct {
				FuncName string `json:"func_name"`
			}
			if m, ok := jsonText(r.Metadata); ok {
				_ = json.Unmarshal(m, &md)
			}
			fn = taskrow.First(fn, md.FuncName)
		}
		if err := t.anyTests(r.PublicCases, "public_test_cases", fn); err != nil {
			return err
		}
		if len(r.PrivateCases) > 0 && string(r.PrivateCases) != `""` && string(r.PrivateCases) != "null" {
			priv, err := lcbPrivate(r.PrivateCases)
			if err != nil {
				return sdk.InvalidTask("private_test_cases", "%v", err)
			}
			return t.anyTests(priv, "private_test_cases", fn)
		}
		return nil
	case len(r.PublicTests) > 0 || len(r.PrivateTests) > 0 || len(r.GeneratedTests) > 0:
		for _, f := range []struct {
			name string
			raw  json.RawMessage
		}{{"public_tests", r.PublicTests}, {"private_tests", r.PrivateTests}, {"generated_tests", r.GeneratedTests}} {
			if len(f.raw) == 0 || string(f.raw) == "null" {
				continue
			}
			if err := t.anyTests(f.raw, f.name, r.FnName); err != nil {
				return err
			}
		}
		return nil
	case len(r.OfficialTests) > 0:
		return t.anyTests(r.OfficialTests, "official_tests", r.FnName)
	case len(r.Verification) > 0:
		return t.anyTests(r.Verification, "verification_info", r.FnName)
	case len(r.Tests) > 0 && string(r.Tests) != "null":
		return t.anyTests(r.Tests, "tests", r.FnName)
	case len(r.InputOutput) > 0:
		return t.anyTests(r.InputOutput, "input_output", r.FnName)
	case r.RewardModel != nil && len(r.RewardModel.GroundTruth) > 0:
		return t.anyTests(r.RewardModel.GroundTruth, "reward_model.ground_truth", r.FnName)
	}
	return sdk.InvalidTask("tests", "missing: give tests, input_output, reward_model.ground_truth, test_list, test, public_test_cases, public_tests, official_tests or verification_info")
}

// jsonText unwraps a JSON string holding JSON.
func jsonText(raw json.RawMessage) (json.RawMessage, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return raw, true
	}
	b := bytes.TrimSpace([]byte(s))
	if json.Valid(b) {
		return b, true
	}
	return nil, false
}

// anyTests reads tests in whichever shape they come: a JSON string of any
// of these, a list of cases, {inputs, outputs, fn_name}, {input: [...],
// output: [...]}, PrimeIntellect's {test_cases}, rLLM LeetCode's
// {functional}, or test code.
func (t *Task) anyTests(raw json.RawMessage, field, fn string) error {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		inner := bytes.TrimSpace([]byte(s))
		if json.Valid(inner) && len(inner) > 0 && (inner[0] == '[' || inner[0] == '{') {
			return t.anyTests(inner, field, fn)
		}
		return t.codeTests(s, field, fn)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		return t.listTests(raw, field, fn)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return sdk.InvalidTask(field, "must be a list of cases, an object of inputs and outputs, or test code: %v", err)
	}
	switch {
	case obj["functional"] != nil:
		var src string
		if err := json.Unmarshal(obj["functional"], &src); err != nil {
			return sdk.InvalidTask(field+".functional", "must be Python test code: %v", err)
		}
		return t.codeTests(src, field+".functional", fn)
	case obj["test_cases"] != nil:
		return t.anyTests(obj["test_cases"], field+".test_cases", fn)
	case obj["inputs"] != nil || obj["outputs"] != nil:
		var spec struct {
			Inputs  []json.RawMessage `json:"inputs"`
			Outputs []json.RawMessage `json:"outputs"`
			FnName  string            `json:"fn_name"`
		}
		if err := json.Unmarshal(raw, &spec); err != nil {
			return sdk.InvalidTask(field, "must be {\"inputs\": [...], \"outputs\": [...]}: %v", err)
		}
		return t.ioPairs(spec.Inputs, spec.Outputs, field, taskrow.First(fn, spec.FnName), true)
	case obj["input"] != nil && obj["output"] != nil:
		// code_contests: {"input": [...], "output": [...]}
		var spec struct {
			Input  []json.RawMessage `json:"input"`
			Output []json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(raw, &spec); err != nil {
			return sdk.InvalidTask(field, "must be {\"input\": [...], \"output\": [...]}: %v", err)
		}
		return t.ioPairs(spec.Input, spec.Output, field, fn, true)
	}
	return sdk.InvalidTask(field, "unknown shape: want inputs/outputs, input/output, test_cases or functional")
}

// codeTests reads Python test code: a pytest-style file (KodCode), or
// statements that make their own calls (rLLM's LeetCode, asserts).
func (t *Task) codeTests(src, field, fn string) error {
	if strings.TrimSpace(src) == "" {
		return sdk.InvalidTask(field, "empty test code")
	}
	if !assertRe.MatchString(src) {
		// Code that asserts nothing passes any answer: a misread row (a
		// Python literal, prose) must not become a free reward.
		if t := strings.TrimSpace(src); strings.HasPrefix(t, "[") || strings.HasPrefix(t, "{") {
			return sdk.InvalidTask(field, "neither JSON nor test code (a Python literal? give json.dumps(ast.literal_eval(...))): %.60q", src)
		}
		return sdk.InvalidTask(field, "test code with no assert: nothing in it could fail (%.60q)", src)
	}
	if err := t.setMode(ModeCheck, field); err != nil {
		return err
	}
	if pytestRe.MatchString(src) {
		t.Tests = append(t.Tests, Test{Pytest: src, Name: field})
		return nil
	}
	tc := Test{Check: src, Name: field}
	if fn != "" && checkDefRe.MatchString(src) && !checkCallRe.MatchString(src) {
		tc.Then, tc.Candidate = "check(candidate)", fn
	}
	t.Tests = append(t.Tests, tc)
	return nil
}

var (
	assertRe    = regexp.MustCompile(`\bassert`)
	pytestRe    = regexp.MustCompile(`(?m)^(\s*)def test\w*\s*\(|^class Test\w*`)
	checkDefRe  = regexp.MustCompile(`(?m)^def check\s*\(`)
	checkCallRe = regexp.MustCompile(`(?m)^check\s*\(`)
)

func (t *Task) setMode(mode, field string) error {
	if t.Mode != "" && t.Mode != mode {
		return sdk.InvalidTask(field, "%s tests mixed with %s tests", mode, t.Mode)
	}
	t.Mode = mode
	return nil
}

// listTests reads a list of cases: {input, output} (stdin), LiveCodeBench's
// {testtype: functional, metadata: {func_name}}, PrimeIntellect's {type:
// function_call, fn_name}, our {args, expected}, or assert strings.
func (t *Task) listTests(raw json.RawMessage, field, fn string) error {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return sdk.InvalidTask(field, "must be a list: %v", err)
	}
	for i, item := range list {
		f := fmt.Sprintf("%s[%d]", field, i)
		var s string
		if json.Unmarshal(item, &s) == nil {
			if !assertRe.MatchString(s) {
				return sdk.InvalidTask(f, "no assert: nothing in it could fail (%.60q)", s)
			}
			if err := t.setMode(ModeCheck, f); err != nil {
				return err
			}
			t.Tests = append(t.Tests, Test{Check: s, Name: f})
			continue
		}
		var c struct {
			Input    json.RawMessage `json:"input"`
			Output   json.RawMessage `json:"output"`
			Args     json.RawMessage `json:"args"`
			Expected json.RawMessage `json:"expected"`
			TestType string          `json:"testtype"`
			Type     string          `json:"type"`
			FnName   string          `json:"fn_name"`
			Metadata struct {
				FuncName string `json:"func_name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(item, &c); err != nil {
			return sdk.InvalidTask(f, "must be a test case object: %v", err)
		}
		name := taskrow.First(c.FnName, c.Metadata.FuncName, fn)
		switch {
		case c.Args != nil:
			if name == "" {
				return sdk.InvalidTask(f, "a test with args needs fn_name")
			}
			if c.Expected == nil {
				return sdk.InvalidTask(f+".expected", "missing")
			}
			if err := t.addCall(name, c.Args, c.Expected, f, false); err != nil {
				return err
			}
		case c.Input == nil || c.Output == nil:
			return sdk.InvalidTask(f, "a test needs input and output")
		case c.TestType == "functional" || c.Type == "function_call" || (name != "" && c.TestType == "" && c.Type == ""):
			if name == "" {
				return sdk.InvalidTask(f, "a functional test needs fn_name or metadata.func_name")
			}
			if err := t.addCall(name, c.Input, c.Output, f, c.Type == "function_call"); err != nil {
				return err
			}
		default:
			if err := t.setMode(ModeStdio, f); err != nil {
				return err
			}
			t.Tests = append(t.Tests, Test{Input: textOf(c.Input), Expected: textOf(c.Output)})
		}
	}
	return nil
}

// ioPairs reads parallel lists of inputs and outputs.
func (t *Task) ioPairs(ins, outs []json.RawMessage, field, fn string, inList bool) error {
	if len(ins) != len(outs) {
		return sdk.InvalidTask(field, "%d inputs but %d outputs", len(ins), len(outs))
	}
	for i := range ins {
		f := fmt.Sprintf("%s.inputs[%d]", field, i)
		if fn != "" {
			if err := t.addCall(fn, ins[i], outs[i], f, inList); err != nil {
				return err
			}
			continue
		}
		if err := t.setMode(ModeStdio, f); err != nil {
			return err
		}
		t.Tests = append(t.Tests, Test{Input: textOf(ins[i]), Expected: textOf(outs[i])})
	}
	return nil
}

// addCall adds a function test. Arguments come as a JSON list, or as text
// with one JSON value per line (LiveCodeBench); the expected value as JSON
// or as text holding JSON.
func (t *Task) addCall(fn string, args, expected json.RawMessage, field string, inList bool) error {
	if err := t.setMode(ModeFunction, field); err != nil {
		return err
	}
	if !identRe.MatchString(fn) {
		return sdk.InvalidTask(field, "function name %q is not a Python name (or Class.method)", fn)
	}
	if t.FnName == "" {
		t.FnName = fn
	}
	list, err := argList(args)
	if err != nil {
		return sdk.InvalidTask(field, "arguments: %v", err)
	}
	want := bytes.TrimSpace(expected)
	var s string
	if json.Unmarshal(want, &s) == nil {
		if inner := bytes.TrimSpace([]byte(s)); json.Valid(inner) && len(inner) > 0 {
			want = inner
		}
	}
	if !json.Valid(want) || len(want) == 0 {
		return sdk.InvalidTask(field, "expected value is not JSON: %.100s", expected)
	}
	t.Tests = append(t.Tests, Test{Fn: fn, Args: list, ExpectedJSON: json.RawMessage(want), ReturnInList: inList})
	return nil
}

func argList(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var l []json.RawMessage
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, err
		}
		return raw, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("want a list of arguments or lines of JSON values")
	}
	var args []json.RawMessage
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if !json.Valid([]byte(line)) {
			return nil, fmt.Errorf("each line of a functional input must be a JSON value: %.100q", line)
		}
		args = append(args, json.RawMessage(line))
	}
	b, _ := json.Marshal(args)
	if args == nil {
		b = []byte("[]")
	}
	return b, nil
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

func checkerOf(raw json.RawMessage) (*Checker, error) {
	var src string
	if json.Unmarshal(raw, &src) == nil {
		if strings.TrimSpace(src) == "" {
			return nil, sdk.InvalidTask("checker", "empty")
		}
		return &Checker{Language: "python", Source: src}, nil
	}
	var c struct {
		Language string `json:"language"`
		Source   string `json:"source"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || strings.TrimSpace(c.Source) == "" {
		return nil, sdk.InvalidTask("checker", "want Python source, or {\"language\": \"python\"|\"cpp\", \"source\": ...}")
	}
	lang, ok := languageOf(c.Language)
	if c.Language == "" {
		lang, ok = "python", true
	}
	if !ok || (lang != "python" && lang != "cpp") {
		return nil, sdk.InvalidTask("checker.language", "%q: checkers run in python or cpp", c.Language)
	}
	return &Checker{Language: lang, Source: c.Source}, nil
}
