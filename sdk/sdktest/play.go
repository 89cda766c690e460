package sdktest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	pb "github.com/prorl/prorl/sdk/proto"
)

// Call is a tool call to play: Args is marshalled to JSON.
type Call struct {
	Tool string `json:"tool"`
	Args any    `json:"args"`
}

// Played is what a played rollout saw.
type Played struct {
	Episode *pb.PrepareResponse
	Outputs []*pb.CallToolResponse
	Final   string
	Score   *pb.EvaluateResponse
}

// Play runs one rollout as the host does, without a model: Prepare,
// Setup, the scripted tool calls (stopping at one that ends the episode),
// Evaluate of final (or of the finishing call's answer when final is
// empty) and Release. A diagnostic from the domain is returned as an error.
func Play(ctx context.Context, h *Harness, rolloutID string, task json.RawMessage, calls []Call, final string) (*Played, error) {
	p := &Played{Final: final}
	defer func() { _, _ = h.Client.Release(ctx, &pb.ReleaseRequest{RolloutId: rolloutID}) }()
	var err error
	p.Episode, err = h.Client.Prepare(ctx, &pb.PrepareRequest{RolloutId: rolloutID, TaskJson: task})
	if err := failed("prepare", err, p.Episode.GetDiagnostics()); err != nil {
		return p, err
	}
	sandbox := ""
	if p.Episode.Sandbox != nil {
		sandbox = rolloutID
	}
	r, err := h.Client.Setup(ctx, &pb.SetupRequest{RolloutId: rolloutID, TaskJson: task, SandboxId: sandbox})
	if err := failed("setup", err, r.GetDiagnostics()); err != nil {
		return p, err
	}
	for _, c := range calls {
		args, err := json.Marshal(c.Args)
		if err != nil {
			return p, err
		}
		r, err := h.Client.CallTool(ctx, &pb.CallToolRequest{RolloutId: rolloutID, TaskJson: task, SandboxId: sandbox, Call: &pb.ToolCall{Name: c.Tool, ArgumentsJson: args}})
		if err := failed("tool "+c.Tool, err, r.GetDiagnostics()); err != nil {
			return p, err
		}
		p.Outputs = append(p.Outputs, r)
		if r.Done {
			if p.Final == "" {
				p.Final = r.FinalResponse
			}
			break
		}
	}
	p.Score, err = h.Client.Evaluate(ctx, &pb.EvaluateRequest{RolloutId: rolloutID, TaskJson: task, SandboxId: sandbox, FinalResponse: p.Final, EndReason: "finish"})
	return p, failed("evaluate", err, p.Score.GetDiagnostics())
}

// failed is a call's transport error or the domain's first diagnostic.
func failed(op string, err error, d []*pb.Diagnostic) error {
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", op, err)
	case len(d) > 0:
		return fmt.Errorf("%s: %s: %s", op, d[0].Code, d[0].Message)
	}
	return nil
}

// AnswerCase is a final answer and the reward it must get; PlayCase is a
// played rollout (tool calls, then a final answer) and its reward.
// Tables of them live in a domain's testdata as JSON, so a domain and its
// twin in another language are held to the same cases.
type AnswerCase struct {
	Name   string  `json:"name"`
	Answer string  `json:"answer"`
	Reward float64 `json:"reward"`
}

// PlayCase: Final is evaluated when no call finished the episode.
type PlayCase struct {
	Name   string  `json:"name"`
	Calls  []Call  `json:"calls"`
	Final  string  `json:"final"`
	Reward float64 `json:"reward"`
}

// LoadCases reads a JSON table of cases.
func LoadCases[T any](t testing.TB, path string) []T {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	if err := json.Unmarshal(b, &out); err != nil || len(out) == 0 {
		t.Fatalf("%s: %d cases, %v", path, len(out), err)
	}
	return out
}
