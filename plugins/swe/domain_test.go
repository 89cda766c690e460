package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prorl/prorl/sdk/sdktest"
)

// fixtures are the instances `make swe-fixtures` builds.
func fixtures(t *testing.T) (imageDir string, rows []map[string]any) {
	imageDir = "/var/cache/prorl/images" // make swe-fixtures, as root
	if os.Geteuid() != 0 {
		home, _ := os.UserHomeDir()
		imageDir = filepath.Join(home, ".cache", "prorl", "images")
	}
	if _, err := os.Stat(filepath.Join(imageDir, "swe-prorl__stack-5", "rootfs", "testbed")); err != nil {
		sdktest.Missing(t, "SWE fixtures in "+imageDir+" (make swe-fixtures)", err)
	}
	f, err := os.Open(filepath.Join("..", "..", "examples", "swe", "tasks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return imageDir, rows
}

// TestHistoryHidden runs the setup script on copies of the fixture
// repositories (with git, no sandbox) and checks that the fix commit, its
// branch and tag, and every later commit are gone.
func TestHistoryHidden(t *testing.T) {
	imageDir, rows := fixtures(t)
	for _, r := range rows {
		if r["fix_commit"] == nil {
			continue // the real-shape fixtures carry no later history
		}
		id := r["instance_id"].(string)
		t.Run(id, func(t *testing.T) {
			repo := filepath.Join(t.TempDir(), "testbed")
			if out, err := exec.Command("cp", "-a", filepath.Join(imageDir, "swe-"+id, "rootfs", "testbed"), repo).CombinedOutput(); err != nil {
				t.Fatalf("%v %s", err, out)
			}
			task, err := ParseTask(mustJSON(r))
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", "-c", setupScript(task))
			cmd.Env = append(os.Environ(), "BASE="+task.BaseCommit, "REPO="+repo, "GIT_CONFIG_GLOBAL="+filepath.Join(t.TempDir(), "gitconfig"))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("setup: %v\n%s", err, out)
			}
			git := func(args ...string) (string, error) {
				out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput()
				return string(out), err
			}
			if _, err := git("cat-file", "-e", r["fix_commit"].(string)); err == nil {
				t.Fatal("the fix commit is still in the object store")
			}
			log, _ := git("log", "--all", "--oneline")
			refs, _ := git("for-each-ref")
			head, _ := git("rev-parse", "HEAD")
			if strings.Contains(log, "Fix:") || strings.Contains(refs, "tags/") || strings.Contains(refs, "fix-leap") || strings.TrimSpace(head) != task.BaseCommit {
				t.Fatalf("history after the base remains:\nlog %s\nrefs %s\nhead %s", log, refs, head)
			}
		})
	}
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func TestParseTask(t *testing.T) {
	// A repository SWE-bench's harness does not know needs the row's own command.
	unknown := `{"instance_id":"a__b-1","repo":"a/b","base_commit":"0123456789abcdef0123456789abcdef01234567","problem_statement":"p","FAIL_TO_PASS":"[\"t.py::test_x\"]","PASS_TO_PASS":[],"test_patch":"diff --git a/t.py b/t.py\n"}`
	if _, err := ParseTask(json.RawMessage(unknown)); err == nil || !strings.Contains(err.Error(), `"a/b"`) {
		t.Fatalf("unknown repository: %v", err)
	}
	own := strings.Replace(unknown, `"PASS_TO_PASS":[]`, `"PASS_TO_PASS":[],"test_cmd":"pytest -rA t.py"`, 1)
	if task, err := ParseTask(json.RawMessage(own)); err != nil || task.TestCmd != "pytest -rA t.py" || len(task.FailToPass) != 1 {
		t.Fatalf("%+v %v", task, err)
	}
	// A row with its own test_cmd and SWE-bench's ids: a parametrized id
	// cut at its space, a unittest docstring line; and one naming its parser.
	ids := strings.Replace(own, `"FAIL_TO_PASS":"[\"t.py::test_x\"]"`, `"FAIL_TO_PASS":["tests/test_norm.py::test_norm[a","Normalises unicode."]`, 1)
	rowTask, err := ParseTask(json.RawMessage(ids))
	if err != nil {
		t.Fatal(err)
	}
	_, parse, grade, err := evalPlan(rowTask)
	if err != nil {
		t.Fatal(err)
	}
	log := "PASSED tests/test_norm.py::test_norm[a b]\ntest_norm (tests.test_text.T)\nNormalises unicode. ... ok\n"
	if resolved, f2p, _ := grade(parse(log)); !resolved || f2p != 2 {
		t.Fatalf("truncated and docstring ids graded %v (%d of 2) from %v", resolved, f2p, parse(log))
	}
	named := strings.Replace(own, `"test_cmd"`, `"log_parser":"django","test_cmd"`, 1)
	if task, err := ParseTask(json.RawMessage(named)); err != nil || task.LogParser != "django" {
		t.Fatalf("log_parser: %+v %v", task, err)
	}
	if _, err := ParseTask(json.RawMessage(strings.Replace(own, `"test_cmd"`, `"log_parser":"junit","test_cmd"`, 1))); err == nil || !strings.Contains(err.Error(), "log_parser") {
		t.Fatalf("an unknown log_parser: %v", err)
	}
	django := `{"instance_id":"django__django-1","repo":"django/django","version":"3.0","base_commit":"abcdef1","problem_statement":"p","FAIL_TO_PASS":["test_a (utils_tests.test_text.T)"],"test_patch":"diff --git a/tests/utils_tests/test_text.py b/tests/utils_tests/test_text.py\n--- a/tests/utils_tests/test_text.py\n+++ b/tests/utils_tests/test_text.py\n"}`
	task, err := ParseTask(json.RawMessage(django))
	if err != nil {
		t.Fatal(err)
	}
	script, _, _, err := evalPlan(task)
	if err != nil || !strings.Contains(script, "\n./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 utils_tests.test_text\n") || !strings.Contains(script, "conda activate testbed") {
		t.Fatalf("%v\n%s", err, script)
	}
	r2e := `{"instance_id":"r2e-1","docker_image":"namanjain12/orange3_final:abc","problem_statement":"p","expected_output_json":"{\"test_a\": \"PASSED\"}"}`
	if task, err := ParseTask(json.RawMessage(r2e)); err != nil || task.Kind != KindR2E || task.Expected["test_a"] != "PASSED" {
		t.Fatalf("%+v %v", task, err)
	}
	for _, bad := range []string{`{}`, `{"instance_id":"x y","problem_statement":"p"}`, `{"instance_id":"x","problem_statement":"p","FAIL_TO_PASS":["a"]}`,
		`{"instance_id":"x","problem_statement":"p","base_commit":"zz","FAIL_TO_PASS":["a"]}`, `{"instance_id":"x","problem_statement":"p","base_commit":"abcdef1"}`} {
		if _, err := ParseTask(json.RawMessage(bad)); err == nil {
			t.Errorf("%s: want an error", bad)
		}
	}
	if p := ImagePath("{image_dir}/sweb.eval.x86_64.{instance_id_lower}.sif", "/img", &Task{InstanceID: "Django__django-11099"}); p != "/img/sweb.eval.x86_64.django__django-11099.sif" {
		t.Fatal(p)
	}
}

func FuzzParseTask(f *testing.F) {
	f.Add(`{"instance_id":"a__b-1","base_commit":"abcdef1","problem_statement":"p","FAIL_TO_PASS":"[\"t::x\"]","test_patch":"diff --git a/t b/t\n"}`)
	f.Add(`{"instance_id":"r","docker_image":"x/y:z","problem_statement":"p","expected_output_json":{"a":"passed"}}`)
	f.Fuzz(func(t *testing.T, s string) {
		task, err := ParseTask(json.RawMessage(s))
		if err == nil && (task.InstanceID == "" || (len(task.Expected) == 0 && len(task.FailToPass) == 0)) {
			t.Fatalf("accepted %q as %+v", s, task)
		}
	})
}

// TestTestInfrastructureExcluded: the agent's conftest.py, pytest.ini,
// .pth and runner changes are dropped from its patch; the rest stays.
func TestTestInfrastructureExcluded(t *testing.T) {
	block := func(p string) string {
		return "diff --git a/" + p + " b/" + p + "\nnew file mode 100644\n--- /dev/null\n+++ b/" + p + "\n@@ -0,0 +1 @@\n+x\n"
	}
	patch := block("calc/ops.py") + block("conftest.py") + block("tests/conftest.py") + block("calc/x.pth") + block("tests/runtests.py") + block("pytest.ini") + block("calc/util.py")
	got, dropped := withoutTestInfrastructure(patch, KindSWEBench)
	if got != block("calc/ops.py")+block("calc/util.py") {
		t.Fatalf("kept:\n%s", got)
	}
	if strings.Join(dropped, ",") != "conftest.py,tests/conftest.py,calc/x.pth,tests/runtests.py,pytest.ini" {
		t.Fatalf("dropped %v", dropped)
	}
	if got, dropped := withoutTestInfrastructure(block("a.py"), KindSWEBench); got != block("a.py") || dropped != nil {
		t.Fatal("a clean patch changed")
	}
}

// TestFileDiffs: a patch with a preamble (git format-patch's mail header)
// keeps its first file.
func TestFileDiffs(t *testing.T) {
	p := "From abc\nSubject: x\n\ndiff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -1 +1 @@\n-a\n+b\ndiff --git a/u.py b/u.py\n--- a/u.py\n+++ b/u.py\n"
	head, blocks := fileDiffs(p)
	if head+strings.Join(blocks, "\n") != p || len(blocks) != 2 {
		t.Fatalf("%q %q", head, blocks)
	}
	if got := strings.Join(modifiedFiles(p), ","); got != "t.py,u.py" {
		t.Fatal(got)
	}
}
