package sdk

import (
	"context"

	"github.com/hashicorp/go-hclog"
)

type logKey struct{}

// Log is the logger of the call ctx belongs to (Prepare, Setup, a tool
// call, Evaluate, Release): its lines reach the host's log under the
// plugin's name with the rollout id, at the level the host runs at.
func Log(ctx context.Context) hclog.Logger {
	if l, ok := ctx.Value(logKey{}).(hclog.Logger); ok {
		return l
	}
	return hclog.NewNullLogger()
}

func withLog(ctx context.Context, l hclog.Logger, rollout string) context.Context {
	if l == nil {
		return ctx
	}
	if rollout != "" {
		l = l.With("rollout", rollout)
	}
	return context.WithValue(ctx, logKey{}, l)
}
