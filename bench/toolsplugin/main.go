// Command toolsplugin serves the standard tools for the benchmarks: a real
// plugin process whose bash tool goes back to the host's sandbox services.
package main

import (
	"context"
	"encoding/json"

	"github.com/prorl/prorl/sdk"
	"github.com/prorl/prorl/sdk/tools"
)

type domain struct{ t []sdk.Tool }

func (d domain) Info() sdk.Info                                                { return sdk.Info{Name: "tools", Version: "0", Tools: d.t} }
func (domain) Configure(context.Context, json.RawMessage, sdk.Sandboxes) error { return nil }
func (domain) Prepare(context.Context, sdk.PrepareRequest) (*sdk.Episode, error) {
	return &sdk.Episode{Messages: []sdk.Message{{Role: "user", Content: "x"}}, Sandbox: &sdk.SandboxSpec{}}, nil
}
func (domain) Evaluate(context.Context, sdk.EvaluateRequest) (*sdk.Score, error) {
	return &sdk.Score{}, nil
}

func main() {
	t, err := tools.Standard("bash", "python", "str_replace_editor", "finish")
	if err != nil {
		panic(err)
	}
	sdk.Serve(domain{t})
}
