package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prorl/prorl/sdk"
	"github.com/prorl/prorl/sdk/sdktest"
)

func TestConformance(t *testing.T) {
	sdktest.Conformance(t, sdktest.Suite{
		Domain: Domain,
		Config: json.RawMessage(`{"max_turns": 4, "python": true}`),
		Cases: []sdktest.Case{
			{Name: "plain", Task: json.RawMessage(`{"question":"What is 1/2 + 1/4?","answer":"\\frac{3}{4}"}`), Right: `The answer is \boxed{0.75}`, Wrong: `\boxed{1}`},
			{Name: "verl", Task: json.RawMessage(`{"data_source":"deepscaler","prompt":[{"role":"user","content":"Solve x+1=3."}],"reward_model":{"style":"rule","ground_truth":"2"},"extra_info":{"index":3}}`), Right: `x = \boxed{2}`, Wrong: `\boxed{3}`},
			{Name: "numeric ground truth", Task: json.RawMessage(`{"problem":"1000+234?","answer":1234}`), Right: `\boxed{1,234}`, Wrong: `\boxed{1243}`},
		},
		BadTasks: []json.RawMessage{
			json.RawMessage(`{"question":"no answer"}`),
			json.RawMessage(`{"answer":"no question"}`),
			json.RawMessage(`{"prompt":42,"answer":"1"}`),
		},
	})
}

func TestParseTask(t *testing.T) {
	tests := []struct {
		in      string
		q, a    string
		wantErr bool
	}{
		{`{"question":"q","answer":"1"}`, "q", "1", false},
		{`{"problem":"p","answer":["2","3"]}`, "p", "2", false},
		{`{"prompt":"s","reward_model":{"ground_truth":"4"}}`, "s", "4", false},
		{`{"prompt":[{"role":"system","content":"x"},{"role":"user","content":"u"}],"reward_model":{"ground_truth":"5"}}`, "u", "5", false},
		{`{"question":"","answer":"1"}`, "", "", true},
		{`{"question":"q"}`, "", "", true},
		{`[]`, "", "", true},
	}
	for _, tt := range tests {
		got, err := ParseTask(json.RawMessage(tt.in))
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err %v", tt.in, err)
			continue
		}
		if err == nil && (got.Question != tt.q || got.Answer != tt.a) {
			t.Errorf("%s: got %+v", tt.in, got)
		}
	}
}

// FuzzParseTask: any payload is either a task with a question and an
// answer, or an invalid-task error naming a field (a 4xx to the trainer,
// never an internal error).
func FuzzParseTask(f *testing.F) {
	f.Add(`{"question":"q","answer":"1"}`)
	f.Add(`{"prompt":[{"role":"user","content":"u"}],"reward_model":{"ground_truth":"5"}}`)
	f.Add(`{"problem":"p","answer":["2",3]}`)
	f.Fuzz(func(t *testing.T, s string) {
		task, err := ParseTask(json.RawMessage(s))
		if err != nil {
			var e *sdk.Error
			if !errors.As(err, &e) || e.Code != sdk.CodeInvalidTask || e.Field == "" {
				t.Fatalf("%q: %v, want an invalid-task error naming a field", s, err)
			}
			return
		}
		if strings.TrimSpace(task.Question) == "" || strings.TrimSpace(task.Answer) == "" {
			t.Fatalf("%q: accepted with question %q and answer %q", s, task.Question, task.Answer)
		}
	})
}

// TestEvaluateStops: an answer the grader cannot decide within its work
// budget scores 0 and says so; a cancelled evaluation returns the
// context's error instead of a score.
func TestEvaluateStops(t *testing.T) {
	n := 1800
	a, b := make([]string, n), make([]string, n)
	for i := range n {
		a[i], b[n-1-i] = fmt.Sprint(i+1), fmt.Sprintf("%d.0", i+1)
	}
	task, _ := json.Marshal(map[string]string{"question": "q", "answer": strings.Join(b, ", ")})
	if _, err := Domain.Prepare(context.Background(), sdk.PrepareRequest{RolloutID: "stops", Task: task}); err != nil {
		t.Fatal(err)
	}
	defer Domain.Release(context.Background(), "stops")
	req := sdk.EvaluateRequest{RolloutID: "stops", Task: task, FinalResponse: `\boxed{` + strings.Join(a, ", ") + `}`}
	sc, err := Domain.Evaluate(context.Background(), req)
	if err != nil || sc.Reward != 0 || sc.Info["grader_budget_exceeded"] != true {
		t.Fatalf("budget: %+v, %v", sc, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if sc, err := Domain.Evaluate(ctx, req); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %+v, %v; want context.Canceled", sc, err)
	}
}
