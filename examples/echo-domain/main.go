// Command echo-domain is the smallest complete prorl task domain: the README
// walks through it, and its test runs the SDK conformance suite against it.
package main

import (
	"context"
	"encoding/json"

	"github.com/prorl/prorl/sdk"
	"github.com/prorl/prorl/sdk/tools"
)

type echo struct{}

type task struct {
	Word string `json:"word"`
}

func (echo) Info() sdk.Info {
	return sdk.Info{Name: "echo", Version: "0.1.0", DataSources: []string{"echo"},
		Tools: []sdk.Tool{tools.Think(), tools.Finish()}}
}

func (echo) Configure(context.Context, json.RawMessage, sdk.Sandboxes) error { return nil }

func (echo) Prepare(_ context.Context, r sdk.PrepareRequest) (*sdk.Episode, error) {
	var t task
	if err := json.Unmarshal(r.Task, &t); err != nil || t.Word == "" {
		return nil, sdk.InvalidTask("word", "required")
	}
	return &sdk.Episode{Messages: []sdk.Message{{Role: "user", Content: "Say " + t.Word + ", then call finish."}}}, nil
}

func (echo) Evaluate(_ context.Context, r sdk.EvaluateRequest) (*sdk.Score, error) {
	var t task
	if err := json.Unmarshal(r.Task, &t); err != nil || t.Word == "" {
		return nil, sdk.InvalidTask("word", "required")
	}
	if r.FinalResponse == t.Word {
		return &sdk.Score{Reward: 1, Resolved: true}, nil
	}
	return &sdk.Score{}, nil
}

func main() { sdk.Serve(echo{}) }
