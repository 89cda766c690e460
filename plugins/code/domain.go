package main

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/prorl/prorl/sdk"
	"github.com/prorl/prorl/sdk/taskrow"
	"github.com/prorl/prorl/sdk/tools"
)

const version = "0.1.0"

const defaultSystemPrompt = `You are an expert competitive programmer. Solve the problem in Python 3 ` +
	`(or, for problems that read standard input, in C++, Java, C or JavaScript if the problem allows). ` +
	`You may use the python and bash tools to test your code and the str_replace_editor tool to edit files. ` +
	"When you are done, call the finish tool with your complete solution in a single fenced code block labelled with its language (```python, ```cpp, ```java, ```c or ```javascript)."

// Config is the [plugins.code.config] table.
type Config struct {
	SystemPrompt string `json:"system_prompt" desc:"The system message of every episode."`
	MaxTurns     int    `json:"max_turns" schema:"min=1" desc:"Turns per episode."`
	Image        string `json:"image" desc:"The sandbox image of the agent and of the tests; empty is the host's default."`
	// TimeLimit (seconds) and MemoryMB bound each test unless the task sets
	// its own. A row's own time limit is multiplied by TimeScale (rows carry
	// limits set for C++ on a judge's machine).
	TimeLimit float64 `json:"time_limit" schema:"max=60" desc:"Seconds per test when the task sets none, in (0, 60]."`
	TimeScale float64 `json:"time_scale" schema:"max=20" desc:"Multiplies a task's own time limit, in (0, 20]."`
	MemoryMB  int     `json:"memory_mb" schema:"min=16" desc:"MiB per test when the task sets none."`
	// Languages an answer may be written in (stdin/stdout tasks; function
	// and check tasks are Python).
	Languages []string `json:"languages" desc:"Languages an answer may be in: python, cpp, c, java, javascript."`
	// Workers is how many tests run at once in the evaluation sandbox.
	Workers int `json:"workers" schema:"min=1,max=64" desc:"Tests run at once in the evaluation sandbox."`
}

type rollout = sdk.Rollout[Config, *Task, struct{}]

// New returns the code domain with its default configuration.
func New() *sdk.Env[Config, *Task, struct{}] {
	return &sdk.Env[Config, *Task, struct{}]{
		Name:        "code",
		Version:     version,
		Description: "Programming problems judged on hidden tests in a fresh sandbox: stdin/stdout and function tests, verdicts AC/WA/TLE/MLE/RE/CE.",
		DataSources: []string{"codecontests*", "apps*", "taco*", "codeforces*", "deepcoder*", "livecodebench*", "humaneval*", "mbpp*", "code*"},
		Config: Config{SystemPrompt: defaultSystemPrompt, MaxTurns: 12, TimeLimit: 6, TimeScale: 2, MemoryMB: 256, Workers: 2,
			Languages: []string{"python", "cpp", "c", "java", "javascript"}},
		Tools:     []sdk.Tool{tools.Python(), tools.Bash(), tools.StrReplaceEditor(), tools.Think(), tools.Finish()},
		Check:     checkConfig,
		ParseTask: ParseTask,
		Episode:   episode,
		Score:     score,
	}
}

// checkConfig holds what the schema cannot say: exclusive lower bounds and
// the language names.
func checkConfig(c *Config) error {
	switch {
	case c.TimeLimit <= 0:
		return fmt.Errorf("time_limit must be in (0, 60]")
	case c.TimeScale <= 0:
		return fmt.Errorf("time_scale must be in (0, 20]")
	}
	for _, l := range c.Languages {
		if _, ok := languageOf(l); !ok {
			return fmt.Errorf("languages: %q is not one of python, cpp, c, java, javascript", l)
		}
	}
	return nil
}

func limitsOf(c *Config, t *Task) limits {
	l := limits{time: c.TimeLimit, memMB: c.MemoryMB, workers: c.Workers}
	if t.TimeLimit > 0 {
		l.time = min(t.TimeLimit*c.TimeScale, 60)
	}
	if t.MemoryMB > 0 {
		l.memMB = t.MemoryMB
	}
	return l
}

func userMessage(t *Task) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(t.Prompt))
	if s := strings.TrimSpace(t.Starter); s != "" {
		b.WriteString("\n\nStarter code:\n```python\n" + s + "\n```")
	}
	b.WriteString("\n\n")
	switch {
	case t.Mode == ModeStdio:
		b.WriteString("Your program reads the input from standard input and writes the answer to standard output.")
		if t.Language != "" {
			fmt.Fprintf(&b, " Write it in %s.", languageNames[t.Language])
		}
	case t.FnName != "":
		fmt.Fprintf(&b, "Implement `%s` in Python.", t.FnName)
	default:
		b.WriteString("Implement the function the problem describes, with the name and signature it gives.")
	}
	if t.AnswerFile != "" {
		fmt.Fprintf(&b, " Write your solution to %s.", t.AnswerFile)
	}
	return b.String()
}

func episode(_ context.Context, r *rollout) (*sdk.Episode, error) {
	t, c := r.Task, r.Config
	lim := limitsOf(c, t)
	return &sdk.Episode{
		TaskID:   t.ID,
		Messages: sdk.Chat(c.SystemPrompt, userMessage(t)),
		Sandbox:  &sdk.SandboxSpec{Image: c.Image},
		// The tests run in a sandbox of their own, with room for every worker
		// (a JVM's threads and its memory beyond the heap included) and a compiler.
		EvalSandbox: &sdk.SandboxSpec{Image: c.Image, MaxProcesses: uint32(64 + 32*lim.workers),
			MemoryBytes: uint64((lim.memMB+256)*lim.workers+1024) << 20},
		Limits: sdk.Limits{MaxTurns: c.MaxTurns},
	}, nil
}

var codeBlockRe = regexp.MustCompile("(?s)```([A-Za-z0-9_+#-]*)[ \t]*\n(.*?)```")

// languageOf maps a fence label or a task's language to ours.
func languageOf(label string) (string, bool) {
	switch strings.ToLower(strings.TrimSpace(label)) {
	case "python", "python3", "py", "py3":
		return "python", true
	case "cpp", "c++", "cc", "cxx", "c++17", "c++20", "cpp17", "cpp20":
		return "cpp", true
	case "c":
		return "c", true
	case "java":
		return "java", true
	case "javascript", "js", "node", "nodejs":
		return "javascript", true
	}
	return "", false
}

var languageNames = map[string]string{"python": "Python 3", "cpp": "C++", "c": "C", "java": "Java", "javascript": "JavaScript"}

// lastCodeBlock is the answer: the last fenced block labelled with a
// language we run, else the last unlabelled block (in the task's language,
// or Python).
func lastCodeBlock(s, taskLang string) (answer, bool) {
	blocks := codeBlockRe.FindAllStringSubmatch(s, -1)
	for i := len(blocks) - 1; i >= 0; i-- {
		if lang, ok := languageOf(blocks[i][1]); ok {
			return answer{lang: lang, code: blocks[i][2]}, true
		}
	}
	for i := len(blocks) - 1; i >= 0; i-- {
		if blocks[i][1] == "" {
			return answer{lang: taskrow.First(taskLang, "python"), code: blocks[i][2]}, true
		}
	}
	return answer{}, false
}

// answerLanguage says why an answer's language cannot be judged, or "".
func answerLanguage(c *Config, t *Task, lang string) string {
	switch {
	case t.Mode != ModeStdio && lang != "python":
		return fmt.Sprintf("this task's tests call Python functions; a %s answer cannot be judged", languageNames[lang])
	case t.Language != "" && lang != t.Language:
		return fmt.Sprintf("this task asks for %s, not %s", languageNames[t.Language], languageNames[lang])
	case !slices.Contains(c.Languages, lang):
		return fmt.Sprintf("%s is not enabled (config languages)", languageNames[lang])
	}
	return ""
}

func score(ctx context.Context, r *rollout, req sdk.EvaluateRequest) (*sdk.Score, error) {
	t, c := r.Task, r.Config
	sc := &sdk.Score{Metrics: map[string]float64{"tests_total": float64(len(t.Tests)), "tests_passed": 0, "pass_rate": 0, "format_ok": 0},
		Info: map[string]any{"mode": t.Mode, "compare": t.Compare, "source": t.Source}}
	var ans answer
	source := ""
	if t.AnswerFile != "" && req.SandboxID != "" {
		if b, err := req.Sandboxes.ReadFile(ctx, req.SandboxID, t.AnswerFile); err == nil && strings.TrimSpace(string(b)) != "" {
			lang := taskrow.First(t.Language, "python")
			if l, ok := languageOf(strings.TrimPrefix(path.Ext(t.AnswerFile), ".")); ok {
				lang = l
			}
			ans, source = answer{lang: lang, code: string(b)}, "file"
		}
	}
	if source == "" {
		if a, ok := lastCodeBlock(req.Response(), t.Language); ok {
			ans, source = a, "code_block"
		}
	}
	if strings.TrimSpace(ans.code) == "" {
		sc.Info["verdict"] = "no_code"
		return sc, nil
	}
	sc.Metrics["format_ok"] = 1
	sc.Info["solution_source"] = source
	sc.Info["language"] = ans.lang
	if why := answerLanguage(c, t, ans.lang); why != "" {
		sc.Info["verdict"] = VerdictCE
		sc.Info["compile_error"] = why
		return sc, nil
	}
	if req.EvalSandboxID == "" {
		return nil, sdk.Errorf(sdk.CodeSandboxFailed, "no evaluation sandbox: the host did not start the one Prepare asked for")
	}
	lim := limitsOf(c, t)
	sc.Info["time_limit"] = lim.time
	j, err := judge(ctx, req.Sandboxes, req.EvalSandboxID, t, ans, lim)
	if err != nil {
		var de *sdk.Error
		if errors.As(err, &de) {
			return nil, err // the task's fault (a checker that does not compile)
		}
		return nil, sdk.Errorf(sdk.CodeSandboxFailed, "judge: %v", err)
	}
	passed := 0
	counts := map[string]int{}
	first := -1
	for i, v := range j.verdicts {
		counts[v]++
		if v == VerdictAC {
			passed++
		} else if first < 0 {
			first = i
		}
	}
	sc.Metrics["tests_passed"] = float64(passed)
	sc.Metrics["pass_rate"] = float64(passed) / float64(len(j.verdicts))
	sc.Info["verdicts"] = j.verdicts
	sc.Info["verdict_counts"] = counts
	if j.compileError != "" {
		sc.Info["compile_error"] = tail(j.compileError, 2000)
	}
	if t.Checker != nil {
		sc.Info["checker"] = t.Checker.Language
		sc.Metrics["checker_failures"] = float64(j.checkerFailures)
	}
	if first >= 0 {
		ff := map[string]any{"index": first, "verdict": j.verdicts[first]}
		if t.Tests[first].Name != "" {
			ff["test"] = t.Tests[first].Name
		}
		if j.runs != nil && j.runs[first] != nil {
			r := j.runs[first]
			if r.Check != nil && r.Check.Error != "" {
				ff["error"] = tail(r.Check.Error, 500)
				if len(r.Check.Failed) > 0 {
					ff["failed"] = r.Check.Failed
				}
			}
			if r.Stderr != "" {
				ff["stderr"] = tail(r.Stderr, 500)
			}
		}
		sc.Info["first_failing"] = ff
		sc.Info["verdict"] = j.verdicts[first]
	} else {
		sc.Info["verdict"] = VerdictAC
		sc.Reward, sc.Resolved = 1, true
	}
	return sc, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
