package testlog

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prorl/prorl/sdk/sdktest"
)

// The differential test: on real logs of real runners (testdata/logs,
// made by scripts/swebench/make_logs.sh), every parser must give exactly
// the status map SWE-bench's harness gives (swebench 4.1.0, installed
// pinned by scripts/ref.py, which make test runs).

type harnessCase struct {
	Parser string `json:"parser"`
	Log    string `json:"log"`
	name   string
}

// harness runs the harness's parsers on the cases.
func harness(t *testing.T, cases []harnessCase) []map[string]Status {
	t.Helper()
	py := sdktest.Reference(t, "../../../scripts/ref.py", "swebench")
	lines, err := sdktest.RunJSONLines(py, "../../../scripts/swebench/parse_logs.py", cases, runtime.NumCPU())
	if err != nil {
		t.Fatalf("harness parsers: %v", err)
	}
	var res []map[string]Status
	for _, l := range lines {
		var r struct {
			Statuses map[string]Status
			Error    string
		}
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatal(err)
		}
		if r.Error != "" {
			// Where the harness raises (a bare "FAIL:" line), ours skips
			// the line; nothing to compare.
			t.Logf("the harness raises on %s with %s: %s", cases[len(res)].name, cases[len(res)].Parser, r.Error)
			r.Statuses = nil
		}
		res = append(res, r.Statuses)
	}
	if len(res) != len(cases) {
		t.Fatalf("%d results for %d cases", len(res), len(cases))
	}
	return res
}

func loadLogs(t *testing.T) []harnessCase {
	dir := filepath.Join("testdata", "logs")
	idx, err := os.ReadFile(filepath.Join(dir, "index.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []harnessCase
	for _, line := range strings.Split(strings.TrimSpace(string(idx)), "\n") {
		name, parser, _ := strings.Cut(line, "\t")
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, harnessCase{Parser: parser, Log: string(b), name: name})
	}
	return cases
}

// edgeLogs are lines no runner printed here but that the parsers' string
// handling must treat as Python does: unusual whitespace, control
// characters, bare statuses, CRLF, colour codes without ESC.
var edgeLogs = []string{
	"PASSED a\x1cb\nFAILED x - y - z\nERROR\nERROR:\nFAIL:\nFAIL: \nSKIPPED\nXFAIL t::u\n",
	"PASSED t::a\r\nFAILED t::b - boom\r\n[32mPASSED[0m t::c\n\x1b[31mFAILED\x1b[0m t::d\nt::e PASSED\nt::f\tFAILED\n",
	"PASSED t::p[/a/b/c]\nPASSED t::q[//a/b]\nPASSED t::r[/a/*/c]\nFAILED t::s[x[0]] - e\nPASSED t::u[\u00a0]\nPASSED\u00a0t::v\nPASSED t::w[٣m]\n",
	"test_a (m.C) ... ok\ntest_b (m.C)\nDoc line. ... ok\ntest_c (m.C) ... \nok\ntest_d (m.C) ... FAIL\ntest_e (m.C) ... ERROR\ntest_f (m.C) ... skipped 'x'\nFAIL: test_g (m.C)\nERROR: test_h (m.C)\n  ok\ntest_i (m.C) ...  OK\n",
	"test_x (m.C) ... System check identified no issues (0 silenced)\nok\ntest_y (m.C) ... Internal Server Error: /a/b/\nok\n--version is equivalent to version\n",
	"test_a ok\ntest_b F\ntest_c E\n  test_d ok  \n____ sympy/a/b.py:test_e ____\n_ x.py:y _\ntest_f [OK]\n",
	"tests/t.py::test_a PASSED [ 50%]\ntests/t.py::test_b FAILED\nsome PASSED text\nMouseButton.LEFT PASSED\nPASSED t::MouseButton.RIGHT\n",
}

// TestParsersAgainstHarness: the same map as the harness's parser on
// every real log; a coloured log, stripped, gives the map of the plain one.
func TestParsersAgainstHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the swebench harness")
	}
	cases := loadLogs(t)
	for i, l := range edgeLogs {
		for p := range Parsers {
			cases = append(cases, harnessCase{Parser: p, Log: l, name: fmt.Sprintf("edge log %d", i)})
		}
	}
	ref := harness(t, cases)
	perParser := map[string][2]int{}
	for i, c := range cases {
		got := Parsers[c.Parser](c.Log)
		if ref[i] == nil {
			continue
		}
		n := perParser[c.Parser]
		n[1]++
		if reflect.DeepEqual(got, ref[i]) || len(got) == 0 && len(ref[i]) == 0 {
			n[0]++
		} else {
			t.Errorf("%s with %s: ours %d entries, harness %d\n%s", c.name, c.Parser, len(got), len(ref[i]), diff(got, ref[i]))
		}
		perParser[c.Parser] = n
		if plain, ok := strings.CutSuffix(c.name, "-colour.log"); ok {
			for j, d := range cases {
				if d.name == plain+".log" && d.Parser == c.Parser {
					if s := Parsers[c.Parser](StripANSI(c.Log)); !reflect.DeepEqual(s, ref[j]) {
						t.Errorf("%s stripped of colour with %s differs from the plain log:\n%s", c.name, c.Parser, diff(s, ref[j]))
					}
				}
			}
		}
	}
	names := make([]string, 0, len(perParser))
	for p := range perParser {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		t.Logf("parser %s: %d of %d logs (real ones and %d edge cases) parsed exactly as the harness does", p, perParser[p][0], perParser[p][1], len(edgeLogs))
	}
}

func diff(a, b map[string]Status) string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, "  "+k+": ours "+string(v)+", harness "+string(b[k]))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "  "+k+": ours missing, harness "+string(v))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// TestDefaultParserAgainstHarness: for a row with its own test_cmd and no
// log_parser, Parse reports every test SWE-bench's pytest and Django
// parsers report, with their status, on every real log and edge case:
// ids a row copied from SWE-bench (a parametrized id cut at its space, a
// docstring line for a unittest name) are found, not MISSING.
func TestDefaultParserAgainstHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the swebench harness")
	}
	logs := map[string]string{}
	for _, c := range loadLogs(t) {
		logs[c.name] = c.Log
	}
	for i, l := range edgeLogs {
		logs[fmt.Sprintf("edge log %d", i)] = l
	}
	logs["parametrized ids with spaces"] = "PASSED tests/test_norm.py::test_norm[a b]\nFAILED tests/test_norm.py::test_norm[c d e] - AssertionError\nPASSED tests/test_norm.py::test_plain\n"
	logs["unittest docstrings"] = "test_slug (utils_tests.test_text.TestUtilsText)\nSlugify handles unicode. ... ok\ntest_wrap (utils_tests.test_text.TestUtilsText)\nWrap long lines. ... FAIL\ntest_x (m.C) ... ok\n"
	var cases []harnessCase
	for name, l := range logs {
		for _, p := range []string{"pytest", "django"} {
			cases = append(cases, harnessCase{Parser: p, Log: l, name: name})
		}
	}
	ref := harness(t, cases)
	covered := 0
	for i, c := range cases {
		got, full := Parse(c.Log), parseFull(c.Log)
		for k, v := range ref[i] {
			if _, ours := full[k]; ours || !slices.Contains(statuses, v) {
				// A full id read as its runner printed it, by design (a
				// quirk of the harness's aside); or "ERROR:", which the
				// pytest parser takes from a unittest line (no status).
				continue
			}
			if got[k] != v {
				t.Errorf("%s: the harness's %s parser has %q %s, ours %q", c.name, c.Parser, k, v, got[k])
			}
		}
		covered += len(ref[i])
	}
	if !t.Failed() {
		t.Logf("%d test ids the harness's pytest and Django parsers report over %d logs: every one found with its status", covered, len(logs))
	}
	full := Parse(logs["parametrized ids with spaces"])
	if full["tests/test_norm.py::test_norm[a"] != Passed || full["tests/test_norm.py::test_norm[a b]"] != Passed || full["tests/test_norm.py::test_norm[c"] != Failed {
		t.Errorf("parametrized ids: %v", full)
	}
	doc := Parse(logs["unittest docstrings"])
	if doc["Slugify handles unicode."] != Passed || doc["test_slug (utils_tests.test_text.TestUtilsText)"] != Passed || doc["Wrap long lines."] != Failed {
		t.Errorf("docstring ids: %v", doc)
	}
}
