package main

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/prorl/prorl/sdk"
	pb "github.com/prorl/prorl/sdk/proto"
	"github.com/prorl/prorl/sdk/sdktest"
)

const task = `{"nums": [3, 5, 2], "target": 16, "data_source": "countdown"}`

func TestConformance(t *testing.T) {
	sdktest.Conformance(t, sdktest.Suite{
		Domain:   Domain,
		Config:   json.RawMessage(`{"max_turns": 4}`),
		Cases:    []sdktest.Case{{Task: json.RawMessage(task), Right: "<answer>(3 + 5) * 2</answer>", Wrong: "<answer>3 + 5 + 2</answer>"}},
		BadTasks: []json.RawMessage{json.RawMessage(`{"nums": [], "target": 3}`), json.RawMessage(`{"nums": "1 2", "target": 3}`)},
	})
}

// TestScore tries the answers a policy would try to get reward without
// solving the task (testdata/answers.json, which the Python twin passes too).
func TestScore(t *testing.T) {
	h := sdktest.Start(t, Domain)
	ctx := context.Background()
	if _, err := h.Configure(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range sdktest.LoadCases[sdktest.AnswerCase](t, "testdata/answers.json") {
		t.Run(c.Name, func(t *testing.T) {
			id := "r-" + c.Name
			if p, err := h.Client.Prepare(ctx, &pb.PrepareRequest{RolloutId: id, TaskJson: []byte(task)}); err != nil || len(p.Diagnostics) > 0 {
				t.Fatal(err, p.GetDiagnostics())
			}
			e, err := h.Client.Evaluate(ctx, &pb.EvaluateRequest{RolloutId: id, TaskJson: []byte(task), FinalResponse: c.Answer})
			if err != nil || len(e.Diagnostics) > 0 || e.Reward != c.Reward {
				t.Fatalf("%q: reward %v, want %v (%v %v)", c.Answer, e.GetReward(), c.Reward, err, e.GetDiagnostics())
			}
		})
	}
}

func TestCalc(t *testing.T) {
	for expr, want := range map[string]string{"(3 + 5) * 2": "16", "7 / 2": "3.5", "1 - 2 - 3": "-4", "2 * 3 + 4 * 5": "26"} {
		res, err := Domain.Tools[1].Call(context.Background(), sdk.ToolContext{}, json.RawMessage(`{"expression": "`+expr+`"}`))
		if err != nil || res.Output != want {
			t.Errorf("calc %s = %q, %v; want %s", expr, res.Output, err, want)
		}
	}
	if _, err := Domain.Tools[1].Call(context.Background(), sdk.ToolContext{}, json.RawMessage(`{"expr": "1"}`)); err == nil {
		t.Error("a misspelt argument must be refused")
	}
}

// TestStateless: with no per-rollout state (S = struct{}) the domain keeps
// nothing, declares no state to the host, and answers a call for a rollout
// it never prepared (a restarted process) from the task the call carries.
func TestStateless(t *testing.T) {
	h := sdktest.Start(t, Domain)
	ctx := context.Background()
	info, err := h.Client.GetInfo(ctx, &pb.GetInfoRequest{})
	if err != nil || slices.Contains(info.Capabilities, sdk.CapRelease) {
		t.Fatalf("capabilities %v %v", info.GetCapabilities(), err)
	}
	if _, err := h.Client.Prepare(ctx, &pb.PrepareRequest{RolloutId: "p", TaskJson: []byte(task)}); err != nil || Domain.Sessions() != 0 {
		t.Fatalf("sessions kept: %d %v", Domain.Sessions(), err)
	}
	e, err := h.Client.Evaluate(ctx, &pb.EvaluateRequest{RolloutId: "never-prepared", TaskJson: []byte(task), FinalResponse: "<answer>(3 + 5) * 2</answer>"})
	if err != nil || len(e.Diagnostics) > 0 || e.Reward != 1 {
		t.Fatalf("%v %v", err, e)
	}
}
