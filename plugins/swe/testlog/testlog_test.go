package testlog

import "testing"

func TestParse(t *testing.T) {
	cases := []struct {
		name, log string
		want      map[string]Status
	}{
		{"pytest -rA summary", "============ short test summary info ============\nPASSED tests/test_a.py::test_one\nFAILED tests/test_a.py::test_two - AssertionError: 1 != 2\nERROR tests/test_b.py::test_three - NameError\nSKIPPED [1] tests/test_b.py:9: no network\nXFAIL tests/test_b.py::test_four\n",
			// "[1]": parse_log_pytest's key for the SKIPPED line, kept as it gives it.
			map[string]Status{"tests/test_a.py::test_one": Passed, "tests/test_a.py::test_two": Failed, "tests/test_b.py::test_three": Error, "tests/test_b.py::test_four": XFail, "[1]": Skipped}},
		{"pytest verbose", "tests/test_a.py::test_one PASSED                 [ 50%]\ntests/test_a.py::test_p[1-2] FAILED             [100%]\n",
			map[string]Status{"tests/test_a.py::test_one": Passed, "tests/test_a.py::test_p[1-2]": Failed}},
		{"pytest parametrized summary", "PASSED tests/t.py::test_x[a b]\nFAILED tests/t.py::test_y[1] - boom\n", map[string]Status{"tests/t.py::test_x[a b]": Passed, "tests/t.py::test_x[a": Passed, "tests/t.py::test_y[1]": Failed}},
		{"unittest -v", "test_add (tests.test_calc.TestCalc) ... ok\ntest_sub (tests.test_calc.TestCalc) ... FAIL\ntest_div (tests.test_calc.TestCalc) ... ERROR\ntest_skip (tests.test_calc.TestCalc) ... skipped 'later'\ntest_xf (tests.test_calc.TestCalc) ... expected failure\n",
			map[string]Status{"test_add (tests.test_calc.TestCalc)": Passed, "test_sub (tests.test_calc.TestCalc)": Failed, "test_div (tests.test_calc.TestCalc)": Error, "test_skip (tests.test_calc.TestCalc)": Skipped, "test_xf (tests.test_calc.TestCalc)": XFail}},
		{"django with docstring", "test_slug (utils_tests.test_text.TestUtilsText)\nSlugify handles unicode. ... ok\ntest_wrap (utils_tests.test_text.TestUtilsText) ... FAIL\n",
			map[string]Status{"test_slug (utils_tests.test_text.TestUtilsText)": Passed, "Slugify handles unicode.": Passed, "test_wrap (utils_tests.test_text.TestUtilsText)": Failed}},
		{"rerun keeps the last", "tests/t.py::test_a FAILED\nPASSED tests/t.py::test_a\n", map[string]Status{"tests/t.py::test_a": Passed}},
		{"CRLF", "test_a (m.C) ... ok\r\n", map[string]Status{"test_a (m.C)": Passed}},
		{"noise", "collected 3 items\n\n=== 1 failed, 2 passed in 0.1s ===\nok\n ... ok\nFAILED\n", map[string]Status{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Parse(c.log)
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Fatalf("%s: got %q, want %q (all %v)", k, got[k], v, got)
				}
			}
		})
	}
}

func TestGrade(t *testing.T) {
	st := map[string]Status{"a": Passed, "b": Failed, "c": XFail, "d": Skipped}
	cases := []struct {
		f2p, p2p []string
		resolved bool
	}{
		{[]string{"a"}, []string{"c"}, true},
		{[]string{"a", "b"}, nil, false},
		{[]string{"a"}, []string{"d"}, false},
		{[]string{"missing"}, nil, false},
		{nil, nil, true},
	}
	for _, c := range cases {
		if r, _, _ := Grade(st, c.f2p, c.p2p); r != c.resolved {
			t.Errorf("%v %v: %v", c.f2p, c.p2p, r)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("PASSED a::b\ntest_x (m.C) ... ok\n")
	f.Fuzz(func(t *testing.T, s string) {
		for k, v := range Parse(s) {
			if k == "" || v == "" {
				t.Fatalf("empty entry %q=%q", k, v)
			}
		}
	})
}

// FuzzHarnessParsers: every harness parser reads any log without panicking
// (where the harness itself raises, on a bare "FAIL:", ours skips the line).
func FuzzHarnessParsers(f *testing.F) {
	f.Add("PASSED a::b\nFAILED c - d\ntest_x (m.C) ... ok\nFAIL:\n____ a.py:test_b ____\ntest_c ok\n")
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range Parsers {
			_ = p(s)
			_ = p(StripANSI(s))
		}
	})
}
