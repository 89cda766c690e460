package sdk_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prorl/prorl/sdk"
	"github.com/prorl/prorl/sdk/sdktest"
	"github.com/prorl/prorl/sdk/tools"
)

// The package documentation's example (doc.go), compiled and played over the real
// gRPC path: a right answer scores 1, a wrong one 0.
type qaConfig struct {
	MaxTurns int `json:"max_turns"`
}
type qaTask struct{ Question, Answer string }

var qaDomain = &sdk.Env[qaConfig, qaTask, struct{}]{
	Name: "qa", Version: "0.1.0", Config: qaConfig{MaxTurns: 4},
	Tools: []sdk.Tool{tools.Finish()},
	Episode: func(_ context.Context, r *sdk.Rollout[qaConfig, qaTask, struct{}]) (*sdk.Episode, error) {
		return &sdk.Episode{Messages: sdk.Chat("Answer briefly.", r.Task.Question),
			Limits: sdk.Limits{MaxTurns: r.Config.MaxTurns}}, nil
	},
	Score: func(_ context.Context, r *sdk.Rollout[qaConfig, qaTask, struct{}], req sdk.EvaluateRequest) (*sdk.Score, error) {
		right := strings.TrimSpace(req.Response()) == r.Task.Answer
		return &sdk.Score{Reward: sdk.Flag(right), Resolved: right}, nil
	},
}

func TestDocExample(t *testing.T) {
	h := sdktest.Start(t, qaDomain)
	task := []byte(`{"Question": "What is 17 + 25?", "Answer": "42"}`)
	for final, want := range map[string]float64{"42": 1, "43": 0} {
		p, err := sdktest.Play(context.Background(), h, "r-"+final, task, nil, final)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Score.GetReward(); got != want {
			t.Fatalf("%q scored %v, want %v", final, got, want)
		}
	}
}
