package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/prorl/prorl/plugins/swe/sweimage"
	"github.com/prorl/prorl/plugins/swe/testlog"
	"github.com/prorl/prorl/sdk"
	"github.com/prorl/prorl/sdk/tools"
)

const version = "0.1.0"

// RepoPath is where the images keep the repository, and where the agent
// and the tests find it: each sandbox gets its own writable copy in place
// (sdk.SandboxSpec.Writable), so the image's editable install and its test
// env see the agent's changes.
const RepoPath = "/testbed"

const defaultSystemPrompt = `You are a software engineer working in a repository. You can run shell commands with the bash tool ` +
	`(each call has a time limit; long outputs are truncated) and view and edit files with the str_replace_editor tool. ` +
	`Reproduce the problem, make the smallest change to the source that fixes it, check it, and call finish. ` +
	`Do not modify the tests.`

const defaultInstancePrompt = `<uploaded_files>
{repo_path}
</uploaded_files>
The repository {repo} is checked out at {repo_path}. Consider the following issue:

<issue_description>
{problem_statement}
</issue_description>

Make the changes to non-test files in {repo_path} so that the issue is resolved. When you are done, call finish.`

// Config is the [plugins.swe.config] table.
type Config struct {
	SystemPrompt   string `json:"system_prompt" desc:"The system message of every episode."`
	InstancePrompt string `json:"instance_prompt" desc:"The user message: {repo_path}, {repo}, {problem_statement} and {instance_id} are replaced."`
	MaxTurns       int    `json:"max_turns" schema:"min=1" desc:"Turns per episode."`
	// ImageDir and ImageTemplate locate an instance's image:
	// {image_dir}, {instance_id}, {instance_id_lower} and {docker_image}
	// are replaced. The default fits `make swe-fixtures` and bwrap; for
	// Apptainer use e.g. "{image_dir}/sweb.eval.x86_64.{instance_id}.sif".
	ImageDir      string `json:"image_dir" desc:"The directory of the instances' images."`
	ImageTemplate string `json:"image_template" desc:"An instance's image: {image_dir}, {instance_id}, {instance_id_lower} and {docker_image} are replaced."`
	// EvalTimeout bounds the test run (default 20 minutes).
	EvalTimeout string `json:"eval_timeout" desc:"How long the tests may run, as a Go duration (20m)."`
	evalTimeout time.Duration
}

type rollout = sdk.Rollout[Config, *Task, struct{}]

// New returns the SWE domain with its default configuration.
func New() *sdk.Env[Config, *Task, struct{}] {
	return &sdk.Env[Config, *Task, struct{}]{
		Name:        "swe",
		Version:     version,
		Description: "Software engineering: SWE-bench style instances in per-instance images, resolved by their own tests.",
		DataSources: []string{"swe*", "SWE*", "r2e*", "R2E*"},
		Config: Config{SystemPrompt: defaultSystemPrompt, InstancePrompt: defaultInstancePrompt, MaxTurns: 50,
			ImageTemplate: sweimage.DefaultTemplate, EvalTimeout: "20m", evalTimeout: 20 * time.Minute},
		Tools:        []sdk.Tool{tools.Bash(), tools.StrReplaceEditor(), tools.Finish()},
		Check:        checkConfig,
		ParseTask:    ParseTask,
		Episode:      episode,
		SetupSandbox: setup,
		Score:        score,
		Commands:     []sdk.Command{imagesCommand},
	}
}

func checkConfig(c *Config) error {
	et, err := time.ParseDuration(c.EvalTimeout)
	if err != nil || et <= 0 {
		return fmt.Errorf("eval_timeout %q is not a positive duration", c.EvalTimeout)
	}
	if !strings.Contains(c.ImageTemplate, "{instance_id") && !strings.Contains(c.ImageTemplate, "{docker_image}") {
		return fmt.Errorf("image_template must name the instance ({instance_id} or {docker_image})")
	}
	c.evalTimeout = et
	return nil
}

// ImagePath is where an instance's image is expected.
func ImagePath(template, imageDir string, t *Task) string {
	return sweimage.Path(template, imageDir, t.InstanceID, t.DockerImage)
}

func imageOf(c *Config, t *Task) (string, error) {
	p := ImagePath(c.ImageTemplate, c.ImageDir, t)
	if _, err := os.Stat(p); err != nil {
		return "", sdk.InvalidTask("instance_id", "no image for %s at %s (image_template %q)", t.InstanceID, p, c.ImageTemplate)
	}
	return p, nil
}

func episode(_ context.Context, r *rollout) (*sdk.Episode, error) {
	t, c := r.Task, r.Config
	img, err := imageOf(c, t)
	if err != nil {
		return nil, err
	}
	user := strings.NewReplacer("{repo_path}", RepoPath, "{repo}", t.Repo, "{problem_statement}", t.Problem,
		"{instance_id}", t.InstanceID).Replace(c.InstancePrompt)
	spec := sdk.SandboxSpec{Image: img, MaxProcesses: 512, MemoryBytes: 4 << 30, DiskBytes: 4 << 30, Writable: []string{RepoPath}}
	agent := spec
	if t.Kind == KindR2E {
		// The held-out tests are emptied in the agent's copy (Setup).
		agent.Writable = []string{RepoPath, r2eTests}
	}
	return &sdk.Episode{
		TaskID:      t.InstanceID,
		Messages:    sdk.Chat(c.SystemPrompt, user),
		Sandbox:     &agent,
		EvalSandbox: &spec,
		Limits:      sdk.Limits{MaxTurns: c.MaxTurns},
	}, nil
}

// Setup makes the history after base_commit unreachable: no later commit, tag, branch,
// remote, reflog or packed object the fix could be read from.
func setup(ctx context.Context, r *rollout) error {
	t := r.Task
	if err := writeBugPatch(ctx, r.Sandboxes, r.SandboxID, t); err != nil {
		return err
	}
	res, err := r.Sandboxes.Exec(ctx, r.SandboxID, sdk.ExecRequest{Argv: []string{"bash", "-c", setupScript(t)}, Env: gitEnv(t, t.BaseCommit), Timeout: 600_000})
	if err != nil {
		return sdk.Errorf(sdk.CodeSandboxFailed, "prepare the repository: %v", err)
	}
	if res.ExitCode != 0 {
		return sdk.Errorf(sdk.CodeSandboxFailed, "prepare the repository (exit %d): %s", res.ExitCode, tail(string(res.Stdout)+string(res.Stderr), 800))
	}
	// The agent's shell starts in the repository.
	if _, err := r.Sandboxes.Exec(ctx, r.SandboxID, sdk.ExecRequest{Session: true, Command: "cd " + RepoPath + " && export GIT_CONFIG_GLOBAL=/work/.gitconfig"}); err != nil {
		return sdk.Errorf(sdk.CodeSandboxFailed, "start the shell: %v", err)
	}
	return nil
}

func gitEnv(t *Task, base string) map[string]string {
	return map[string]string{"BASE": base, "REPO": RepoPath, "GIT_CONFIG_GLOBAL": "/work/.gitconfig"}
}

// r2eTests is where R2E-Gym images keep the held-out tests.
const r2eTests = "/r2e_tests"

// writeBugPatch puts a SWE-smith row's bug where prepareScript applies it.
func writeBugPatch(ctx context.Context, h sdk.Sandboxes, sb string, t *Task) error {
	if t.BugPatch == "" {
		return nil
	}
	if err := h.WriteFile(ctx, sb, "/work/bug.patch", []byte(t.BugPatch), 0o644); err != nil {
		return sdk.Errorf(sdk.CodeSandboxFailed, "write the bug patch: %v", err)
	}
	return nil
}

// setupScript is what runs in the agent's sandbox before the agent starts.
func setupScript(t *Task) string {
	s := prepareScript + hideHistory
	if t.Kind == KindR2E {
		s += hideR2ETests
	}
	return s
}

// prepareScript puts the repository in the state the task starts from, the
// same in the agent's sandbox and the evaluation's: base_commit checked out
// (nothing cleaned: the images' editable installs keep built files in the
// tree) and, for SWE-smith, the bug applied and committed with fixed
// names and dates, so that both sandboxes make the same commit. It prints
// that commit. Every script starts in $REPO or fails: run anywhere else,
// git would rewrite whatever repository it found.
const prepareScript = `set -euo pipefail
cd "${REPO:?}"
git config --global --add safe.directory '*'
git config --global user.email agent@prorl.invalid
git config --global user.name agent
[ -z "$BASE" ] || git checkout -q -f "$BASE"
if [ -s /work/bug.patch ]; then
  git update-index -q --refresh >/dev/null || true # the copy's stat data are new
  git apply --index /work/bug.patch
  GIT_AUTHOR_NAME=prorl GIT_AUTHOR_EMAIL=task@prorl.invalid GIT_COMMITTER_NAME=prorl GIT_COMMITTER_EMAIL=task@prorl.invalid \
  GIT_AUTHOR_DATE=2000-01-01T00:00:00Z GIT_COMMITTER_DATE=2000-01-01T00:00:00Z git commit -q --no-verify -m task
  rm -f /work/bug.patch
fi
git rev-parse HEAD
`

// hideHistory follows prepareScript in the agent's sandbox: everything
// after the starting commit becomes unreachable.
const hideHistory = `cd "${REPO:?}"
BASE=$(git rev-parse HEAD)
git checkout -q -f --detach "$BASE"
git for-each-ref --format='%(refname)' | while read -r ref; do git update-ref -d "$ref"; done
for r in $(git remote); do git remote remove "$r"; done
git checkout -q -b main
git reflog expire --expire=now --all
git gc -q --prune=now
rm -f .git/ORIG_HEAD .git/FETCH_HEAD
all=$(git rev-list --all | wc -l)
mine=$(git rev-list HEAD | wc -l)
if [ "$all" != "$mine" ]; then echo "history beyond base_commit is still reachable" >&2; exit 1; fi
`

// hideR2ETests removes what R2E-Gym hides from the agent (its
// SKIP_FILES_NEW and the held-out tests), from the agent's copies only.
const hideR2ETests = `rm -rf "${REPO:?}/run_tests.sh" "$REPO/r2e_tests"
find ` + r2eTests + ` -mindepth 1 -delete
`

// diffScript writes the agent's changes against base_commit, without the
// test files the eval overwrites and without binary files.
const diffScript = `set -euo pipefail
cd "${REPO:?}"
git add -A
excludes=()
while IFS= read -r f; do [ -n "$f" ] && excludes+=(":(exclude)$f"); done <<< "$TEST_FILES"
while IFS=$'\t' read -r a b f; do [ "$a" = "-" ] && excludes+=(":(exclude)$f"); done < <(git diff --cached --numstat "$BASE")
git diff --cached --no-color "$BASE" -- . "${excludes[@]}"
`

// evalScript, in a fresh sandbox after prepareScript, applies the agent's
// patch the way SWE-bench's harness does (git apply, then git apply
// --reject, then patch --fuzz=5, the first that succeeds) and runs
// /work/eval.sh, the harness's eval script for the instance; the log
// (stdout and stderr, as the harness captures them) goes to /work/test.log.
const evalScript = `set -uo pipefail
cd "${REPO:?}" || exit 90
if git apply --verbose /work/agent.patch > /work/apply.log 2>&1; then echo "applied: git apply --verbose"
elif git apply --verbose --reject /work/agent.patch >> /work/apply.log 2>&1; then echo "applied: git apply --verbose --reject"
elif patch --batch --fuzz=5 -p1 -i /work/agent.patch >> /work/apply.log 2>&1; then echo "applied: patch --batch --fuzz=5 -p1 -i"
else echo "apply failed"; exit 91; fi
bash /work/eval.sh > /work/test.log 2>&1
echo "tests exited $?"
`

// rowEvalScript is the eval script of a row that names its own test
// command: the harness's steps (the env activated when the image has one,
// test files reset to base_commit, the test patch applied, the command run
// between the output markers), with the row's command.
func rowEvalScript(t *Task, dir string) string {
	reset := "git checkout " + t.BaseCommit + " " + strings.Join(modifiedFiles(t.TestPatch), " ")
	lines := []string{"#!/bin/bash", "set -uxo pipefail",
		"if [ -f /opt/miniconda3/bin/activate ]; then source /opt/miniconda3/bin/activate && conda activate " + envName + "; fi",
		"cd " + dir}
	if t.TestPatch != "" {
		if t.BaseCommit != "" {
			lines = append(lines, reset)
		}
		lines = append(lines, "git apply -v - <<'"+heredoc+"'\n"+t.TestPatch+"\n"+heredoc)
	}
	return scriptText(append(lines, markedRun(t.TestCmd)...))
}

// parserFor is the harness's parser the row names, else the one of a
// repository it knows, else one that reads pytest, unittest and Django
// logs under their full ids and SWE-bench's (testlog.Parse). Colour is
// stripped first either way.
func parserFor(repo, named string) testlog.Parser {
	p := testlog.Parse
	if r, ok := specs.Repos[repo]; ok {
		p = testlog.Parsers[r.Parser]
	}
	if named != "" {
		p = testlog.Parsers[named]
	}
	return func(log string) map[string]testlog.Status { return p(testlog.StripANSI(log)) }
}

func score(ctx context.Context, r *rollout, req sdk.EvaluateRequest) (*sdk.Score, error) {
	t, c := r.Task, r.Config
	script, parse, grade, err := evalPlan(t)
	if err != nil {
		return nil, err
	}
	sc := &sdk.Score{Metrics: map[string]float64{"resolved": 0, "patch_applied": 0, "fail_to_pass_total": float64(len(t.FailToPass)),
		"fail_to_pass_passed": 0, "pass_to_pass_total": float64(len(t.PassToPass)), "pass_to_pass_passed": 0},
		Info: map[string]any{"instance_id": t.InstanceID, "kind": t.Kind}}
	h, sb := req.Sandboxes, req.EvalSandboxID
	// Without base_commit, or with a SWE-smith bug committed on it, the
	// commit the agent started from is read from a fresh sandbox, which
	// the agent never touched.
	base, prepared := t.BaseCommit, false
	if req.SandboxID != "" && (base == "" || t.BugPatch != "") {
		if base, err = prepareEval(ctx, c, h, sb, t); err != nil {
			return nil, err
		}
		prepared = true
	}
	patch := ""
	if req.SandboxID != "" {
		env := gitEnv(t, base)
		env["TEST_FILES"] = strings.Join(evalTestFiles(t), "\n")
		res, err := h.Exec(ctx, req.SandboxID, sdk.ExecRequest{Argv: []string{"bash", "-c", diffScript}, Env: env, Timeout: 120_000})
		if err != nil {
			return nil, sdk.Errorf(sdk.CodeSandboxFailed, "read the agent's changes: %v", err)
		}
		if res.ExitCode != 0 {
			return nil, sdk.Errorf(sdk.CodeSandboxFailed, "read the agent's changes (exit %d): %s", res.ExitCode, tail(string(res.Stderr), 500))
		}
		patch = string(res.Stdout)
	} else if r := req.Response(); strings.Contains(r, "diff --git ") {
		patch = r[strings.Index(r, "diff --git "):] // /v1/evaluate: the response is the patch
	}
	patch, excluded := withoutTestInfrastructure(patch, t.Kind)
	if len(excluded) > 0 {
		sc.Info["excluded_from_patch"] = excluded
	}
	sc.Info["git_patch"] = patch
	if strings.TrimSpace(patch) == "" {
		sc.Info["verdict"] = "empty_patch" // unresolved without running anything
		return sc, nil
	}
	if !prepared {
		if base, err = prepareEval(ctx, c, h, sb, t); err != nil {
			return nil, err
		}
	}
	if err := h.WriteFile(ctx, sb, "/work/agent.patch", []byte(patch), 0o644); err != nil {
		return nil, sdk.Errorf(sdk.CodeSandboxFailed, "write the patch: %v", err)
	}
	if err := h.WriteFile(ctx, sb, "/work/eval.sh", []byte(script), 0o644); err != nil {
		return nil, sdk.Errorf(sdk.CodeSandboxFailed, "write the eval script: %v", err)
	}
	start := time.Now()
	res, err := h.Exec(ctx, sb, sdk.ExecRequest{Argv: []string{"bash", "-c", evalScript}, Env: gitEnv(t, base), Timeout: uint32(c.evalTimeout.Milliseconds())})
	if err != nil {
		return nil, sdk.Errorf(sdk.CodeSandboxFailed, "run the tests: %v", err)
	}
	sc.Metrics["eval_seconds"] = time.Since(start).Seconds()
	out := strings.TrimSpace(string(res.Stdout))
	sc.Info["eval"] = out
	switch {
	case res.TimedOut:
		return nil, sdk.Errorf(sdk.CodeEvalFailed, "the tests did not finish within eval_timeout (%v)", c.evalTimeout)
	case res.ExitCode == 91:
		sc.Info["verdict"] = "patch_failed"
		if log, err := h.ReadFile(ctx, sb, "/work/apply.log"); err == nil {
			sc.Info["apply_log"] = tail(string(log), 2000)
		}
		return sc, nil
	case res.ExitCode != 0:
		return nil, sdk.Errorf(sdk.CodeSandboxFailed, "evaluation setup failed (exit %d): %s %s", res.ExitCode, out, tail(string(res.Stderr), 500))
	}
	sc.Metrics["patch_applied"] = 1
	log, err := h.ReadFile(ctx, sb, "/work/test.log")
	if err != nil {
		return nil, sdk.Errorf(sdk.CodeSandboxFailed, "read the test log: %v", err)
	}
	statuses, ok := testOutput(string(log), parse)
	switch {
	case !ok:
		return nil, sdk.Errorf(sdk.CodeEvalFailed, "the eval script never reached the tests (no %q/%q markers in its log): %s", specs.StartMarker, specs.EndMarker, tail(string(log), 1500))
	case len(statuses) == 0:
		return nil, sdk.Errorf(sdk.CodeEvalFailed, "the test run reported no results (a collection error, a missing env or runner): %s", tail(string(log), 1500))
	}
	resolved, f2p, p2p := grade(statuses)
	perTest := map[string]string{}
	ids := append(append([]string{}, t.FailToPass...), t.PassToPass...)
	for id := range t.Expected {
		ids = append(ids, id)
	}
	for _, id := range ids {
		st := statuses[id]
		if st == "" {
			st = "MISSING"
		}
		perTest[id] = string(st)
	}
	sc.Info["tests"] = perTest
	sc.Info["test_log_tail"] = tail(string(log), 3000)
	sc.Metrics["fail_to_pass_passed"], sc.Metrics["pass_to_pass_passed"] = float64(f2p), float64(p2p)
	if resolved {
		sc.Reward, sc.Resolved = 1, true
		sc.Metrics["resolved"] = 1
		sc.Info["verdict"] = "resolved"
	} else {
		sc.Info["verdict"] = "unresolved"
	}
	return sc, nil
}

// prepareEval runs prepareScript in the evaluation's sandbox and returns the
// commit the task starts from.
func prepareEval(ctx context.Context, c *Config, h sdk.Sandboxes, sb string, t *Task) (string, error) {
	if sb == "" {
		return "", sdk.Errorf(sdk.CodeSandboxFailed, "no evaluation sandbox: the host did not start the one Prepare asked for")
	}
	if _, err := imageOf(c, t); err != nil {
		return "", err
	}
	if err := writeBugPatch(ctx, h, sb, t); err != nil {
		return "", err
	}
	res, err := h.Exec(ctx, sb, sdk.ExecRequest{Argv: []string{"bash", "-c", prepareScript}, Env: gitEnv(t, t.BaseCommit), Timeout: 600_000})
	if err != nil {
		return "", sdk.Errorf(sdk.CodeSandboxFailed, "prepare the repository for the tests: %v", err)
	}
	if res.ExitCode != 0 {
		return "", sdk.Errorf(sdk.CodeSandboxFailed, "prepare the repository for the tests (exit %d): %s", res.ExitCode, tail(string(res.Stdout)+string(res.Stderr), 800))
	}
	head := strings.TrimSpace(string(res.Stdout))
	if !commitRe.MatchString(head) {
		return "", sdk.Errorf(sdk.CodeSandboxFailed, "prepare the repository for the tests: %q is not a commit", tail(head, 200))
	}
	return head, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
