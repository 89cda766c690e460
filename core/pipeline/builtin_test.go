package pipeline

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/sdk"
	pb "github.com/prorl/prorl/sdk/proto"
	"github.com/prorl/prorl/sdk/sdktest"
	"github.com/prorl/prorl/sdk/tools"
)

type finishDomain struct{}

func (finishDomain) Info() sdk.Info {
	return sdk.Info{Name: "finish", Version: "0", Tools: []sdk.Tool{tools.Finish()}}
}
func (finishDomain) Configure(context.Context, json.RawMessage, sdk.Sandboxes) error { return nil }
func (finishDomain) Prepare(context.Context, sdk.PrepareRequest) (*sdk.Episode, error) {
	return &sdk.Episode{Messages: []sdk.Message{{Role: "user", Content: "x"}}}, nil
}
func (finishDomain) Evaluate(context.Context, sdk.EvaluateRequest) (*sdk.Score, error) {
	return &sdk.Score{}, nil
}

// finishArgs are arguments a model sends the finish tool, odd ones included.
var finishArgs = []string{
	``, `{}`, ` {"message":"The answer is \\boxed{42}."} `, `{"message":""}`, `{"message":"a","task_completed":true}`,
	`{"message":"a","task_completed":"partial"}`, `{"message":5}`, `{"message":null}`, `{"msg":"a"}`, `[]`, `"a"`, `null`,
	`{"message":"a"} {"message":"b"}`, `{"message":"a",}`, `{"message":"\u00e9\ud83d\ude00"}`, `{"message":"a","message":"b"}`,
	`{"MESSAGE":"case"}`, `{"message":"x","extra":{"deep":[1,2]}}`, `not json`, `{"message":"` + string(rune(0x7f)) + `"}`,
}

// TestBuiltinFinishAgainstSDK: the host answers a builtin finish call as the
// SDK's tools.Finish answers it through the SDK's own gRPC server: the same
// observation, error text, end and final response, for every argument.
func TestBuiltinFinishAgainstSDK(t *testing.T) {
	h := sdktest.Start(t, finishDomain{})
	ctx := context.Background()
	info, err := h.Client.GetInfo(ctx, &pb.GetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var tools []pluginhost.ToolSpec
	for _, t := range info.Tools {
		tools = append(tools, pluginhost.ToolSpec{Name: t.Name, Builtin: t.Builtin})
	}
	if got := finishToolOf(&pluginhost.Info{Tools: tools}); got != "finish" {
		t.Fatalf("the SDK's finish tool is not marked builtin: %q", got)
	}
	check := func(t *testing.T, args string) {
		resp, err := h.Client.CallTool(ctx, &pb.CallToolRequest{RolloutId: "r", TaskJson: []byte(`{}`), Call: &pb.ToolCall{Id: "c", Name: "finish", ArgumentsJson: []byte(args)}})
		if err != nil || len(resp.Diagnostics) > 0 {
			t.Fatalf("%q: %v %v", args, err, resp.GetDiagnostics())
		}
		got, err := builtinFinish(ctx, json.RawMessage(args))
		if err != nil || got.Output != resp.Output || got.Done != resp.Done || got.FinalResponse != resp.FinalResponse || got.IsError != resp.IsError {
			t.Fatalf("%q: host %+v, SDK %+v", args, got, resp)
		}
	}
	for _, a := range finishArgs {
		check(t, a)
	}
}

// FuzzBuiltinFinish: any arguments, the same answer as the SDK's.
func FuzzBuiltinFinish(f *testing.F) {
	for _, a := range finishArgs {
		f.Add(a)
	}
	h := sdktest.Start(f, finishDomain{})
	f.Fuzz(func(t *testing.T, args string) {
		resp, err := h.Client.CallTool(context.Background(), &pb.CallToolRequest{RolloutId: "r", TaskJson: []byte(`{}`), Call: &pb.ToolCall{Id: "c", Name: "finish", ArgumentsJson: []byte(args)}})
		if err != nil || len(resp.Diagnostics) > 0 {
			t.Fatalf("%q: %v %v", args, err, resp.GetDiagnostics())
		}
		got, err := builtinFinish(context.Background(), json.RawMessage(args))
		if err != nil || got.Output != resp.Output || got.Done != resp.Done || got.FinalResponse != resp.FinalResponse || got.IsError != resp.IsError {
			t.Fatalf("%q: host %+v, SDK %+v", args, got, resp)
		}
	})
}
