package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/prorl/prorl/sdk/sdktest"
)

// testPatches are test patches in the shapes datasets carry: a changed
// test file, a new one, data files the directives leave out, nested and
// Django-style paths and a binary file.
var testPatches = []string{
	"diff --git a/tests/test_core.py b/tests/test_core.py\nindex 1111111..2222222 100644\n--- a/tests/test_core.py\n+++ b/tests/test_core.py\n@@ -1,3 +1,4 @@\n import x\n+import y\n \n def test_a():\n",
	"diff --git a/tests/utils_tests/test_text.py b/tests/utils_tests/test_text.py\nindex 1111111..2222222 100644\n--- a/tests/utils_tests/test_text.py\n+++ b/tests/utils_tests/test_text.py\n@@ -1 +1,2 @@\n a\n+b\ndiff --git a/tests/new_app/__init__.py b/tests/new_app/__init__.py\nnew file mode 100644\nindex 0000000..e69de29\n--- /dev/null\n+++ b/tests/new_app/__init__.py\n@@ -0,0 +1 @@\n+\n",
	"diff --git a/pkg/tests/data/expected.json b/pkg/tests/data/expected.json\nindex 1111111..2222222 100644\n--- a/pkg/tests/data/expected.json\n+++ b/pkg/tests/data/expected.json\n@@ -1 +1 @@\n-{}\n+{\"a\": 1}\ndiff --git a/pkg/tests/test_io.py b/pkg/tests/test_io.py\nindex 1111111..2222222 100644\n--- a/pkg/tests/test_io.py\n+++ b/pkg/tests/test_io.py\n@@ -1 +1,2 @@\n a\n+b\ndiff --git a/doc/changes.md b/doc/changes.md\nindex 1111111..2222222 100644\n--- a/doc/changes.md\n+++ b/doc/changes.md\n@@ -1 +1,2 @@\n a\n+b\n",
	"diff --git a/testing/test_mark.py b/testing/test_mark.py\nindex 1111111..2222222 100644\n--- a/testing/test_mark.py\n+++ b/testing/test_mark.py\n@@ -10 +10,4 @@ def test_x():\n     pass\n+\n+def test_y():\n+    assert 1\n",
	"diff --git a/tests/data/img.png b/tests/data/img.png\nindex 1111111..2222222 100644\nBinary files a/tests/data/img.png and b/tests/data/img.png differ\ndiff --git a/tests/test_img.py b/tests/test_img.py\nindex 1111111..2222222 100644\n--- a/tests/test_img.py\n+++ b/tests/test_img.py\n@@ -1 +1,2 @@\n a\n+b\n",
	"diff --git a/sympy/core/tests/test_basic.py b/sympy/core/tests/test_basic.py\nindex 1111111..2222222 100644\n--- a/sympy/core/tests/test_basic.py\n+++ b/sympy/core/tests/test_basic.py\n@@ -1 +1,2 @@\n a\n+b\ndiff --git a/sympy/core/tests/test_new.py b/sympy/core/tests/test_new.py\nnew file mode 100644\nindex 0000000..3333333\n--- /dev/null\n+++ b/sympy/core/tests/test_new.py\n@@ -0,0 +1 @@\n+x = 1\n",
}

type evalRow struct {
	InstanceID string `json:"instance_id"`
	Repo       string `json:"repo"`
	Version    string `json:"version"`
	BaseCommit string `json:"base_commit"`
	TestPatch  string `json:"test_patch"`
}

// TestEvalScriptsAgainstHarness: for every repository and version in the
// harness's spec table, our eval script is byte for byte the one the
// harness (swebench 4.1.0, installed by scripts/ref.py)
// writes, on synthetic rows with each shape of test patch.
func TestEvalScriptsAgainstHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the swebench harness")
	}
	py := sdktest.Reference(t, "../../scripts/ref.py", "swebench")
	var rows []evalRow
	repos := make([]string, 0, len(specs.Repos))
	for r := range specs.Repos {
		repos = append(repos, r)
	}
	sort.Strings(repos)
	for _, r := range repos {
		for v := range specs.Repos[r].Versions {
			for i, p := range testPatches {
				rows = append(rows, evalRow{InstanceID: fmt.Sprintf("%s-%d", strings.ReplaceAll(r, "/", "__"), i), Repo: r, Version: v,
					BaseCommit: fmt.Sprintf("%040x", i+1), TestPatch: p})
			}
		}
	}
	lines, err := sdktest.RunJSONLines(py, "../../scripts/swebench/eval_scripts.py", rows, runtime.NumCPU())
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	same := 0
	for i, l := range lines {
		var ref struct{ Script string }
		if err := json.Unmarshal(l, &ref); err != nil {
			t.Fatal(err)
		}
		r := rows[i]
		ours, err := EvalScript(r.Repo, r.Version, r.BaseCommit, r.TestPatch, repoDirectory)
		switch {
		case err != nil:
			t.Errorf("%s %s: %v", r.Repo, r.Version, err)
		case ours != ref.Script:
			t.Errorf("%s %s patch %d: scripts differ\nours:\n%s\nharness:\n%s", r.Repo, r.Version, i%len(testPatches), ours, ref.Script)
		default:
			same++
		}
	}
	t.Logf("%d of %d eval scripts (%d repositories, every version, %d test patch shapes) identical to the harness's", same, len(rows), len(repos), len(testPatches))
}

// TestUnknownSpec: a repository or version the harness has no spec for is
// an invalid task that names it.
func TestUnknownSpec(t *testing.T) {
	if _, err := EvalScript("django/django", "0.1", "abc", "", repoDirectory); err == nil || !strings.Contains(err.Error(), `version "0.1"`) || !strings.Contains(err.Error(), "4.0") {
		t.Errorf("unknown version: %v", err)
	}
	if _, err := EvalScript("acme/widgets", "1.0", "abc", "", repoDirectory); err == nil || !strings.Contains(err.Error(), "acme/widgets") {
		t.Errorf("unknown repo: %v", err)
	}
}

// FuzzPatchPaths: the harness's path readers take any patch text.
func FuzzPatchPaths(f *testing.F) {
	for _, p := range testPatches {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		_ = modifiedFiles(p)
		_ = testDirectives("django/django", p)
		_, _ = EvalScript("django/django", "4.0", "abc", p, repoDirectory)
	})
}
