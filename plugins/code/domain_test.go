package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	pb "github.com/prorl/prorl/sdk/proto"
	"github.com/prorl/prorl/sdk/sdktest"
)

func py(code string) string { return "Here it is.\n```python\n" + code + "\n```" }

const sumTask = `{"id":"sum","question":"Read two integers and print their sum.","tests":[{"input":"1 2\n","output":"3\n"},{"input":"10 -4\n","output":"6"},{"input":"5 5\n","output":"10\n"}]}`

func TestConformance(t *testing.T) {
	sdktest.Conformance(t, sdktest.Suite{
		Domain: New(),
		Host:   sdktest.NewFakeHost(t),
		// A generous limit: this suite checks scoring (and scoring 8 at once),
		// not speed, on a loaded 2-core machine where 2 s was once too little.
		Config: json.RawMessage(`{"max_turns": 6, "time_limit": 10, "workers": 2}`),
		Cases: []sdktest.Case{
			{Name: "stdio", Task: json.RawMessage(sumTask), Right: py("a, b = map(int, input().split())\nprint(a + b)"), Wrong: py("print(3)")},
			{Name: "apps fn_name row", Task: json.RawMessage(`{"data_source":"apps","prompt":[{"role":"user","content":"Write add(a, b)."}],"reward_model":{"ground_truth":"{\"fn_name\": \"add\", \"inputs\": [[1, 2], [3, 4]], \"outputs\": [[3], [7]]}"}}`),
				Right: py("def add(a, b):\n    return a + b"), Wrong: py("def add(a, b):\n    return a * b")},
			{Name: "deepcoder stdin list", Task: json.RawMessage(`{"data_source":"deepcoder","prompt":"Print n squared.","reward_model":{"ground_truth":"[{\"input\": \"3\\n\", \"output\": \"9\\n\"}, {\"input\": \"4\\n\", \"output\": \"16\\n\"}]"}}`),
				Right: py("n = int(input())\nprint(n * n)"), Wrong: py("print(9)")},
			{Name: "livecodebench functional", Task: json.RawMessage(`{"data_source":"livecodebench","prompt":"class Solution: def maxOf(self, nums, k) -> int","reward_model":{"ground_truth":"[{\"input\": \"[1, 5, 2]\\n0\", \"output\": \"5\", \"testtype\": \"functional\", \"metadata\": {\"func_name\": \"Solution.maxOf\"}}]"}}`),
				Right: py("class Solution:\n    def maxOf(self, nums, k):\n        return max(nums) + k"), Wrong: py("class Solution:\n    def maxOf(self, nums, k):\n        return min(nums)")},
			{Name: "mbpp asserts", Task: json.RawMessage(`{"text":"Write a function to reverse a list.","test_list":["assert rev([1, 2, 3]) == [3, 2, 1]","assert rev([]) == []"]}`),
				Right: py("def rev(xs):\n    return xs[::-1]"), Wrong: py("def rev(xs):\n    return xs")},
			{Name: "humaneval check", Task: json.RawMessage(`{"task_id":"HumanEval/0","prompt":"def inc(x):\n    \"\"\"Add one.\"\"\"\n","entry_point":"inc","test":"def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(-1) == 0, 'negative'\n"}`),
				Right: py("def inc(x):\n    return x + 1"), Wrong: py("def inc(x):\n    return x")},
		},
		BadTasks: []json.RawMessage{
			json.RawMessage(`{"question":"no tests"}`),
			json.RawMessage(`{"tests":[{"input":"1","output":"1"}]}`),
			json.RawMessage(`{"question":"q","tests":[{"input":"1"}]}`),
			json.RawMessage(`{"question":"q","reward_model":{"ground_truth":"{\"inputs\":[\"1\"],\"outputs\":[]}"}}`),
			json.RawMessage(`{"question":"q","test_list":[]}`),
			json.RawMessage(`{"question":"q","test_list":["f(1) == 2"]}`),
			json.RawMessage(`{"data_source":"primeintellect","prompt":"p","reward_model":{"ground_truth":"[{'input': '1', 'output': '2'}]"}}`),
			json.RawMessage(`{"task_id":"HumanEval/1","prompt":"def f():
","entry_point":"f","test":"def check(candidate):
    candidate()
"}`),
			json.RawMessage(`{"question":"q","compare":"fuzzy","tests":[{"input":"1","output":"1"}]}`),
			json.RawMessage(`{"question":"q","language":"cobol","tests":[{"input":"1","output":"1"}]}`),
			json.RawMessage(`{"question":"q","language":"cpp","fn_name":"f","tests":[{"args":[1],"expected":1}]}`),
			json.RawMessage(`{"question":"q","time_limit":"2 fortnights","tests":[{"input":"1","output":"1"}]}`),
			json.RawMessage(`{"question":"q","tests":"   "}`),
			json.RawMessage(`{"question":"q","fn_name":"a b","tests":[{"args":[1],"expected":1}]}`),
			json.RawMessage(`{"question":"q","time_limit":0,"tests":[{"input":"1","output":"1"}]}`),
		},
	})
}

type judged struct {
	reward   float64
	metrics  map[string]float64
	verdicts []string
	info     map[string]any
}

// evalN numbers evaluations: the HumanEval test runs them from several goroutines.
var evalN atomic.Int64

// evaluate scores a response over gRPC, in a fresh fake sandbox each time.
func evaluate(t *testing.T, h *sdktest.Harness, task, resp string) judged {
	t.Helper()
	n := evalN.Add(1)
	// As the host does: Prepare opens the rollout's session, Evaluate
	// scores it, Release drops it.
	id := fmt.Sprintf("t-%d", n)
	ctx := context.Background()
	p, err := h.Client.Prepare(ctx, &pb.PrepareRequest{RolloutId: id, TaskJson: json.RawMessage(task)})
	if err != nil || len(p.Diagnostics) > 0 {
		t.Fatalf("Prepare: %v %v", err, p.GetDiagnostics())
	}
	defer h.Client.Release(ctx, &pb.ReleaseRequest{RolloutId: id})
	r, err := h.Client.Evaluate(ctx, &pb.EvaluateRequest{RolloutId: id, TaskJson: json.RawMessage(task),
		FinalResponse: resp, EvalSandboxId: fmt.Sprintf("eval-%d", n)})
	if err != nil || len(r.Diagnostics) > 0 {
		t.Fatalf("Evaluate: %v %v", err, r.GetDiagnostics())
	}
	j := judged{reward: r.Reward, metrics: r.Metrics}
	if err := json.Unmarshal(r.InfoJson, &j.info); err != nil {
		t.Fatal(err)
	}
	if v, ok := j.info["verdicts"].([]any); ok {
		for _, x := range v {
			j.verdicts = append(j.verdicts, x.(string))
		}
	}
	return j
}

func start(t *testing.T) *sdktest.Harness {
	return startWith(t, `{"time_limit": 1, "memory_mb": 128, "workers": 2}`)
}

func startWith(t *testing.T, cfg string) *sdktest.Harness {
	h := sdktest.StartWithHost(t, New(), sdktest.NewFakeHost(t))
	if r, err := h.Configure(context.Background(), json.RawMessage(cfg)); err != nil || len(r.Diagnostics) > 0 {
		t.Fatalf("configure: %v %v", err, r.GetDiagnostics())
	}
	return h
}

// TestVerdicts: each failure mode gets its verdict, and a solution that
// tries to game the judge gets no credit.
func TestVerdicts(t *testing.T) {
	h := start(t)
	big := strings.Repeat("x", 200000)
	bigTask := `{"question":"Print the length of the line.","tests":[{"input":"` + big + `\n","output":"200000\n"},{"input":"ab\n","output":"2\n"}]}`
	fnTask := `{"question":"Write double(x).","fn_name":"double","tests":[{"args":[2],"expected":4},{"args":[5],"expected":10},{"args":[0.5],"expected":1.0}]}`
	cases := []struct {
		name, task, code string
		reward           float64
		verdicts         string
	}{
		{"accepted", sumTask, "a, b = map(int, input().split())\nprint(a + b)", 1, "AC AC AC"},
		{"trailing whitespace and CRLF are fine", sumTask, "a, b = map(int, input().split())\nprint(str(a + b) + '   ', end='\\r\\n\\n')", 1, "AC AC AC"},
		{"wrong answer", sumTask, "a, b = map(int, input().split())\nprint(a - b)", 0, "WA WA WA"},
		{"compile error", sumTask, "def f(:\n  pass", 0, "CE CE CE"},
		{"runtime error", sumTask, "raise ValueError('boom')", 0, "RE RE RE"},
		{"time limit", sumTask, "while True:\n    pass", 0, "TLE TLE TLE"},
		{"memory limit", sumTask, "x = bytearray(1 << 30)\nprint(len(x))", 0, "MLE MLE MLE"},
		{"large input read", bigTask, "print(len(input()))", 1, "AC AC"},
		{"large input left unread", bigTask, "import sys\nsys.exit(0)", 0, "WA WA"},
		{"function accepted", fnTask, "def double(x):\n    return 2 * x", 1, "AC AC AC"},
		{"function wrong type", fnTask, "def double(x):\n    return str(2 * x)", 0, "WA WA WA"},
		// Gaming: what a solution cannot know it cannot print.
		{"prints a guess", sumTask, "print(3)", 0, "AC WA WA"},
		{"exits early with status 0", sumTask, "import sys\nsys.exit(0)", 0, "WA WA WA"},
		{"os._exit(0) in the function", fnTask, "import os\ndef double(x):\n    os._exit(0)", 0, "RE RE RE"},
		{"forges a result line", fnTask, "print('\\x00prorl-result\\x00' + '4')\ndef double(x):\n    raise SystemExit(0)", 0, "RE RE RE"},
		{"patches builtins", fnTask, "import builtins, json\nbuiltins.print = lambda *a, **k: None\njson.dumps = lambda *a, **k: '4'\ndef double(x):\n    return -1", 0, "WA WA WA"},
		{"reads the judge's files", sumTask, "import os, glob\nfound = [p for p in glob.glob('/tmp/*') + glob.glob('./**', recursive=True) if os.path.isfile(p)]\nprint(' '.join(open(p, errors='ignore').read(20) for p in found[:50]) or 'nothing')", 0, "no credit"},
		{"kills the judge", sumTask, "import os\nos.kill(os.getppid(), 9)", 0, "RE RE RE"},
		{"reads stdin for other tests", sumTask, "import sys\nprint(sys.stdin.read())", 0, "WA WA WA"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := evaluate(t, h, c.task, "```python\n"+c.code+"\n```")
			got := strings.Join(j.verdicts, " ")
			if c.verdicts == "no credit" { // what fails (WA, or TLE on a loaded machine) is not the point
				if j.reward != 0 || slices.Contains(j.verdicts, VerdictAC) || len(j.verdicts) == 0 {
					t.Fatalf("reward %v verdicts %v: a cheat got credit; info %v", j.reward, j.verdicts, j.info)
				}
				return
			}
			if j.reward != c.reward || got != c.verdicts {
				t.Fatalf("reward %v verdicts %v, want %v %q; info %v", j.reward, j.verdicts, c.reward, c.verdicts, j.info)
			}
		})
	}
}

func TestNoCode(t *testing.T) {
	h := start(t)
	j := evaluate(t, h, sumTask, "I could not solve it.")
	if j.reward != 0 || j.metrics["format_ok"] != 0 || j.info["verdict"] != "no_code" {
		t.Fatalf("%+v", j)
	}
}

func TestLastCodeBlock(t *testing.T) {
	for _, c := range []struct{ in, lang, want string }{
		{"```python\na\n```\ntext\n```python\nb\n```", "python", "b\n"},
		{"```py\nc\n```", "python", "c\n"},
		{"```\nd\n```", "python", "d\n"},
		{"```bash\nls\n```\n```python\ne\n```\n```bash\npwd\n```", "python", "e\n"},
		{"```python\nx\n```\n```cpp\nint main(){}\n```", "cpp", "int main(){}\n"},
		{"```C++\ny\n```", "cpp", "y\n"},
		{"```java\nclass Main{}\n```", "java", "class Main{}\n"},
		{"```js\nconsole.log(1)\n```", "javascript", "console.log(1)\n"},
		{"no code", "", ""},
	} {
		got, _ := lastCodeBlock(c.in, "")
		if got.code != c.want || got.lang != c.lang {
			t.Errorf("%q: got %+v", c.in, got)
		}
	}
}

func FuzzParseTask(f *testing.F) {
	f.Add(sumTask)
	f.Add(`{"text":"t","test_list":["assert f((1, 2), 'a==b') == [3]"]}`)
	f.Add(`{"prompt":"p","reward_model":{"ground_truth":"[{\"input\":\"1\",\"output\":\"2\",\"testtype\":\"functional\",\"metadata\":{\"func_name\":\"f\"}}]"}}`)
	f.Add(`{"question_content":"q","public_test_cases":"[{\"input\":\"1\",\"output\":\"1\",\"testtype\":\"stdin\"}]","private_test_cases":"eJxrYJkawAABPT7R1UqZeQWlJUpWCkomMXmGCkYKxgpAhpKOglJ+aQlUxkjP1AAGIHIlqcUlJZUFqSDZ4pKUzDyl2tgpegAQ8Bh4","metadata":"{}"}`)
	f.Add(`{"question":"q","tests":{"functional":"def check(candidate):\n    assert candidate(1) == 2\ncheck(f)"}}`)
	f.Add(`{"name":"x","description":"d","public_tests":{"input":["1"],"output":["1"]},"time_limit":{"seconds":1,"nanos":5}}`)
	f.Fuzz(func(t *testing.T, s string) {
		task, err := ParseTask(json.RawMessage(s))
		if err == nil && (len(task.Tests) == 0 || (task.Mode != ModeStdio && task.Mode != ModeFunction && task.Mode != ModeCheck)) {
			t.Fatalf("accepted %q as %+v", s, task)
		}
		if err == nil && task.Mode == ModeCheck {
			for _, c := range task.Tests {
				if !strings.Contains(c.Check+c.Pytest, "assert") {
					t.Fatalf("a check that asserts nothing: %q", s)
				}
			}
		}
	})
}

// TestTimeLimitIsCPUTime: the limit is on the solution's CPU time, so a
// verdict does not change with the machine's load: a solution that needs
// about half its limit of CPU is accepted while busy loops take every
// core (its wall time then far exceeds the limit); one that computes past
// the limit is TLE even when it finishes within the wall-clock backstop;
// one that only waits ends at the backstop (3 × limit + 2 s, time spent
// waiting for a CPU not counted).
func TestTimeLimitIsCPUTime(t *testing.T) {
	h := startWith(t, `{"time_limit": 1, "memory_mb": 128, "workers": 1}`)
	task := `{"question":"Print n.","tests":[{"input":"5\n","output":"5\n"}]}`
	burn := func(seconds float64) string {
		return fmt.Sprintf("import time\nend = time.process_time() + %g\nwhile time.process_time() < end:\n    pass\nprint(input())", seconds)
	}
	// Busy loops on every core, in processes of their own (a goroutine
	// would share the test's scheduler).
	for range runtime.NumCPU() + 1 {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	for _, c := range []struct {
		name, code, verdict string
	}{
		{"half the limit of CPU on a loaded machine", burn(0.5), "AC"},
		{"past the limit of CPU", burn(1.3), "TLE"},
		{"waits twice the limit", "import time\ntime.sleep(2)\nprint(input())", "AC"},
		{"waits past the backstop", "import time\ntime.sleep(30)\nprint(input())", "TLE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := evaluate(t, h, task, "```python\n"+c.code+"\n```")
			if got := strings.Join(j.verdicts, " "); got != c.verdict {
				t.Fatalf("verdicts %v, want %s; info %v", j.verdicts, c.verdict, j.info)
			}
		})
	}
}

// TestCheckCheats: a solution judged by the dataset's own checks tries
// to get around the checker process.
func TestCheckCheats(t *testing.T) {
	// Check tests start a fresh interpreter: room for it on a loaded machine.
	h := startWith(t, `{"time_limit": 3, "memory_mb": 128, "workers": 2}`)
	task := `{"task_id":"HumanEval/x","prompt":"def f(x):\n    \"\"\"Double x.\"\"\"\n","entry_point":"f","test":"def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(5) == 10\n"}`
	mbpp := `{"task_id":1,"text":"double","test_list":["assert f(2) == 4","assert f(5) == 10"]}`
	// MBPP 82's shape, its asserts in both forms the dataset uses.
	sphere := `{"task_id":82,"text":"Write a function to find the volume of a sphere.","test_list":["assert math.isclose(volume_sphere(10), 4188.790204786391, rel_tol=0.001)","assert math.isclose(volume_sphere(25), 65449.84694978735, rel_tol=0.001)"]}`
	sphereFrom := `{"task_id":82,"text":"Write a function to find the volume of a sphere.","test_list":["assert isclose(volume_sphere(10), 4188.790204786391, rel_tol=0.001)"]}`
	sortedRow := `{"task_id":2,"text":"sort","test_list":["assert sorted(f([3, 1])) == [1, 3]"]}`
	twice := `{"task_id":3,"text":"reverse","test_list":["assert rev(rev([1, 2])) == [1, 2]","assert rev([1, 2]) == [2, 1]"]}`
	sphereImports := `{"task_id":82,"text":"Write a function to find the volume of a sphere.","test_imports":["import math"],"test_list":["assert math.isclose(volume_sphere(10), 4188.790204786391, rel_tol=0.001)"]}`
	cases := []struct {
		name, task, code, verdict string
	}{
		{"control", task, "def f(x):\n    return 2 * x", "AC"},
		// Only the judge's own processes (the driver's children): outside a
		// sandbox, as root, anything wider would hit this machine.
		{"kills the checker", task, "import os, signal\ndef f(x):\n    me, parent = os.getpid(), os.getppid()\n    for p in os.listdir('/proc'):\n        try:\n            ppid = int(open('/proc/%s/stat' % p).read().rsplit(')', 1)[1].split()[1])\n        except (OSError, IndexError, ValueError):\n            continue\n        if ppid == parent and int(p) != me:\n            os.kill(int(p), signal.SIGKILL)\n    return 2 * x", "RE"},
		{"answers on the wire for the checker", task, "import os, struct, json\ndef f(x):\n    s = json.dumps({'ok': ['i', str(2 * x)]}).encode()\n    os.write(int(__import__('sys').argv[2]) if len(__import__('sys').argv) > 2 else 3, struct.pack('>I', len(s)) + s)\n    return 0", "WA"},
		{"an unencodable result", task, "import threading\ndef f(x):\n    return threading.Lock()", "WA"},
		{"a generator", task, "def f(x):\n    yield 2 * x", "WA"},
		{"prints instead of returning", task, "def f(x):\n    print(2 * x)", "WA"},
		{"sleeps past the limit", task, "import time\ndef f(x):\n    time.sleep(30)", "TLE"},
		{"exhausts memory", task, "def f(x):\n    return bytearray(1 << 31)", "MLE"},
		{"a syntax error", task, "def f(x) return 2x", "CE"},
		{"module-level exit", mbpp, "import sys\nsys.exit(0)\ndef f(x):\n    return 2 * x", "RE"},
		{"mbpp control", mbpp, "def f(x):\n    return x + x", "AC"},
		// MBPP's asserts use what the solution imported (no test_imports):
		// the checker sees its own copy of those modules and functions.
		{"asserts use the solution's module", sphere, "import math\ndef volume_sphere(r):\n    return 4 / 3 * math.pi * r ** 3", "AC"},
		{"asserts use the solution's function", sphereFrom, "from math import isclose, pi\ndef volume_sphere(r):\n    return 4 / 3 * pi * r ** 3", "AC"},
		{"test_imports still work", sphereImports, "def volume_sphere(r):\n    return 4 / 3 * 3.141592653589793 * r ** 3", "AC"},
		{"patches its module's function", sphere, "import math\nmath.isclose = lambda *a, **k: True\ndef volume_sphere(r):\n    return 0", "WA"},
		{"patches an imported function", sphereFrom, "import math\nmath.isclose = lambda *a, **k: True\nfrom math import isclose\ndef volume_sphere(r):\n    return 0", "WA"},
		{"a module of its own making", sphere, "import types\nmath = types.ModuleType('math')\nmath.isclose = lambda *a, **k: True\ndef volume_sphere(r):\n    return 0", "RE"},
		{"a function named as an import", sphereFrom, "def isclose(*a, **k):\n    return True\ndef volume_sphere(r):\n    return 0", "WA"},
		{"shadows a builtin the asserts apply", sortedRow, "sorted = lambda *a, **k: [1, 3]\ndef f(x):\n    return []", "WA"},
		{"a function applied to its own result", twice, "def rev(x):\n    return x[::-1]", "AC"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := evaluate(t, h, c.task, "```python\n"+c.code+"\n```")
			if j.info["verdict"] != c.verdict || (j.reward == 1) != (c.verdict == "AC") {
				t.Fatalf("reward %v verdict %v, want %s; info %v", j.reward, j.info["verdict"], c.verdict, j.info)
			}
		})
	}
	// A reply over the 64 MiB frame limit is refused, not decoded: with
	// time and memory to build it even on a loaded machine.
	t.Run("a huge frame", func(t *testing.T) {
		roomy := startWith(t, `{"time_limit": 20, "memory_mb": 1024, "workers": 1}`)
		j := evaluate(t, roomy, task, "```python\ndef f(x):\n    return 'x' * (80 << 20)\n```")
		if j.info["verdict"] != "RE" || j.reward != 0 {
			t.Fatalf("reward %v verdict %v, want RE; info %v", j.reward, j.info["verdict"], j.info)
		}
	})
}

// TestJudgeLeavesNoFiles: the judge removes what it wrote to the temporary
// directory (its work directory, a checker's, pytest's tmp_path) once it has
// answered. A fresh sandbox per evaluation would drop them anyway; driver
// "none" and this test's fake host share one /tmp, which kept one
// directory per evaluation, about 500 a `make test`.
func TestJudgeLeavesNoFiles(t *testing.T) {
	h := start(t)
	checked := `{"question":"Print the sum.","checker":"import sys\nout, ans = (open(p).read().split() for p in sys.argv[2:4])\nsys.exit(0 if out == ans else 1)","tests":[{"input":"1 2\n","output":"3\n"}]}`
	pytestTask := `{"question":"Write save(d).","test":"from solution import save\n\ndef test_save(tmp_path):\n    p = tmp_path / 'x.txt'\n    save(str(p))\n    assert p.read_text() == 'ok'\n"}`
	for _, c := range []struct{ name, task, code string }{
		{"stdio", sumTask, "a, b = map(int, input().split())\nprint(a + b)"},
		{"compile error", sumTask, "def f(:\n  pass"},
		{"special judge", checked, "a, b = map(int, input().split())\nprint(a + b)"},
		{"pytest tmp_path", pytestTask, "def save(p):\n    open(p, 'w').write('ok')"},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := evaluate(t, h, c.task, py(c.code))
			if c.name != "compile error" && j.reward != 1 {
				t.Fatalf("reward %v verdicts %v; info %v", j.reward, j.verdicts, j.info)
			}
			tmp, err := h.Host.TempDir(fmt.Sprintf("eval-%d", evalN.Load())) // the sandbox evaluate just used
			if err != nil {
				t.Fatal(err)
			}
			left, err := os.ReadDir(tmp)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range left {
				t.Errorf("left in TMPDIR: %s", e.Name())
			}
		})
	}
}
