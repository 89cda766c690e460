package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/prorl/prorl/sdk"
	"github.com/prorl/prorl/sdk/tools"
)

const version = "0.1.0"

const defaultSystemPrompt = `You are an expert competitive programmer. Solve the problem in Python 3. ` +
	`You may use the python and bash tools to test your code and the str_replace_editor tool to edit files. ` +
	"When you are done, call the finish tool with your complete solution in a single ```python code block."

// Config is the [plugins.code.config] table.
type Config struct {
	SystemPrompt string `json:"system_prompt"`
	MaxTurns     int    `json:"max_turns"`
	Image        string `json:"image"`
	// TimeLimit (seconds) and MemoryMB bound each test unless the task sets its own.
	TimeLimit float64 `json:"time_limit"`
	MemoryMB  int     `json:"memory_mb"`
	// Workers is how many tests run at once in the evaluation sandbox.
	Workers int `json:"workers"`
}

// Domain is the code domain.
type Domain struct {
	cfg   Config
	tools []sdk.Tool
}

// New returns the domain with default configuration.
func New() *Domain {
	return &Domain{cfg: Config{SystemPrompt: defaultSystemPrompt, MaxTurns: 12, TimeLimit: 2, MemoryMB: 256, Workers: 2},
		tools: []sdk.Tool{tools.Python(), tools.Bash(), tools.StrReplaceEditor(), tools.Think(), tools.Finish()}}
}

func (d *Domain) Info() sdk.Info {
	return sdk.Info{
		Name:        "code",
		Version:     version,
		Description: "Programming problems judged on hidden tests in a fresh sandbox: stdin/stdout and function tests, verdicts AC/WA/TLE/MLE/RE/CE.",
		DataSources: []string{"codecontests*", "apps*", "taco*", "codeforces*", "deepcoder*", "livecodebench*", "humaneval*", "mbpp*", "code*"},
		Tools:       d.tools,
		// Evaluation runs in a fresh sandbox that Prepare asks for.
		Capabilities: []string{sdk.CapEvalSandbox},
		ConfigSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{` +
			`"system_prompt":{"type":"string"},"max_turns":{"type":"integer","minimum":1},"image":{"type":"string"},` +
			`"time_limit":{"type":"number","exclusiveMinimum":0},"memory_mb":{"type":"integer","minimum":16},"workers":{"type":"integer","minimum":1}}}`),
	}
}

func (d *Domain) Configure(_ context.Context, raw json.RawMessage, _ sdk.Host) error {
	cfg := d.cfg
	if err := sdk.DecodeConfig("code", raw, &cfg); err != nil {
		return err
	}
	switch {
	case cfg.MaxTurns < 1:
		return sdk.Errorf(sdk.CodeInvalidTask, "code config: max_turns must be at least 1")
	case cfg.TimeLimit <= 0 || cfg.TimeLimit > 60:
		return sdk.Errorf(sdk.CodeInvalidTask, "code config: time_limit must be in (0, 60]")
	case cfg.MemoryMB < 16:
		return sdk.Errorf(sdk.CodeInvalidTask, "code config: memory_mb must be at least 16")
	case cfg.Workers < 1 || cfg.Workers > 64:
		return sdk.Errorf(sdk.CodeInvalidTask, "code config: workers must be 1 to 64")
	}
	d.cfg = cfg
	return nil
}

func (d *Domain) limits(t *Task) limits {
	l := limits{time: d.cfg.TimeLimit, memMB: d.cfg.MemoryMB, workers: d.cfg.Workers}
	if t.TimeLimit > 0 {
		l.time = t.TimeLimit
	}
	if t.MemoryMB > 0 {
		l.memMB = t.MemoryMB
	}
	return l
}

func userMessage(t *Task) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(t.Prompt))
	b.WriteString("\n\n")
	switch {
	case t.Mode == ModeStdio:
		b.WriteString("Your program reads the input from standard input and writes the answer to standard output.")
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

func (d *Domain) Prepare(_ context.Context, req sdk.PrepareRequest) (*sdk.Episode, error) {
	t, err := ParseTask(req.Task)
	if err != nil {
		return nil, err
	}
	lim := d.limits(t)
	return &sdk.Episode{
		TaskID:   t.ID,
		Messages: []sdk.Message{{Role: "system", Content: d.cfg.SystemPrompt}, {Role: "user", Content: userMessage(t)}},
		Sandbox:  &sdk.SandboxSpec{Image: d.cfg.Image},
		// The tests run in a sandbox of their own, with room for every worker.
		EvalSandbox: &sdk.SandboxSpec{Image: d.cfg.Image, MaxProcesses: uint32(64 + 4*lim.workers),
			MemoryBytes: uint64(lim.memMB*lim.workers+512) << 20},
		Limits: sdk.Limits{MaxTurns: d.cfg.MaxTurns},
	}, nil
}

var codeBlockRe = regexp.MustCompile("(?s)```([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```")

// lastPythonBlock is the last ```python (or ```py, or unlabelled) block.
func lastPythonBlock(s string) (string, bool) {
	blocks := codeBlockRe.FindAllStringSubmatch(s, -1)
	for i := len(blocks) - 1; i >= 0; i-- {
		if lang := strings.ToLower(blocks[i][1]); lang == "python" || lang == "python3" || lang == "py" {
			return blocks[i][2], true
		}
	}
	for i := len(blocks) - 1; i >= 0; i-- {
		if blocks[i][1] == "" {
			return blocks[i][2], true
		}
	}
	return "", false
}

func (d *Domain) Evaluate(ctx context.Context, req sdk.EvaluateRequest) (*sdk.Score, error) {
	t, err := ParseTask(req.Task)
	if err != nil {
		return nil, err
	}
	sc := &sdk.Score{Metrics: map[string]float64{"tests_total": float64(len(t.Tests)), "tests_passed": 0, "pass_rate": 0, "format_ok": 0},
		Info: map[string]any{"mode": t.Mode}}
	solution, source := "", ""
	if t.AnswerFile != "" && req.SandboxID != "" {
		if b, err := req.Host.ReadFile(ctx, req.SandboxID, t.AnswerFile); err == nil {
			solution, source = string(b), "file"
		}
	}
	if solution == "" {
		if code, ok := lastPythonBlock(req.Response()); ok {
			solution, source = code, "code_block"
		}
	}
	if strings.TrimSpace(solution) == "" {
		sc.Info["verdict"] = "no_code"
		return sc, nil
	}
	sc.Metrics["format_ok"] = 1
	sc.Info["solution_source"] = source
	if req.EvalSandboxID == "" {
		return nil, sdk.Errorf(sdk.CodeSandboxFailed, "no evaluation sandbox: the host did not start the one Prepare asked for")
	}
	verdicts, runs, err := judge(ctx, req.Host, req.EvalSandboxID, t, solution, d.limits(t))
	if err != nil {
		var de *sdk.Error
		if errors.As(err, &de) {
			return nil, err // the task's fault (a bad expected literal)
		}
		return nil, sdk.Errorf(sdk.CodeSandboxFailed, "judge: %v", err)
	}
	passed := 0
	counts := map[string]int{}
	first := -1
	for i, v := range verdicts {
		counts[v]++
		if v == VerdictAC {
			passed++
		} else if first < 0 {
			first = i
		}
	}
	sc.Metrics["tests_passed"] = float64(passed)
	sc.Metrics["pass_rate"] = float64(passed) / float64(len(verdicts))
	sc.Info["verdicts"] = verdicts
	sc.Info["verdict_counts"] = counts
	if first >= 0 {
		ff := map[string]any{"index": first, "verdict": verdicts[first]}
		if runs != nil && runs[first] != nil && runs[first].Stderr != "" {
			ff["stderr"] = tail(runs[first].Stderr, 500)
		}
		sc.Info["first_failing"] = ff
		sc.Info["verdict"] = verdicts[first]
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
