// Package pysdk tests the Python SDK's example domains as the host runs
// them: each script is started as its own process by go-plugin (mutual TLS,
// the broker, health, shutdown) and must pass the same conformance suite
// as a Go domain, and the same cheat tests as its Go twin.
package pysdk

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	pb "github.com/prorl/prorl/sdk/proto"
	"github.com/prorl/prorl/sdk/sdktest"
)

// python is the SDK's venv (pip-installed from this checkout), as an author
// would have it; make test requires it.
func python(t *testing.T) string {
	return sdktest.Reference(t, "../../scripts/ref.py", "pysdk")
}

const countdownTask = `{"nums": [3, 5, 2], "target": 16, "data_source": "countdown"}`

func TestCountdown(t *testing.T) {
	cmd := []string{python(t), "examples/countdown.py"}
	sdktest.Conformance(t, sdktest.Suite{
		Command:  cmd,
		Config:   json.RawMessage(`{"max_turns": 4}`),
		Cases:    []sdktest.Case{{Task: json.RawMessage(countdownTask), Right: "<answer>(3 + 5) * 2</answer>", Wrong: "<answer>3 + 5 + 2</answer>"}},
		BadTasks: []json.RawMessage{json.RawMessage(`{"nums": [], "target": 3}`), json.RawMessage(`{"nums": "1 2", "target": 3}`)},
	})

	h := sdktest.StartCommand(t, cmd, nil)
	ctx := context.Background()
	if r, err := h.Configure(ctx, nil); err != nil || len(r.Diagnostics) > 0 {
		t.Fatal(err, r.GetDiagnostics())
	}
	// The Go example's cheat table: the same verdicts from the Python twin.
	for _, c := range sdktest.LoadCases[sdktest.AnswerCase](t, "../examples/countdown/testdata/answers.json") {
		t.Run(c.Name, func(t *testing.T) {
			p, err := sdktest.Play(ctx, h, "r-"+c.Name, json.RawMessage(countdownTask), nil, c.Answer)
			if err != nil {
				t.Fatal(err)
			}
			if p.Score.Reward != c.Reward {
				t.Fatalf("%q: reward %v, want %v", c.Answer, p.Score.Reward, c.Reward)
			}
		})
	}
	calls := []sdktest.Call{
		{Tool: "calc", Args: map[string]string{"expression": "(3 + 5) * 2"}},
		{Tool: "calc", Args: map[string]string{"expression": "7 / 2"}},
		{Tool: "calc", Args: map[string]string{"expr": "1"}},
		{Tool: "calc", Args: map[string]any{"expression": 12}},
		{Tool: "calc", Args: map[string]string{"expression": "open('/etc/passwd').read()"}},
	}
	p, err := sdktest.Play(ctx, h, "calc", json.RawMessage(countdownTask), calls, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		out   string
		isErr bool
	}{{"16", false}, {"3.5", false}, {"expr", true}, {"expression: 12 is not of type 'string'", true}, {"not allowed", true}}
	for i, w := range want {
		o := p.Outputs[i]
		if o.IsError != w.isErr || !strings.Contains(o.Output, w.out) {
			t.Errorf("call %d: %+v; want %q (error %v)", i, o, w.out, w.isErr)
		}
	}
	// The config table is checked against the schema the plugin declares.
	for cfg, want := range map[string]string{`{"max_turns": 0}`: "max_turns", `{"max_turn": 3}`: "max_turn"} {
		r, err := h.Configure(ctx, json.RawMessage(cfg))
		if err != nil || len(r.Diagnostics) != 1 || r.Diagnostics[0].Code != "invalid_config" || !strings.Contains(r.Diagnostics[0].Message, want) {
			t.Errorf("config %s: %v %v; want invalid_config naming %s", cfg, err, r.GetDiagnostics(), want)
		}
	}
}

func guesses(ws ...string) []sdktest.Call {
	out := make([]sdktest.Call, len(ws))
	for i, w := range ws {
		out[i] = sdktest.Call{Tool: "guess", Args: map[string]string{"word": w}}
	}
	return out
}

func TestWordle(t *testing.T) {
	const task = `{"answer": "crane"}`
	cmd := []string{python(t), "examples/wordle.py"}
	sdktest.Conformance(t, sdktest.Suite{
		Command: cmd,
		Cases: []sdktest.Case{{Task: json.RawMessage(task),
			RightCalls: guesses("crane"), WrongCalls: guesses("slate", "crane"), Right: "crane", Wrong: "crane"}},
		BadTasks: []json.RawMessage{json.RawMessage(`{"answer": "cranes"}`), json.RawMessage(`{"answer": "CRANE"}`)},
	})
	h := sdktest.StartCommand(t, cmd, nil)
	ctx := context.Background()
	if r, err := h.Configure(ctx, json.RawMessage(`{"max_guesses": 3}`)); err != nil || len(r.Diagnostics) > 0 {
		t.Fatal(err, r.GetDiagnostics())
	}
	for _, c := range sdktest.LoadCases[sdktest.PlayCase](t, "../examples/wordle/testdata/games.json") {
		t.Run(c.Name, func(t *testing.T) {
			p, err := sdktest.Play(ctx, h, "g-"+c.Name, json.RawMessage(task), c.Calls, c.Final)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(p.Score.Reward-c.Reward) > 1e-9 {
				t.Fatalf("reward %v, want %v (outputs %v)", p.Score.Reward, c.Reward, p.Outputs)
			}
		})
	}
	// A call for a rollout this process never prepared fails the rollout
	// instead of playing on a blank state.
	r, err := h.Client.CallTool(ctx, &pb.CallToolRequest{RolloutId: "never-prepared", Call: &pb.ToolCall{Name: "guess", ArgumentsJson: []byte(`{"word":"crane"}`)}})
	if err != nil || len(r.Diagnostics) != 1 || r.Diagnostics[0].Code != "internal" {
		t.Errorf("unprepared rollout: %v %v", err, r)
	}
}

func TestMathVerify(t *testing.T) {
	verl := `{"data_source": "mathverify", "prompt": [{"role": "user", "content": "What is 1/2 + 1/4?"}], "reward_model": {"ground_truth": "\\frac{3}{4}"}}`
	sdktest.Conformance(t, sdktest.Suite{
		Command: []string{python(t), "examples/mathverify_math.py"},
		Cases: []sdktest.Case{
			{Name: "plain", Task: json.RawMessage(`{"question": "What is 6 times 7?", "answer": "42"}`), Right: "6*7 = \\boxed{42}", Wrong: "\\boxed{43}"},
			{Name: "verl row", Task: json.RawMessage(verl), Right: "The sum is $\\frac{3}{4}$, so \\boxed{0.75}", Wrong: "\\boxed{\\frac{3}{5}}"},
		},
		BadTasks: []json.RawMessage{json.RawMessage(`{"question": "x"}`), json.RawMessage(`{"question": "", "answer": "1"}`)},
	})
}

// TestHostServices drives a Python domain that works in a sandbox through
// the host's services on the broker (mutual TLS both ways), and checks
// that failures in domain code come back as diagnostics with the process
// still serving.
func TestHostServices(t *testing.T) {
	h := sdktest.StartCommand(t, []string{python(t), "testdata/sandbox_domain.py"}, sdktest.NewFakeHost(t))
	ctx := context.Background()
	if r, err := h.Configure(ctx, nil); err != nil || len(r.Diagnostics) > 0 {
		t.Fatal(err, r.GetDiagnostics())
	}
	task := json.RawMessage(`{"want": "42"}`)
	sh := func(c string) sdktest.Call { return sdktest.Call{Tool: "sh", Args: map[string]string{"command": c}} }
	p, err := sdktest.Play(ctx, h, "copy", task, []sdktest.Call{sh("cat goal.txt"), sh("cp goal.txt done.txt"), sh("exit 3")}, "")
	if err != nil {
		t.Fatal(err)
	}
	if p.Score.Reward != 1 || !strings.Contains(p.Outputs[0].Output, "42") || !strings.HasPrefix(p.Outputs[2].Output, "exit 3") {
		t.Fatalf("reward %v, outputs %v", p.Score.Reward, p.Outputs)
	}
	if p, err := sdktest.Play(ctx, h, "lazy", task, []sdktest.Call{sh("echo 41 > done.txt")}, "I copied it."); err != nil || p.Score.Reward != 0 {
		t.Fatalf("a wrong file scored: %v %v", err, p.Score)
	}
	for _, c := range []struct{ crash, op, code string }{
		{"episode", "prepare", "internal"}, {"score", "evaluate", "internal"}, {"tool", "tool sh", "sandbox_failed"},
	} {
		_, err := sdktest.Play(ctx, h, "crash-"+c.crash, json.RawMessage(`{"want": "1", "crash": "`+c.crash+`"}`), []sdktest.Call{sh("true")}, "x")
		if err == nil || !strings.Contains(err.Error(), c.op) || !strings.Contains(err.Error(), c.code) {
			t.Errorf("crash in %s: %v; want a %s diagnostic from %s", c.crash, err, c.code, c.op)
		}
	}
	if _, err := sdktest.Play(ctx, h, "after", task, []sdktest.Call{sh("cp goal.txt done.txt")}, ""); err != nil {
		t.Fatalf("the plugin must keep serving after domain failures: %v", err)
	}
}
