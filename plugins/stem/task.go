package main

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/prorl/prorl/sdk"
	"github.com/prorl/prorl/sdk/stemans"
	"github.com/prorl/prorl/sdk/taskrow"
)

// Task kinds.
const (
	KindChoice  = "choice"
	KindNumeric = "numeric"
	KindFree    = "free"
)

// Task is a STEM question in one of the accepted shapes:
//   - multiple choice: {question, options: [..] or {"A": ..}, answer: "C" |
//     answer_index: 2 | answer: "<option text>", shuffle?, shuffle_seed?}
//   - numeric (SciBench style): {question | problem_text, answer |
//     answer_number, unit?, rel_tol?, sig_figs?}
//   - free form: {question, answer, kind: "free"}
//   - verl/ProRL rows: {data_source, prompt, reward_model.ground_truth}; a
//     ground truth that is one letter A–J makes a multiple-choice task whose
//     options are already in the prompt.
type Task struct {
	ID       string
	Kind     string
	Question string
	Options  []string // as shown, after any shuffle
	Answer   string   // the correct letter (choice) or the reference answer
	RelTol   float64
	SigFigs  *bool
}

type rawTask struct {
	ID           string          `json:"id"`
	InstanceID   json.RawMessage `json:"instance_id"`
	ProblemID    json.RawMessage `json:"problemid"`
	Kind         string          `json:"kind"`
	QuestionText string          `json:"question"`
	Problem      string          `json:"problem"`
	ProblemText  string          `json:"problem_text"`
	Options      json.RawMessage `json:"options"`
	Choices      json.RawMessage `json:"choices"`
	Answer       json.RawMessage `json:"answer"`
	AnswerIndex  *int            `json:"answer_index"`
	AnswerNumber json.RawMessage `json:"answer_number"`
	Unit         string          `json:"unit"`
	RelTol       *float64        `json:"rel_tol"`
	SigFigs      *bool           `json:"sig_figs"`
	Shuffle      bool            `json:"shuffle"`
	ShuffleSeed  int64           `json:"shuffle_seed"`
	taskrow.Verl
}

// ParseTask reads a task payload. Extra fields (domain, data_source,
// extra_info...) are allowed: datasets carry many.
func ParseTask(raw json.RawMessage) (*Task, error) {
	var r rawTask
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, sdk.InvalidTask("task", "not a JSON object of the expected shape: %v", err)
	}
	t := &Task{ID: taskrow.First(r.ID, taskrow.Scalar(r.InstanceID), taskrow.Scalar(r.ProblemID)), SigFigs: r.SigFigs}
	q, err := r.Question(r.QuestionText, r.Problem, r.ProblemText)
	if err != nil {
		return nil, err
	}
	t.Question = q
	if strings.TrimSpace(t.Question) == "" {
		return nil, sdk.InvalidTask("question", "missing: give question, problem, problem_text or prompt")
	}
	if r.RelTol != nil {
		if *r.RelTol <= 0 || *r.RelTol >= 1 {
			return nil, sdk.InvalidTask("rel_tol", "must be in (0, 1), got %v", *r.RelTol)
		}
		t.RelTol = *r.RelTol
	}
	answer := taskrow.First(taskrow.Scalar(r.Answer), taskrow.Scalar(r.AnswerNumber), taskrow.Scalar(r.GroundTruth()))
	opts := r.Options
	if len(opts) == 0 {
		opts = r.Choices
	}
	options, err := parseOptions(opts)
	if err != nil {
		return nil, err
	}
	switch {
	case r.Kind != "" && r.Kind != KindChoice && r.Kind != KindNumeric && r.Kind != KindFree:
		return nil, sdk.InvalidTask("kind", "must be choice, numeric or free, not %q", r.Kind)
	case len(options) > 0 || r.Kind == KindChoice:
		t.Kind = KindChoice
	case r.Kind != "":
		t.Kind = r.Kind
	case isLetter(answer):
		t.Kind = KindChoice // options are in the prompt (verl rows)
	case looksNumeric(answer):
		t.Kind = KindNumeric
	default:
		t.Kind = KindFree
	}
	if t.Kind == KindChoice {
		return t, t.setChoice(options, answer, r.AnswerIndex, r.Shuffle, r.ShuffleSeed)
	}
	if answer == "" {
		return nil, sdk.InvalidTask("answer", "missing: give answer, answer_number or reward_model.ground_truth")
	}
	if t.Kind == KindNumeric && r.Unit != "" && !hasUnit(answer) {
		answer += " " + r.Unit
	}
	if t.Kind == KindNumeric {
		if _, err := stemans.ParseQuantity(answer); err != nil {
			return nil, sdk.InvalidTask("answer", "not a number with an optional unit: %v", err)
		}
	}
	t.Answer = answer
	return t, nil
}

// setChoice fixes the options as shown and the correct letter; a shuffle
// is a permutation seeded by the task, so Prepare and Evaluate agree.
func (t *Task) setChoice(options []string, answer string, index *int, shuffle bool, seed int64) error {
	if len(options) > len(stemans.Letters) {
		return sdk.InvalidTask("options", "at most %d options (A–J), got %d", len(stemans.Letters), len(options))
	}
	correct := -1
	switch {
	case index != nil:
		correct = *index
	case isLetter(answer):
		correct = strings.Index(stemans.Letters, answer)
	case answer != "" && len(options) > 0:
		for i, o := range options {
			if strings.TrimSpace(o) == strings.TrimSpace(answer) {
				correct = i
			}
		}
	}
	if correct < 0 || (len(options) > 0 && correct >= len(options)) {
		return sdk.InvalidTask("answer", "must name one of the options: a letter, answer_index or an option's text (got %q)", answer)
	}
	if shuffle && len(options) > 1 {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s\x00%s\x00%d", t.ID, t.Question, seed)
		rng := rand.New(rand.NewPCG(h.Sum64(), uint64(seed)))
		perm := rng.Perm(len(options))
		shown := make([]string, len(options))
		moved := correct
		for to, from := range perm {
			shown[to] = options[from]
			if from == correct {
				moved = to
			}
		}
		options, correct = shown, moved
	}
	t.Options = options
	t.Answer = stemans.Letters[correct : correct+1]
	return nil
}

// parseOptions accepts a list of texts or a {"A": text, ...} object.
func parseOptions(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		for i, o := range list {
			if strings.TrimSpace(o) == "" {
				return nil, sdk.InvalidTask(fmt.Sprintf("options[%d]", i), "empty option")
			}
		}
		return list, nil
	}
	var byLetter map[string]string
	if err := json.Unmarshal(raw, &byLetter); err != nil {
		return nil, sdk.InvalidTask("options", "must be a list of texts or an object of letter: text")
	}
	keys := make([]string, 0, len(byLetter))
	for k := range byLetter {
		if !isLetter(k) {
			return nil, sdk.InvalidTask("options", "key %q is not a letter A–J", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		if k != stemans.Letters[i:i+1] {
			return nil, sdk.InvalidTask("options", "letters must run from A without gaps (missing %s)", stemans.Letters[i:i+1])
		}
		out[i] = byLetter[k]
	}
	return out, nil
}

func isLetter(s string) bool {
	return len(s) == 1 && strings.Contains(stemans.Letters, s)
}

func looksNumeric(s string) bool {
	_, err := stemans.ParseQuantity(s)
	return err == nil
}

func hasUnit(s string) bool {
	q, err := stemans.ParseQuantity(s)
	return err == nil && q.HasUnit
}
