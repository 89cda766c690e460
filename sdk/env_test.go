package sdk_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/prorl/prorl/sdk"
	pb "github.com/prorl/prorl/sdk/proto"
	"github.com/prorl/prorl/sdk/sdktest"
)

type echoArgs struct {
	Text string `json:"text"`
}

// TestStatelessToolsParseOnDemand: in a stateless Env a plain tool never
// makes the SDK parse the task (a code task's tests can be megabytes); a
// RolloutTool gets its rollout, built from the call's task, and can finish.
func TestStatelessToolsParseOnDemand(t *testing.T) {
	var parses atomic.Int64
	type task struct{ Word string }
	env := &sdk.Env[struct{}, task, struct{}]{
		Name: "t", Version: "0",
		Tools: []sdk.Tool{
			sdk.NewTool("echo", "Echo.", func(_ context.Context, _ sdk.ToolContext, a echoArgs) (sdk.ToolResult, error) {
				return sdk.ToolResult{Output: a.Text}, nil
			}),
			sdk.RolloutTool("say", "Say the word and finish.", func(_ context.Context, r *sdk.Rollout[struct{}, task, struct{}], _ struct{}) (string, error) {
				r.Finish(r.Task.Word)
				return r.Task.Word, nil
			}),
		},
		ParseTask: func(raw json.RawMessage) (task, error) {
			parses.Add(1)
			var tk task
			return tk, json.Unmarshal(raw, &tk)
		},
		Episode: func(context.Context, *sdk.Rollout[struct{}, task, struct{}]) (*sdk.Episode, error) {
			return &sdk.Episode{Messages: sdk.Chat("s", "u")}, nil
		},
		Score: func(context.Context, *sdk.Rollout[struct{}, task, struct{}], sdk.EvaluateRequest) (*sdk.Score, error) {
			return &sdk.Score{}, nil
		},
	}
	h := sdktest.Start(t, env)
	ctx := context.Background()
	tk := json.RawMessage(`{"Word": "hi"}`)
	call := func(name, args string) *pb.CallToolResponse {
		r, err := h.Client.CallTool(ctx, &pb.CallToolRequest{RolloutId: "r", TaskJson: tk, Call: &pb.ToolCall{Name: name, ArgumentsJson: []byte(args)}})
		if err != nil || len(r.Diagnostics) > 0 {
			t.Fatalf("%s: %v %v", name, err, r.GetDiagnostics())
		}
		return r
	}
	if r := call("echo", `{"text": "x"}`); r.Output != "x" || parses.Load() != 0 {
		t.Fatalf("echo: %+v, %d parses", r, parses.Load())
	}
	if r := call("say", `{}`); r.Output != "hi" || !r.Done || r.FinalResponse != "hi" || parses.Load() != 1 {
		t.Fatalf("say: %+v, %d parses", r, parses.Load())
	}
	r, err := h.Client.CallTool(ctx, &pb.CallToolRequest{RolloutId: "r", TaskJson: []byte(`{"Word": 1}`), Call: &pb.ToolCall{Name: "say", ArgumentsJson: []byte(`{}`)}})
	if err != nil || len(r.Diagnostics) != 1 || r.Diagnostics[0].Code != sdk.CodeInvalidTask {
		t.Fatalf("a bad task: %v %v", err, r)
	}
}

// TestEpisodeByTask: an Env whose episode depends on the task alone
// declares it (the host then prepares a group's task once) and its Episode
// cannot see the rollout it is prepared for; one with state of its own
// never declares it.
func TestEpisodeByTask(t *testing.T) {
	type task struct{ Word string }
	for _, c := range []struct {
		name    string
		byTask  bool
		state   bool
		wantCap bool
		wantID  string
	}{
		{"declared", true, false, true, ""},
		{"not declared", false, false, false, "r7"},
		{"declared with state", true, true, false, "r7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var seen atomic.Value
			episode := func(id string) (*sdk.Episode, error) {
				seen.Store(id)
				return &sdk.Episode{Messages: sdk.Chat("s", "u")}, nil
			}
			score := &sdk.Score{}
			var d sdk.Domain
			if c.state {
				d = &sdk.Env[struct{}, task, struct{ N int }]{Name: "t", Version: "0", EpisodeByTask: c.byTask,
					Episode: func(_ context.Context, r *sdk.Rollout[struct{}, task, struct{ N int }]) (*sdk.Episode, error) {
						return episode(r.ID)
					},
					Score: func(context.Context, *sdk.Rollout[struct{}, task, struct{ N int }], sdk.EvaluateRequest) (*sdk.Score, error) {
						return score, nil
					}}
			} else {
				d = &sdk.Env[struct{}, task, struct{}]{Name: "t", Version: "0", EpisodeByTask: c.byTask,
					Episode: func(_ context.Context, r *sdk.Rollout[struct{}, task, struct{}]) (*sdk.Episode, error) {
						return episode(r.ID)
					},
					Score: func(context.Context, *sdk.Rollout[struct{}, task, struct{}], sdk.EvaluateRequest) (*sdk.Score, error) {
						return score, nil
					}}
			}
			h := sdktest.Start(t, d)
			info, err := h.Client.GetInfo(context.Background(), &pb.GetInfoRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(info.Capabilities, sdk.CapTaskPrepare); got != c.wantCap {
				t.Fatalf("capabilities %v", info.Capabilities)
			}
			resp, err := h.Client.Prepare(context.Background(), &pb.PrepareRequest{RolloutId: "r7", TaskJson: []byte(`{"Word":"hi"}`)})
			if err != nil || len(resp.Diagnostics) > 0 {
				t.Fatalf("prepare: %v %v", err, resp.GetDiagnostics())
			}
			if id := seen.Load(); id != c.wantID {
				t.Fatalf("Episode saw rollout %q, want %q", id, c.wantID)
			}
		})
	}
}
