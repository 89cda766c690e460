// Package taskscripts writes the simulator's scripts (simllm.Script) for
// task rows in the shapes of the bundled examples and tests: a question
// (question, problem, problem_text, problem_statement, text, or a verl
// prompt's user message) and its answer (answer, answer_number, answer_index,
// solution, or reward_model.ground_truth). The right play states the
// answer; the wrong play a plausible wrong one. A row whose question or
// answer it cannot find is an error naming the line: a file of tasks in
// another shape must not turn into a simulator that silently knows nothing.
//
// This is the one place that knows the sample tasks' shapes; the simulator
// itself plays scripts and knows no domain.
package taskscripts

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	json "github.com/goccy/go-json"
	"github.com/prorl/prorl/internal/simllm"
	"github.com/prorl/prorl/sdk/taskrow"
)

// Options shape the plays.
type Options struct {
	// PythonTurns python calls printing the answer, then ThinkTurns think
	// calls, come before the answer.
	PythonTurns, ThinkTurns int
}

// BashAnswer starts an answer that is a shell command (a repository task's
// fix): the play runs it with the bash tool, then finishes.
const BashAnswer = "bash:\n"

// Load reads JSONL task rows (or {"task": {...}} requests) into scripts.
func Load(path string, o Options) ([]simllm.Script, error) {
	return simllm.ReadJSONL(path, func(raw []byte) (simllm.Script, error) {
		q, a, err := questionAnswer(raw)
		if err != nil {
			return simllm.Script{}, err
		}
		return Script(q, a, o), nil
	})
}

type row struct {
	Question     string          `json:"question"`
	Problem      string          `json:"problem"`
	ProblemText  string          `json:"problem_text"`
	ProblemStmt  string          `json:"problem_statement"`
	Text         string          `json:"text"` // MBPP
	Prompt       json.RawMessage `json:"prompt"`
	Answer       json.RawMessage `json:"answer"`
	AnswerNumber json.RawMessage `json:"answer_number"`
	AnswerIndex  *int            `json:"answer_index"`
	Unit         string          `json:"unit"`
	Solution     string          `json:"solution"` // a coding task's reference solution
	RewardModel  *struct {
		GroundTruth json.RawMessage `json:"ground_truth"`
	} `json:"reward_model"`
	Task json.RawMessage `json:"task"`
}

func questionAnswer(raw []byte) (string, string, error) {
	var r row
	if err := json.Unmarshal(raw, &r); err != nil {
		return "", "", err
	}
	if len(r.Task) > 0 { // {"task": {...}} request form
		if err := json.Unmarshal(r.Task, &r); err != nil {
			return "", "", fmt.Errorf("task: %w", err)
		}
	}
	q := taskrow.First(r.Question, r.Problem, r.ProblemText, r.ProblemStmt, r.Text)
	if q == "" && len(r.Prompt) > 0 {
		var msgs []struct{ Role, Content string }
		if json.Unmarshal(r.Prompt, &msgs) == nil {
			for _, m := range msgs {
				if m.Role == "user" {
					q = m.Content
					break
				}
			}
		} else {
			_ = json.Unmarshal(r.Prompt, &q)
		}
	}
	if strings.TrimSpace(q) == "" {
		return "", "", fmt.Errorf("no question: none of question, problem, problem_text, problem_statement, text, prompt")
	}
	a := r.Answer
	if len(a) == 0 {
		a = r.AnswerNumber
	}
	if len(a) == 0 && r.RewardModel != nil {
		a = r.RewardModel.GroundTruth
	}
	var as string
	if json.Unmarshal(a, &as) != nil {
		as = strings.TrimSpace(string(a))
	}
	if r.AnswerIndex != nil && *r.AnswerIndex >= 0 && *r.AnswerIndex < 10 {
		as = string(rune('A' + *r.AnswerIndex))
	}
	if r.Solution != "" {
		as = r.Solution
	}
	if as == "" || as == "null" {
		return "", "", fmt.Errorf("no answer: none of answer, answer_number, answer_index, solution, reward_model.ground_truth")
	}
	if r.Unit != "" && !strings.HasSuffix(as, r.Unit) {
		as += " " + r.Unit
	}
	return strings.TrimSpace(q), as, nil
}

// Script is the script of question q whose answer is a.
func Script(q, a string, o Options) simllm.Script {
	if cmd, ok := strings.CutPrefix(a, BashAnswer); ok {
		bash := func(c string) []simllm.Call {
			args, _ := json.Marshal(map[string]string{"command": c})
			return []simllm.Call{{Tool: "bash", Arguments: args}}
		}
		return simllm.Script{Key: q, Play: simllm.Play{Calls: bash(cmd), Final: "Done."},
			// Changes nothing: an empty patch.
			Wrong: &simllm.Play{Calls: bash("echo 'I could not find the bug.'"), Final: "Done."}}
	}
	play := func(ans string) simllm.Play {
		var calls []simllm.Call
		for range o.PythonTurns {
			code, _ := json.Marshal(map[string]string{"code": fmt.Sprintf("print(%q)", ans)})
			calls = append(calls, simllm.Call{Tool: "python", Arguments: code})
		}
		for i := range o.ThinkTurns {
			th, _ := json.Marshal(map[string]string{"thought": fmt.Sprintf("step %d of the problem: %.40s", i+1, q)})
			calls = append(calls, simllm.Call{Tool: "think", Arguments: th})
		}
		return simllm.Play{Calls: calls, Final: finalText(ans)}
	}
	w := play(wrong(a))
	return simllm.Script{Key: q, Play: play(a), Wrong: &w}
}

// finalText states an answer: a program (a reference solution of a coding
// task) in a python block, anything else in \boxed{}.
func finalText(ans string) string {
	if strings.Contains(ans, "\n") {
		return "```python\n" + ans + "\n```"
	}
	return fmt.Sprintf("The answer is \\boxed{%s}.", ans)
}

// wrong makes a plausible wrong answer: the next option letter, the
// number plus one (keeping a unit after it), else the answer with a 1.
func wrong(ans string) string {
	if len(ans) == 1 && ans[0] >= 'A' && ans[0] <= 'J' {
		return string(rune('A' + (ans[0]-'A'+1)%4))
	}
	if m := leadingNumber.FindStringSubmatch(ans); m != nil {
		n, _ := strconv.ParseFloat(m[1], 64)
		return strconv.FormatFloat(n+1, 'f', -1, 64) + m[2]
	}
	return ans + "1"
}

var leadingNumber = regexp.MustCompile(`^(-?\d+(?:\.\d+)?)(\s.*)?$`)
