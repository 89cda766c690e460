package main

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"

	"github.com/prorl/prorl/plugins/swe/testlog"
	"github.com/prorl/prorl/sdk"
	"github.com/prorl/prorl/sdk/taskrow"
)

// Task is a SWE-bench / SWE-Gym instance or an R2E-Gym row.
type Task struct {
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
	// Expected (R2E-Gym): every listed test must end with its status.
	Expected map[string]testlog.Status
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
	ExpectedJSON json.RawMessage `json:"expected_output_json"`
}

var commitRe = regexp.MustCompile(`^[0-9a-f]{7,40}$`)

// ParseTask reads an instance. Datasets carry more fields; they are allowed.
func ParseTask(raw json.RawMessage) (*Task, error) {
	var r rawTask
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, sdk.InvalidTask("task", "not a JSON object of the expected shape: %v", err)
	}
	t := &Task{InstanceID: r.InstanceID, Repo: r.Repo, BaseCommit: r.BaseCommit, Problem: r.Problem, TestPatch: r.TestPatch,
		Version: taskrow.Scalar(r.Version), TestCmd: r.TestCmd, EvalScriptText: r.EvalScript, DockerImage: r.DockerImage}
	if t.InstanceID == "" {
		return nil, sdk.InvalidTask("instance_id", "required")
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
	case len(t.Expected) > 0: // R2E-Gym: the image's run_tests.sh
		if t.TestCmd == "" {
			t.TestCmd = "bash run_tests.sh"
		}
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
	seen := map[string]bool{}
	for _, line := range strings.Split(patch, "\n") {
		if rest, ok := strings.CutPrefix(line, "diff --git a/"); ok {
			if i := strings.Index(rest, " b/"); i >= 0 {
				seen[rest[:i]] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for f := range seen {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}
