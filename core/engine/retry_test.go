package engine

import (
	"context"
	"fmt"
	"testing"
	"time"
)

type flaky struct {
	Client
	errs  []error
	calls int
}

func (f *flaky) Generate(context.Context, GenerateRequest) (*GenerateResult, error) {
	f.calls++
	if f.calls <= len(f.errs) {
		return nil, f.errs[f.calls-1]
	}
	return &GenerateResult{IDs: []int{1}}, nil
}

func TestRetrying(t *testing.T) {
	e500 := &StatusError{Status: 500}
	e400 := &StatusError{Status: 400, Body: "bad"}
	refused := fmt.Errorf("dial: %w", &netErr{})
	tests := []struct {
		name    string
		errs    []error
		wantErr bool
		calls   int
	}{
		{"first try", nil, false, 1},
		{"5xx then ok", []error{e500, e500}, false, 3},
		{"refused then ok", []error{refused}, false, 2},
		{"gives up", []error{e500, e500, e500}, true, 3},
		{"4xx not retried", []error{e400}, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &flaky{errs: tt.errs}
			retried := 0
			r := &Retrying{Client: f, Attempts: 3, Backoff: time.Millisecond, OnRetry: func(error) { retried++ }}
			_, err := r.Generate(context.Background(), GenerateRequest{})
			if (err != nil) != tt.wantErr || f.calls != tt.calls || retried != f.calls-1 {
				t.Fatalf("err %v calls %d retried %d", err, f.calls, retried)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := &flaky{errs: []error{e500, e500}}
	if _, err := (&Retrying{Client: f, Attempts: 5, Backoff: time.Hour}).Generate(ctx, GenerateRequest{}); err == nil || f.calls != 1 {
		t.Fatalf("a cancelled rollout kept retrying: %v %d", err, f.calls)
	}
}

type netErr struct{}

func (netErr) Error() string   { return "connection refused" }
func (netErr) Timeout() bool   { return false }
func (netErr) Temporary() bool { return true }
