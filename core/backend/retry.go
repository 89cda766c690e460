package backend

import (
	"context"
	"errors"
	"net"
	"time"
)

// Retrying retries a failed generation on the same backend with backoff:
// connection errors, 5xx and timeouts are usually passing (a restarting
// server, a dropped connection); a 4xx is the request's fault and is not
// retried. The rollout's tokens are unaffected: the same prompt is sent again.
type Retrying struct {
	Client
	Attempts int           // total tries, at least 1
	Backoff  time.Duration // first wait; doubles each try
	// OnRetry observes each retried failure (metrics, logs).
	OnRetry func(err error)
}

// Retriable reports whether a backend error is worth another try.
func Retriable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status >= 500 || se.Status == 429
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// Generate implements Client.
func (r *Retrying) Generate(ctx context.Context, req GenerateRequest) (*GenerateResult, error) {
	wait := r.Backoff
	var err error
	for try := 1; ; try++ {
		var res *GenerateResult
		res, err = r.Client.Generate(ctx, req)
		if err == nil || try >= r.Attempts || !Retriable(err) || ctx.Err() != nil {
			return res, err
		}
		if r.OnRetry != nil {
			r.OnRetry(err)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, err
		}
		wait *= 2
	}
}
