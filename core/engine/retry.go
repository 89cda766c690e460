package engine

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
	if errors.Is(err, ErrNoChat) {
		return false // the caller renders and generates apart instead
	}
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
	var res *GenerateResult
	err := r.retry(ctx, func() (err error) { res, err = r.Client.Generate(ctx, req); return err })
	return res, err
}

// GenerateChat implements ChatGenerator when the client does.
func (r *Retrying) GenerateChat(ctx context.Context, req ChatRequest) ([]int, *GenerateResult, error) {
	cg, ok := r.Client.(ChatGenerator)
	if !ok {
		return nil, nil, ErrNoChat
	}
	var prompt []int
	var res *GenerateResult
	err := r.retry(ctx, func() (err error) { prompt, res, err = cg.GenerateChat(ctx, req); return err })
	return prompt, res, err
}

// retry calls call until it succeeds, fails for good, or runs out of tries.
func (r *Retrying) retry(ctx context.Context, call func() error) error {
	wait := r.Backoff
	for try := 1; ; try++ {
		err := call()
		if err == nil || try >= r.Attempts || !Retriable(err) || ctx.Err() != nil {
			return err
		}
		if r.OnRetry != nil {
			r.OnRetry(err)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return err
		}
		wait *= 2
	}
}
