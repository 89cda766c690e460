package sdk_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/prorl/prorl/sdk"
	pb "github.com/prorl/prorl/sdk/proto"
	"github.com/prorl/prorl/sdk/sdktest"
)

// broken is a domain that returns nothing, or panics, where it should score.
type broken struct{ panics bool }

func (broken) Info() sdk.Info                                                  { return sdk.Info{Name: "broken", Version: "0"} }
func (broken) Configure(context.Context, json.RawMessage, sdk.Sandboxes) error { return nil }
func (b broken) Prepare(context.Context, sdk.PrepareRequest) (*sdk.Episode, error) {
	if b.panics {
		panic("boom")
	}
	return nil, nil
}
func (b broken) Evaluate(context.Context, sdk.EvaluateRequest) (*sdk.Score, error) {
	if b.panics {
		var sc *sdk.Score
		_ = sc.Reward // a nil dereference, as a buggy domain makes one
	}
	return nil, nil
}

// TestNothingReturned: nil, nil from a domain, or a panic, is a clear
// internal diagnostic naming the method and no field, never a crash.
func TestNothingReturned(t *testing.T) {
	for _, panics := range []bool{false, true} {
		h := sdktest.Start(t, broken{panics: panics})
		ctx := context.Background()
		if _, err := h.Configure(ctx, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		pr, err := h.Client.Prepare(ctx, &pb.PrepareRequest{RolloutId: "r", TaskJson: []byte(`{}`)})
		check(t, "Prepare", pr.GetDiagnostics(), err)
		er, err := h.Client.Evaluate(ctx, &pb.EvaluateRequest{RolloutId: "r", TaskJson: []byte(`{}`)})
		check(t, "Evaluate", er.GetDiagnostics(), err)
	}
}

func check(t *testing.T, method string, d []*pb.Diagnostic, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: transport error %v", method, err)
	}
	if len(d) != 1 || d[0].Code != sdk.CodeInternal || d[0].Field != "" || !strings.Contains(d[0].Message, method) {
		t.Fatalf("%s: %+v", method, d)
	}
}
