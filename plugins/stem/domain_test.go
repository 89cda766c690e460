package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/prorl/prorl/sdk"
	"github.com/prorl/prorl/sdk/sdktest"
)

func TestConformance(t *testing.T) {
	sdktest.Conformance(t, sdktest.Suite{
		Domain: Domain,
		Config: json.RawMessage(`{"max_turns": 4, "python": true, "rel_tol": 0.02}`),
		Cases: []sdktest.Case{
			{Name: "choice", Task: json.RawMessage(`{"question":"Which is a noble gas?","options":["Oxygen","Argon","Nitrogen","Carbon"],"answer":"B"}`),
				Right: `The answer is \boxed{B}`, Wrong: `\boxed{A}`},
			{Name: "choice by text", Task: json.RawMessage(`{"question":"Which is a noble gas?","options":{"A":"Oxygen","B":"Argon"},"answer":"Argon"}`),
				Right: "It must be\nArgon", Wrong: "Answer: A"},
			{Name: "gpqa row", Task: json.RawMessage(`{"data_source":"gpqa_diamond","prompt":[{"role":"user","content":"Q?\nA. x\nB. y\nC. z\nD. w"}],"reward_model":{"ground_truth":"D"}}`),
				Right: "Answer: (D)", Wrong: "Answer: (C)"},
			{Name: "numeric", Task: json.RawMessage(`{"problem_text":"Energy?","answer_number":"3.2","unit":"kJ"}`),
				Right: `\boxed{3200 J}`, Wrong: `\boxed{3.2 J}`},
			{Name: "free", Task: json.RawMessage(`{"question":"Powerhouse of the cell?","answer":"mitochondria","kind":"free"}`),
				Right: `\boxed{Mitochondria}`, Wrong: `\boxed{nucleus}`},
		},
		BadTasks: []json.RawMessage{
			json.RawMessage(`{"question":"no answer"}`),
			json.RawMessage(`{"answer":"A"}`),
			json.RawMessage(`{"question":"q","options":["a","b"],"answer":"C"}`),
			json.RawMessage(`{"question":"q","options":{"A":"a","C":"c"},"answer":"A"}`),
			json.RawMessage(`{"question":"q","answer":"3 furlongs","kind":"numeric"}`),
			json.RawMessage(`{"question":"q","answer":"1","kind":"essay"}`),
			json.RawMessage(`{"question":"q","answer":"1","rel_tol":2}`),
		},
	})
}

// TestNumericExactByDefault: with the deployment's defaults (no rel_tol),
// an integer reference is exact and a measured one holds to its
// significant figures; the near misses a float tolerance let through are
// wrong.
func TestNumericExactByDefault(t *testing.T) {
	sdktest.Conformance(t, sdktest.Suite{
		Domain: Domain,
		Config: json.RawMessage(`{}`),
		Cases: []sdktest.Case{
			{Name: "integer", Task: json.RawMessage(`{"question":"How many?","answer":"1000000","kind":"numeric"}`),
				Right: `\boxed{1000000}`, Wrong: `\boxed{1000001}`},
			{Name: "big integer", Task: json.RawMessage(`{"question":"How many?","answer":"100000000000","kind":"numeric"}`),
				Right: `\boxed{10^{11}}`, Wrong: `\boxed{99999999999}`},
			{Name: "tiny", Task: json.RawMessage(`{"question":"Planck?","answer":"6.626 \\times 10^{-34}","unit":"J s","kind":"numeric"}`),
				Right: `\boxed{6.6262 \times 10^{-34} J s}`, Wrong: `\boxed{0}`},
			{Name: "task tolerance", Task: json.RawMessage(`{"question":"About?","answer":"100","rel_tol":0.05,"kind":"numeric"}`),
				Right: `\boxed{104}`, Wrong: `\boxed{106}`},
		},
	})
}

func TestShuffleIsConsistent(t *testing.T) {
	d := Domain
	task := json.RawMessage(`{"id":"q1","question":"Pick the metal.","options":["wood","glass","iron","stone","paper"],"answer":"C","shuffle":true,"shuffle_seed":11}`)
	ep, err := d.Prepare(context.Background(), sdk.PrepareRequest{RolloutID: "shuffle", Task: task})
	if err != nil {
		t.Fatal(err)
	}
	shown := ep.Messages[1].Content
	if strings.Contains(shown, "C. iron") {
		t.Fatalf("not shuffled:\n%s", shown)
	}
	letter := ""
	for _, line := range strings.Split(shown, "\n") {
		if strings.HasSuffix(line, ". iron") {
			letter = line[:1]
		}
	}
	if letter == "" {
		t.Fatalf("iron not shown:\n%s", shown)
	}
	for _, resp := range []string{`\boxed{` + letter + `}`, "The answer is iron.\niron"} {
		sc, err := d.Evaluate(context.Background(), sdk.EvaluateRequest{RolloutID: "shuffle", Task: task, FinalResponse: resp})
		if err != nil || sc.Reward != 1 {
			t.Fatalf("%q: %+v %v", resp, sc, err)
		}
	}
	sc, _ := d.Evaluate(context.Background(), sdk.EvaluateRequest{RolloutID: "shuffle", Task: task, FinalResponse: `\boxed{C}`})
	if letter != "C" && sc.Reward != 0 {
		t.Fatal("the unshuffled letter was accepted")
	}
	// The same task shuffles the same way every time.
	ep2, _ := d.Prepare(context.Background(), sdk.PrepareRequest{RolloutID: "shuffle-2", Task: task})
	if ep2.Messages[1].Content != shown {
		t.Fatal("shuffle is not deterministic")
	}
}

func TestParseTaskKinds(t *testing.T) {
	cases := []struct {
		in, kind, answer string
	}{
		{`{"question":"q","options":["a","b"],"answer_index":1}`, KindChoice, "B"},
		{`{"question":"q","choices":["a","b","c"],"answer":"c"}`, KindChoice, "C"},
		{`{"prompt":"q\nA. a\nB. b","reward_model":{"ground_truth":"B"}}`, KindChoice, "B"},
		{`{"question":"q","answer":"42"}`, KindNumeric, "42"},
		{`{"question":"q","answer":"9.8 m/s^2"}`, KindNumeric, "9.8 m/s^2"},
		{`{"question":"q","answer":"9.8","unit":"m/s^2"}`, KindNumeric, "9.8 m/s^2"},
		{`{"question":"q","answer":"9.8 m/s^2","unit":"m/s^2"}`, KindNumeric, "9.8 m/s^2"},
		{`{"question":"q","answer":"oxygen"}`, KindFree, "oxygen"},
		{`{"question":"q","answer":"42","kind":"free"}`, KindFree, "42"},
	}
	for _, c := range cases {
		got, err := ParseTask(json.RawMessage(c.in))
		if err != nil || got.Kind != c.kind || got.Answer != c.answer {
			t.Errorf("%s: %+v %v", c.in, got, err)
		}
	}
}

func FuzzParseTask(f *testing.F) {
	f.Add(`{"question":"q","options":["a","b"],"answer":"B","shuffle":true}`)
	f.Add(`{"problem_text":"p","answer_number":"3.2","unit":"kJ"}`)
	f.Fuzz(func(t *testing.T, s string) {
		task, err := ParseTask(json.RawMessage(s))
		if err == nil && task.Kind == KindChoice && len(task.Options) > 0 && strings.Index("ABCDEFGHIJ", task.Answer) >= len(task.Options) {
			t.Fatalf("answer %q outside %d options", task.Answer, len(task.Options))
		}
	})
}
