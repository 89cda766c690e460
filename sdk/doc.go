// Package sdk is what a prorl task-domain plugin imports: a domain is a
// value of Env — its config, task and per-rollout state as Go types, its
// tools, how a task becomes an episode (the first messages and limits) and
// how a finished episode is scored — passed to Serve from main:
//
//	type Config struct{ MaxTurns int `json:"max_turns"` }
//	type Task struct{ Question, Answer string }
//
//	var Domain = &sdk.Env[Config, Task, struct{}]{
//		Name: "qa", Version: "0.1.0", Config: Config{MaxTurns: 4},
//		Tools: []sdk.Tool{tools.Finish()},
//		Episode: func(_ context.Context, r *sdk.Rollout[Config, Task, struct{}]) (*sdk.Episode, error) {
//			return &sdk.Episode{Messages: sdk.Chat("Answer briefly.", r.Task.Question),
//				Limits: sdk.Limits{MaxTurns: r.Config.MaxTurns}}, nil
//		},
//		Score: func(_ context.Context, r *sdk.Rollout[Config, Task, struct{}], req sdk.EvaluateRequest) (*sdk.Score, error) {
//			right := strings.TrimSpace(req.Response()) == r.Task.Answer
//			return &sdk.Score{Reward: sdk.Flag(right), Resolved: right}, nil
//		},
//	}
//
//	func main() { sdk.Serve(Domain) }
//
// Env is the recommended way in: NewTool derives a tool's JSON Schema from
// its argument type, package tools has the standard ones (bash, python,
// str_replace_editor, think, finish), and sdktest plays a domain against
// the real gRPC path and runs the conformance suite every domain must
// pass. Domain is the lower-level interface Env implements, for a domain
// that needs full control of Prepare, CallTool and Evaluate. Serve hides
// go-plugin, gRPC, logging and panic recovery. The package never imports
// the host (core/): the wire contract is sdk/proto. Walk-through:
// docs/authoring.md; examples: sdk/examples.
package sdk
