package pluginhost

import (
	"context"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/prorl/prorl/core/config"
	pb "github.com/prorl/prorl/sdk/proto"
)

// BenchmarkLoneCall: one call at a time (an eval stage with little
// concurrency), unary against a batch of one.
func BenchmarkLoneCall(b *testing.B) {
	m, err := Start(context.Background(), hclog.NewNullLogger(), map[string]*config.Plugin{"countdown": pcfg(countdown, "")}, nil, Options{Instance: "t", SocketDir: shortDir(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Stop()
	p, _ := m.Get("countdown")
	c, _ := p.Acquire(context.Background())
	bc := c.rpc.(*batchingClient)
	req := &pb.EvaluateRequest{RolloutId: "r", TaskJson: []byte(`{"nums":[1,2],"target":3}`), FinalResponse: "<answer>1 + 2</answer>"}
	ctx := context.Background()
	b.Run("unary", func(b *testing.B) {
		for b.Loop() {
			if _, err := bc.TaskDomainClient.Evaluate(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("batch-of-one", func(b *testing.B) {
		for b.Loop() {
			if _, err := bc.Evaluate(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
