package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/prorl/prorl/sdk"
	"github.com/prorl/prorl/sdk/stemans"
	"github.com/prorl/prorl/sdk/tools"
)

const version = "0.1.0"

const defaultSystemPrompt = `You are an expert in science, technology, engineering and mathematics. ` +
	`Reason step by step. You may use the think tool to reason and the python tool to compute. ` +
	`When you are done, call the finish tool with your final answer written as \boxed{answer} in the message: ` +
	`for a multiple-choice question the letter of the option, for a numeric one the number with its unit.`

// Config is the [plugins.stem.config] table.
type Config struct {
	SystemPrompt string `json:"system_prompt" desc:"The system message of every episode."`
	MaxTurns     int    `json:"max_turns" schema:"min=1" desc:"Turns per episode."`
	Python       *bool  `json:"python" desc:"Offer the python tool (a sandbox, started only if the model calls it); default true."`
	Image        string `json:"image" desc:"The sandbox image for python; empty is the host's default."`
	// RelTol is a relative tolerance for every numeric answer whose task
	// sets none; zero (the default) means answers must be exact, or within
	// the reference's significant figures.
	RelTol float64 `json:"rel_tol" schema:"min=0" desc:"Relative tolerance of numeric answers whose task sets none, in [0, 1); 0: exact or within significant figures."`
	// SigFigs also accepts numeric answers within half a unit in the last
	// significant figure of the reference, by default.
	SigFigs *bool `json:"sig_figs" desc:"Accept numeric answers within the reference's significant figures; default true."`
}

func (c Config) python() bool  { return c.Python == nil || *c.Python }
func (c Config) sigFigs() bool { return c.SigFigs == nil || *c.SigFigs }

type rollout = sdk.Rollout[Config, *Task, struct{}]

// Domain is the STEM domain.
var Domain = &sdk.Env[Config, *Task, struct{}]{
	Name:        "stem",
	Version:     version,
	Description: "STEM questions: multiple choice (A–J), numeric answers with units and tolerance, free-form short answers.",
	DataSources: []string{"gpqa*", "mmlu_pro*", "mmlu-pro*", "supergpqa*", "scibench*", "scp*", "stem*"},
	Config:      Config{SystemPrompt: defaultSystemPrompt, MaxTurns: 8},
	Tools:       []sdk.Tool{tools.Think(), tools.Python(), tools.Finish()},
	Check: func(c *Config) error {
		if c.RelTol >= 1 {
			return fmt.Errorf("rel_tol must be in [0, 1), got %v", c.RelTol)
		}
		return nil
	},
	ParseTask:     ParseTask,
	EpisodeByTask: true, // a group's task is prepared once
	Episode: func(_ context.Context, r *rollout) (*sdk.Episode, error) {
		c := r.Config
		return tools.AnswerEpisode(r.Task.ID, c.SystemPrompt, userMessage(r.Task), c.MaxTurns, c.python(), c.Image), nil
	},
	Score: score,
}

// userMessage is the question, with the options listed by letter.
func userMessage(t *Task) string {
	if len(t.Options) == 0 {
		return t.Question
	}
	var b strings.Builder
	b.WriteString(strings.TrimRight(t.Question, "\n"))
	b.WriteString("\n\n")
	for i, o := range t.Options {
		b.WriteString(stemans.Letters[i : i+1])
		b.WriteString(". ")
		b.WriteString(o)
		b.WriteByte('\n')
	}
	b.WriteString("\nAnswer with the letter of the correct option.")
	return b.String()
}

func score(_ context.Context, r *rollout, req sdk.EvaluateRequest) (*sdk.Score, error) {
	t, cfg := r.Task, r.Config
	resp := req.Response()
	var got, method string
	correct := false
	switch t.Kind {
	case KindChoice:
		got, method = stemans.Choice(resp, t.Options)
		correct = got != "" && got == t.Answer
	case KindNumeric:
		got, method = stemans.FinalAnswer(resp)
		if got != "" {
			tol := t.RelTol
			if tol == 0 {
				tol = cfg.RelTol
			}
			sig := cfg.sigFigs()
			if t.SigFigs != nil {
				sig = *t.SigFigs
			}
			correct, _ = stemans.NumericEqual(got, t.Answer, stemans.NumericOptions{RelTol: tol, SigFigs: sig})
		}
	default:
		got, method = stemans.FinalAnswer(resp)
		correct = got != "" && stemans.FreeEqual(got, t.Answer)
	}
	sc := &sdk.Score{
		Metrics: map[string]float64{"format_ok": sdk.Flag(method != stemans.MethodNone), "correct": sdk.Flag(correct)},
		Info:    map[string]any{"kind": t.Kind, "extracted_answer": got, "extraction": method, "ground_truth": t.Answer},
	}
	if correct {
		sc.Reward, sc.Resolved = 1, true
	}
	return sc, nil
}
