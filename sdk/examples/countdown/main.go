// Command countdown is an example domain written with the SDK: reach the
// target with the given numbers, each used once, and + - * / ( ).
// TinyZero's countdown task, with a calc tool to try expressions.
package main

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prorl/prorl/sdk"
	"github.com/prorl/prorl/sdk/tools"
)

type Config struct {
	MaxTurns int `json:"max_turns" schema:"min=1" desc:"Turns per episode."`
}

type Task struct {
	Numbers []int `json:"nums"`
	Target  int   `json:"target"`
}

// Check is called on each task row after it is decoded.
func (t Task) Check() error {
	if len(t.Numbers) == 0 {
		return sdk.InvalidTask("nums", "no numbers")
	}
	return nil
}

type CalcArgs struct {
	Expression string `json:"expression" desc:"An arithmetic expression, e.g. (3 + 5) * 2."`
}

var Domain = &sdk.Env[Config, Task, struct{}]{
	Name: "countdown", Version: "0.1.0", Description: "Reach a target number with arithmetic.", DataSources: []string{"countdown"},
	Config: Config{MaxTurns: 6},
	Tools: []sdk.Tool{tools.Finish(), sdk.NewTool("calc", "Evaluate an arithmetic expression.",
		func(_ context.Context, _ sdk.ToolContext, a CalcArgs) (sdk.ToolResult, error) {
			v, err := eval(a.Expression)
			return sdk.ToolResult{Output: strconv.FormatFloat(v, 'g', -1, 64)}, err
		})},
	Episode: func(_ context.Context, r *sdk.Rollout[Config, Task, struct{}]) (*sdk.Episode, error) {
		q := fmt.Sprintf("Using the numbers %v, each exactly once, and + - * / ( ), make %d. "+
			"Call finish with the equation in <answer></answer>, e.g. <answer>(1 + 2) * 3</answer>.", r.Task.Numbers, r.Task.Target)
		return &sdk.Episode{Messages: sdk.Chat("You are good at arithmetic.", q), Limits: sdk.Limits{MaxTurns: r.Config.MaxTurns}}, nil
	},
	Score: func(_ context.Context, r *sdk.Rollout[Config, Task, struct{}], req sdk.EvaluateRequest) (*sdk.Score, error) {
		eq, ok := answer(req.Response())
		v, err := eval(eq)
		used, want := numbers.FindAllString(eq, -1), strings.Fields(strings.Trim(fmt.Sprint(r.Task.Numbers), "[]"))
		slices.Sort(used)
		slices.Sort(want)
		right := ok && err == nil && slices.Equal(used, want) && math.Abs(v-float64(r.Task.Target)) < 1e-5
		return &sdk.Score{Reward: sdk.Flag(right), Resolved: right, Info: map[string]any{"equation": eq},
			Metrics: map[string]float64{"format_ok": sdk.Flag(ok)}}, nil
	},
}

var (
	answerTag = regexp.MustCompile(`(?s)<answer>(.*?)</answer>`)
	numbers   = regexp.MustCompile(`\d+`)
	tokens    = regexp.MustCompile(`\d+|[-+*/()]|\S`)
)

// answer is the last <answer> of the response.
func answer(s string) (string, bool) {
	m := answerTag.FindAllStringSubmatch(s, -1)
	if len(m) == 0 {
		return "", false
	}
	return strings.TrimSpace(m[len(m)-1][1]), true
}

// eval computes + - * / over integers with parentheses (no unary minus).
func eval(s string) (float64, error) {
	toks := tokens.FindAllString(s, -1)
	var expr func(level int) (float64, error)
	expr = func(level int) (float64, error) {
		if level == 2 { // a number or a parenthesised expression
			if len(toks) == 0 {
				return 0, fmt.Errorf("unexpected end of %q", s)
			}
			t := toks[0]
			toks = toks[1:]
			if t == "(" {
				v, err := expr(0)
				if err == nil && (len(toks) == 0 || toks[0] != ")") {
					return 0, fmt.Errorf("missing ) in %q", s)
				}
				toks = toks[min(1, len(toks)):]
				return v, err
			}
			return strconv.ParseFloat(t, 64)
		}
		ops := [2]string{"+-", "*/"}[level]
		v, err := expr(level + 1)
		for err == nil && len(toks) > 0 && len(toks[0]) == 1 && strings.Contains(ops, toks[0]) {
			op := toks[0]
			toks = toks[1:]
			var w float64
			if w, err = expr(level + 1); err == nil {
				v = map[string]float64{"+": v + w, "-": v - w, "*": v * w, "/": v / w}[op]
			}
		}
		return v, err
	}
	v, err := expr(0)
	if err == nil && len(toks) > 0 {
		err = fmt.Errorf("unexpected %q in %q", toks[0], s)
	}
	return v, err
}

func main() { sdk.Serve(Domain) }
