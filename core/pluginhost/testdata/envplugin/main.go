// Command envplugin is a test plugin whose "env" tool reports the process
// environment, to prove the host passes none of its own.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/prorl/prorl/sdk"
	"github.com/prorl/prorl/sdk/tools"
)

type domain struct{}

func (domain) Info() sdk.Info {
	return sdk.Info{Name: "envtest", Version: "0.0.1", DataSources: []string{"envtest", "envx*"}, Tools: []sdk.Tool{
		tools.Finish(),
		sdk.FuncTool{
			S: sdk.ToolSpec{Name: "env", Description: "report env", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
			F: func(ctx context.Context, _ sdk.ToolContext, _ json.RawMessage) (sdk.ToolResult, error) {
				sdk.Log(ctx).Info("env tool called")
				fmt.Fprintln(os.Stderr, "a plain line on stderr")
				return sdk.ToolResult{Output: strings.Join(os.Environ(), "\n")}, nil
			},
		},
	}}
}
func (domain) Configure(context.Context, json.RawMessage, sdk.Sandboxes) error { return nil }
func (domain) Prepare(ctx context.Context, r sdk.PrepareRequest) (*sdk.Episode, error) {
	if string(r.Task) == `{"hang":true}` { // held until the host gives up or kills the process
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &sdk.Episode{Messages: []sdk.Message{{Role: "user", Content: "hi"}}}, nil
}
func (domain) Evaluate(context.Context, sdk.EvaluateRequest) (*sdk.Score, error) {
	return &sdk.Score{}, nil
}

func main() { sdk.Serve(domain{}) }
