package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/prorl/prorl/sdk"
	"github.com/prorl/prorl/sdk/mathans"
	"github.com/prorl/prorl/sdk/taskrow"
	"github.com/prorl/prorl/sdk/tools"
)

const version = "0.1.0"

const defaultSystemPrompt = `You are a careful mathematician. Solve the problem step by step. ` +
	`You may use the think tool to reason and the python tool to compute. When you are done, call the finish tool with your final answer ` +
	`written as \boxed{answer} in the message.`

// Config is the [plugins.math.config] table.
type Config struct {
	SystemPrompt string `json:"system_prompt"`
	MaxTurns     int    `json:"max_turns"`
	// Python offers the python tool (a sandbox, started only if the model calls it).
	Python *bool `json:"python"`
	// Image is the sandbox image for python; empty means the host's default.
	Image string `json:"image"`
}

func (c Config) python() bool { return c.Python == nil || *c.Python }

// Domain is the math domain.
type Domain struct {
	cfg   Config
	tools []sdk.Tool
}

// New returns the domain with default configuration.
func New() *Domain {
	return &Domain{cfg: Config{SystemPrompt: defaultSystemPrompt, MaxTurns: 8}, tools: []sdk.Tool{tools.Think(), tools.Python(), tools.Finish()}}
}

func (d *Domain) Info() sdk.Info {
	return sdk.Info{
		Name:        "math",
		Version:     version,
		Description: "Competition math: answer in \\boxed{}, scored by symbolic/numeric equivalence.",
		DataSources: []string{"math", "deepscaler", "gsm8k", "aime*", "math500", "dapo*", "numina*"},
		Tools:       d.tools,
		ConfigSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{` +
			`"system_prompt":{"type":"string"},"max_turns":{"type":"integer","minimum":1},"python":{"type":"boolean"},"image":{"type":"string"}}}`),
	}
}

func (d *Domain) Configure(_ context.Context, raw json.RawMessage, _ sdk.Sandboxes) error {
	cfg := d.cfg
	if err := sdk.DecodeConfig("math", raw, &cfg); err != nil {
		return err
	}
	if cfg.MaxTurns < 1 {
		return sdk.Errorf(sdk.CodeInvalidConfig, "math config: max_turns must be at least 1")
	}
	d.cfg = cfg
	return nil
}

// Task is a math problem in either accepted shape: plain {question, answer}
// or a ProRL/verl row {data_source, prompt, reward_model.ground_truth}.
type Task struct {
	ID       string
	Question string
	Answer   string
}

type rawTask struct {
	ID           string          `json:"id"`
	InstanceID   json.RawMessage `json:"instance_id"`
	QuestionText string          `json:"question"`
	Problem      string          `json:"problem"`
	Answer       json.RawMessage `json:"answer"`
	taskrow.Verl
}

// ParseTask reads a task payload; unknown extra fields (domain, data_source,
// extra_info...) are allowed because datasets carry many.
func ParseTask(raw json.RawMessage) (*Task, error) {
	var r rawTask
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, sdk.InvalidTask("task", "not a JSON object: %v", err)
	}
	t := &Task{ID: taskrow.First(r.ID, taskrow.Scalar(r.InstanceID))}
	q, err := r.Question(r.QuestionText, r.Problem)
	if err != nil {
		return nil, err
	}
	t.Question = q
	if strings.TrimSpace(t.Question) == "" {
		return nil, sdk.InvalidTask("question", "missing: give question, problem or prompt")
	}
	t.Answer = taskrow.First(taskrow.Scalar(r.Answer), taskrow.Scalar(r.GroundTruth()))
	if strings.TrimSpace(t.Answer) == "" {
		return nil, sdk.InvalidTask("answer", "missing: give answer or reward_model.ground_truth")
	}
	return t, nil
}

func (d *Domain) Prepare(_ context.Context, req sdk.PrepareRequest) (*sdk.Episode, error) {
	t, err := ParseTask(req.Task)
	if err != nil {
		return nil, err
	}
	return tools.AnswerEpisode(t.ID, d.cfg.SystemPrompt, t.Question, d.cfg.MaxTurns, d.cfg.python(), d.cfg.Image), nil
}

func (d *Domain) Evaluate(ctx context.Context, req sdk.EvaluateRequest) (*sdk.Score, error) {
	t, err := ParseTask(req.Task)
	if err != nil {
		return nil, err
	}
	ans, method := mathans.Extract(req.Response())
	correct, budgetOut := false, false
	if method != mathans.MethodNone {
		correct, err = mathans.EquivalentContext(ctx, ans, t.Answer)
		switch {
		case errors.Is(err, mathans.ErrBudget):
			// Undecidable within the budget: not equal, and said so.
			budgetOut = true
		case err != nil:
			// The eval deadline or the caller ended: stop, score nothing.
			return nil, fmt.Errorf("math: evaluate: %w", err)
		}
	}
	sc := &sdk.Score{
		Metrics: map[string]float64{"format_ok": sdk.Flag(method != mathans.MethodNone), "correct": sdk.Flag(correct)},
		Info:    map[string]any{"extracted_answer": ans, "extraction": method, "ground_truth": t.Answer},
	}
	if budgetOut {
		sc.Info["grader_budget_exceeded"] = true
	}
	if correct {
		sc.Reward, sc.Resolved = 1, true
	}
	return sc, nil
}
