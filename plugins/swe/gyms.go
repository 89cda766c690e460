package main

import (
	"path"
	"strings"

	"github.com/prorl/prorl/plugins/swe/testlog"
)

// R2E-Gym and SWE-smith rows, evaluated as their harnesses do (their
// sources: r2egym/agenthub/runtime/docker.py, swesmith/harness/utils.py and
// swesmith/profiles/python.py).

// r2eEvalScript runs the image's run_tests.sh from the repository with the
// held-out tests linked in, as R2E-Gym's run_tests does.
func r2eEvalScript() string {
	return scriptText(append([]string{"#!/bin/bash", "set -uxo pipefail", "cd " + RepoPath,
		"rm -rf r2e_tests && ln -s " + r2eTests + " r2e_tests"}, markedRun("bash run_tests.sh")...))
}

// swesmithTestCmd is SWE-smith's PythonProfile.test_cmd; a row's test_cmd
// replaces it (profiles that override it are not embedded).
const swesmithTestCmd = "pytest --disable-warnings --color=no --tb=no --verbose"

// swesmithEvalScript is the eval script of SWE-smith's run_patch_in_container
// (with the test files reset first):
// for a pytest command, the files of the FAIL_TO_PASS tests are appended
// (SWE-smith lists them from a set; sorted here).
func swesmithEvalScript(t *Task) string {
	cmd := swesmithTestCmd
	if t.TestCmd != "" {
		cmd = t.TestCmd
	}
	if strings.Contains(cmd, "pytest") {
		cmd += " " + strings.Join(idFiles(t.FailToPass), " ")
	}
	lines := []string{"#!/bin/bash", "set -uxo pipefail", "source /opt/miniconda3/bin/activate", "conda activate " + envName, "cd " + RepoPath}
	if files := evalTestFiles(t); len(files) > 0 {
		// Not in SWE-smith's script: the test files are the task's, whatever
		// the patch did to them (R2E-Gym's runner of SWE-smith resets them too).
		lines = append(lines, `git checkout "$BASE" -- `+strings.Join(files, " "))
	}
	return scriptText(append(lines, markedRun(cmd)...))
}

// idFiles are the files of pytest node ids, each once, sorted.
func idFiles(ids []string) []string {
	files := make([]string, len(ids))
	for i, id := range ids {
		files[i], _, _ = strings.Cut(id, "::")
	}
	return sortedSet(files)
}

// evalTestFiles are the files the evaluation takes from the task, not from
// the agent: its changes to them are left out of its patch. SWE-bench
// resets the files its test patch touches; R2E-Gym's tests live outside
// the repository; SWE-smith's harness (as R2E-Gym runs it) resets the test
// files of FAIL_TO_PASS and PASS_TO_PASS.
func evalTestFiles(t *Task) []string {
	switch t.Kind {
	case KindSWESmith:
		var out []string
		for _, f := range idFiles(append(append([]string{}, t.FailToPass...), t.PassToPass...)) {
			base := path.Base(f)
			if strings.HasPrefix(base, "test_") && strings.HasSuffix(base, ".py") || strings.HasSuffix(base, "_test.py") {
				out = append(out, f)
			}
		}
		return out
	case KindR2E:
		return nil
	}
	return testFiles(t.TestPatch)
}

// kindInfrastructure is test infrastructure of one kind of row: R2E-Gym's
// runner and tests, which the evaluation takes from the image.
func kindInfrastructure(kind, p string) bool {
	return kind == KindR2E && (p == "run_tests.sh" || p == "r2e_tests" || strings.HasPrefix(p, "r2e_tests/"))
}

// grader decides resolved from the statuses.
type grader func(st map[string]testlog.Status) (resolved bool, f2p, p2p int)

// evalPlan is what Evaluate runs, how it reads the log and how it grades:
// the row's own eval_script when it has one, else its kind's.
func evalPlan(t *Task) (script string, parse testlog.Parser, grade grader, err error) {
	grade = func(st map[string]testlog.Status) (bool, int, int) {
		return testlog.Grade(st, t.FailToPass, t.PassToPass)
	}
	switch t.Kind {
	case KindR2E:
		// R2E-Gym strips colour and carriage returns from the output first.
		parse = func(log string) map[string]testlog.Status {
			return testlog.ParseR2E(strings.ReplaceAll(testlog.StripANSI(log), "\r", ""))
		}
		grade = func(st map[string]testlog.Status) (bool, int, int) { return testlog.GradeR2E(st, t.Expected), 0, 0 }
		script = r2eEvalScript()
	case KindSWESmith:
		parse = func(log string) map[string]testlog.Status { return testlog.ParseSWESmith(testlog.StripANSI(log)) }
		script = swesmithEvalScript(t)
	default:
		parse = parserFor(t.Repo, t.LogParser)
		switch {
		case t.EvalScriptText != "": // the row's own, below; no spec needed
		case t.TestCmd != "":
			script = rowEvalScript(t, RepoPath)
		default:
			script, err = EvalScript(t.Repo, t.Version, t.BaseCommit, t.TestPatch, RepoPath)
		}
	}
	if t.EvalScriptText != "" {
		script = t.EvalScriptText
	}
	return script, parse, grade, err
}
