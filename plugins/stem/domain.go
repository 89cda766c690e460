package main

import (
	"context"
	"encoding/json"
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
	SystemPrompt string `json:"system_prompt"`
	MaxTurns     int    `json:"max_turns"`
	// Python offers the python tool (a sandbox, started only if the model calls it).
	Python *bool  `json:"python"`
	Image  string `json:"image"`
	// RelTol is a relative tolerance for every numeric answer whose task
	// sets none; zero (the default) means answers must be exact, or within
	// the reference's significant figures.
	RelTol float64 `json:"rel_tol"`
	// SigFigs also accepts numeric answers within half a unit in the last
	// significant figure of the reference, by default.
	SigFigs *bool `json:"sig_figs"`
}

func (c Config) python() bool  { return c.Python == nil || *c.Python }
func (c Config) sigFigs() bool { return c.SigFigs == nil || *c.SigFigs }

// Domain is the STEM domain.
type Domain struct {
	cfg   Config
	tools []sdk.Tool
}

// New returns the domain with default configuration.
func New() *Domain {
	return &Domain{cfg: Config{SystemPrompt: defaultSystemPrompt, MaxTurns: 8},
		tools: []sdk.Tool{tools.Think(), tools.Python(), tools.Finish()}}
}

func (d *Domain) Info() sdk.Info {
	return sdk.Info{
		Name:        "stem",
		Version:     version,
		Description: "STEM questions: multiple choice (A–J), numeric answers with units and tolerance, free-form short answers.",
		DataSources: []string{"gpqa*", "mmlu_pro*", "mmlu-pro*", "supergpqa*", "scibench*", "scp*", "stem*"},
		Tools:       d.tools,
		ConfigSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{` +
			`"system_prompt":{"type":"string"},"max_turns":{"type":"integer","minimum":1},"python":{"type":"boolean"},"image":{"type":"string"},` +
			`"rel_tol":{"type":"number","minimum":0,"exclusiveMaximum":1},"sig_figs":{"type":"boolean"}}}`),
	}
}

func (d *Domain) Configure(_ context.Context, raw json.RawMessage, _ sdk.Sandboxes) error {
	cfg := d.cfg
	if err := sdk.DecodeConfig("stem", raw, &cfg); err != nil {
		return err
	}
	if cfg.MaxTurns < 1 {
		return sdk.Errorf(sdk.CodeInvalidConfig, "stem config: max_turns must be at least 1")
	}
	if cfg.RelTol < 0 || cfg.RelTol >= 1 {
		return sdk.Errorf(sdk.CodeInvalidConfig, "stem config: rel_tol must be in [0, 1)")
	}
	d.cfg = cfg
	return nil
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

func (d *Domain) Prepare(_ context.Context, req sdk.PrepareRequest) (*sdk.Episode, error) {
	t, err := ParseTask(req.Task)
	if err != nil {
		return nil, err
	}
	return tools.AnswerEpisode(t.ID, d.cfg.SystemPrompt, userMessage(t), d.cfg.MaxTurns, d.cfg.python(), d.cfg.Image), nil
}

func (d *Domain) Evaluate(_ context.Context, req sdk.EvaluateRequest) (*sdk.Score, error) {
	t, err := ParseTask(req.Task)
	if err != nil {
		return nil, err
	}
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
				tol = d.cfg.RelTol
			}
			sig := d.cfg.sigFigs()
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
