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
	SystemPrompt string `json:"system_prompt" desc:"The system message of every episode."`
	MaxTurns     int    `json:"max_turns" schema:"min=1" desc:"Turns per episode."`
	Python       *bool  `json:"python" desc:"Offer the python tool (a sandbox, started only if the model calls it); default true."`
	Image        string `json:"image" desc:"The sandbox image for python; empty is the host's default."`
}

func (c Config) python() bool { return c.Python == nil || *c.Python }

type rollout = sdk.Rollout[Config, *Task, struct{}]

// Domain is the math domain: a problem in, an answer in \boxed{} out,
// scored by equivalence with the reference answer (sdk/mathans).
var Domain = &sdk.Env[Config, *Task, struct{}]{
	Name:          "math",
	Version:       version,
	Description:   "Competition math: answer in \\boxed{}, scored by symbolic/numeric equivalence.",
	DataSources:   []string{"math", "deepscaler", "gsm8k", "aime*", "math500", "dapo*", "numina*"},
	Config:        Config{SystemPrompt: defaultSystemPrompt, MaxTurns: 8},
	Tools:         []sdk.Tool{tools.Think(), tools.Python(), tools.Finish()},
	ParseTask:     ParseTask,
	EpisodeByTask: true, // a group's task is prepared once
	Episode: func(_ context.Context, r *rollout) (*sdk.Episode, error) {
		c := r.Config
		return tools.AnswerEpisode(r.Task.ID, c.SystemPrompt, r.Task.Question, c.MaxTurns, c.python(), c.Image), nil
	},
	Score: score,
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

func score(ctx context.Context, r *rollout, req sdk.EvaluateRequest) (*sdk.Score, error) {
	t := r.Task
	ans, method := mathans.Extract(req.Response())
	correct, budgetOut := false, false
	if method != mathans.MethodNone {
		var err error
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
