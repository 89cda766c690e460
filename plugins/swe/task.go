package main

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/prorl/prorl/plugins/swe/sweimage"
	"github.com/prorl/prorl/plugins/swe/testlog"
	"github.com/prorl/prorl/sdk"
	"github.com/prorl/prorl/sdk/taskrow"
)

// Kinds of rows, each evaluated as its own harness evaluates it.
const (
	KindSWEBench = "swebench" // SWE-bench, SWE-Gym and rows naming their own test_cmd/eval_script
	KindR2E      = "r2e"      // R2E-Gym: the image's run_tests.sh and /r2e_tests, expected_output_json
	KindSWESmith = "swesmith" // SWE-smith: the bug is the row's patch on the image's repository
)

// Task is a SWE-bench / SWE-Gym instance, an R2E-Gym row or a SWE-smith row.
type Task struct {
	Kind       string
	InstanceID string
	Repo       string
	BaseCommit string
	Problem    string
	FailToPass []string
	PassToPass []string
	TestPatch  string
	Version    string
	TestCmd    string
	// EvalScriptText is the row's own eval script (SWE-bench 5 task
	// repositories ship one per instance); it replaces the harness's.
	EvalScriptText string
	DockerImage    string
	// Expected (R2E-Gym): the tests run and the status each must end with.
	Expected map[string]testlog.Status
	// BugPatch (SWE-smith) makes the image's repository the buggy one.
	BugPatch string
	// LogParser names the harness's parser for the row's test log
	// (testlog.Parsers); "" the repository's, else testlog.Parse.
	LogParser string
}

type rawTask struct {
	InstanceID   string          `json:"instance_id"`
	Repo         string          `json:"repo"`
	BaseCommit   string          `json:"base_commit"`
	Problem      string          `json:"problem_statement"`
	FailToPass   json.RawMessage `json:"FAIL_TO_PASS"`
	PassToPass   json.RawMessage `json:"PASS_TO_PASS"`
	TestPatch    string          `json:"test_patch"`
	Version      json.RawMessage `json:"version"`
	TestCmd      string          `json:"test_cmd"`
	EvalScript   string          `json:"eval_script"`
	DockerImage  string          `json:"docker_image"`
	LogParser    string          `json:"log_parser"`
	ExpectedJSON json.RawMessage `json:"expected_output_json"`
	// R2E-Gym rows have no instance_id.
	RepoName   string `json:"repo_name"`
	CommitHash string `json:"commit_hash"`
	// SWE-smith rows.
	ImageName string `json:"image_name"`
	Patch     string `json:"patch"`
}

var commitRe = regexp.MustCompile(`^[0-9a-f]{7,40}$`)

// ParseTask reads an instance. Datasets carry more fields; they are allowed.
func ParseTask(raw json.RawMessage) (*Task, error) {
	var r rawTask
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, sdk.InvalidTask("task", "not a JSON object of the expected shape: %v", err)
	}
	t := &Task{Kind: KindSWEBench, InstanceID: r.InstanceID, Repo: r.Repo, BaseCommit: r.BaseCommit, Problem: r.Problem, TestPatch: r.TestPatch,
		Version: taskrow.Scalar(r.Version), TestCmd: r.TestCmd, EvalScriptText: r.EvalScript, DockerImage: r.DockerImage, LogParser: r.LogParser}
	if _, ok := testlog.Parsers[t.LogParser]; t.LogParser != "" && !ok {
		return nil, sdk.InvalidTask("log_parser", "%q is not one of the harness's parsers (%s)", t.LogParser, strings.Join(slices.Sorted(maps.Keys(testlog.Parsers)), ", "))
	}
	switch {
	case len(r.ExpectedJSON) > 0 && string(r.ExpectedJSON) != "null":
		t.Kind = KindR2E
		if t.Repo == "" {
			t.Repo = r.RepoName
		}
		if t.InstanceID == "" {
			t.InstanceID = sweimage.R2EInstanceID(r.RepoName, r.CommitHash)
		}
	case r.ImageName != "" || strings.HasPrefix(r.Repo, "swesmith/"):
		t.Kind, t.BugPatch = KindSWESmith, r.Patch
		if t.DockerImage == "" {
			t.DockerImage = r.ImageName
		}
		if strings.TrimSpace(t.BugPatch) == "" {
			return nil, sdk.InvalidTask("patch", "required for a SWE-smith row: the patch that makes the bug")
		}
	}
	if t.InstanceID == "" {
		return nil, sdk.InvalidTask("instance_id", "required (an R2E-Gym row may give repo_name and commit_hash instead)")
	}
	if !idRe.MatchString(t.InstanceID) {
		return nil, sdk.InvalidTask("instance_id", "%q: only letters, digits and . _ - are allowed", t.InstanceID)
	}
	if strings.TrimSpace(t.Problem) == "" {
		return nil, sdk.InvalidTask("problem_statement", "required")
	}
	if t.BaseCommit != "" && !commitRe.MatchString(t.BaseCommit) {
		return nil, sdk.InvalidTask("base_commit", "%q is not a commit hash", t.BaseCommit)
	}
	var err error
	if t.FailToPass, err = testList(r.FailToPass, "FAIL_TO_PASS"); err != nil {
		return nil, err
	}
	if t.PassToPass, err = testList(r.PassToPass, "PASS_TO_PASS"); err != nil {
		return nil, err
	}
	if len(r.ExpectedJSON) > 0 {
		if t.Expected, err = expected(r.ExpectedJSON); err != nil {
			return nil, err
		}
	}
	switch {
	case t.Kind == KindR2E:
		if len(t.Expected) == 0 {
			return nil, sdk.InvalidTask("expected_output_json", "names no tests")
		}
		return t, nil // the image's run_tests.sh says how to test
	case t.Kind == KindSWESmith:
		if len(t.FailToPass) == 0 {
			return nil, sdk.InvalidTask("FAIL_TO_PASS", "required: the tests the fix must make pass")
		}
		return t, nil // SWE-smith's profile command, or the row's test_cmd
	case t.BaseCommit == "":
		return nil, sdk.InvalidTask("base_commit", "required")
	case len(t.FailToPass) == 0:
		return nil, sdk.InvalidTask("FAIL_TO_PASS", "required: the tests the fix must make pass")
	}
	if t.TestCmd == "" && t.EvalScriptText == "" {
		// SWE-bench and SWE-Gym rows: the harness's spec for the repository
		// and version says how to test; without one the row must say.
		if _, err := specFor(t.Repo, t.Version); err != nil {
			return nil, err
		}
	}
	return t, nil
}

var idRe = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// testList reads a list of test ids, given as a list or as a JSON string
// of one (SWE-bench ships them as strings).
func testList(raw json.RawMessage, field string) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(s)
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, sdk.InvalidTask(field, "must be a list of test ids (or a JSON string of one): %v", err)
	}
	return list, nil
}

func expected(raw json.RawMessage) (map[string]testlog.Status, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(s)
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, sdk.InvalidTask("expected_output_json", "must map test names to statuses: %v", err)
	}
	out := map[string]testlog.Status{}
	for k, v := range m {
		out[k] = testlog.Status(strings.ToUpper(v))
	}
	return out, nil
}

// testFiles are the files a test patch touches: the eval overwrites them,
// so the agent's changes to them are left out of its patch.
func testFiles(patch string) []string {
	var files []string
	for _, line := range strings.Split(patch, "\n") {
		if rest, ok := strings.CutPrefix(line, "diff --git a/"); ok {
			if i := strings.Index(rest, " b/"); i >= 0 {
				files = append(files, rest[:i])
			}
		}
	}
	return sortedSet(files)
}

// sortedSet is each of xs once, sorted.
func sortedSet(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}
