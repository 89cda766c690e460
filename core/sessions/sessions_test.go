package sessions

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/agent"
	"github.com/prorl/prorl/core/gateway"
	"github.com/prorl/prorl/core/gateway/session"
	"github.com/prorl/prorl/core/trajectory"
)

// TestSlot: how a session ends, and what its outcome says, for each way
// an agent (outside, or a harness the host runs) can end it.
func TestSlot(t *testing.T) {
	reward := 0.5
	harness := func(code float64, err error) AgentRun {
		return func(context.Context) (map[string]float64, error) {
			return map[string]float64{"harness_exit_code": code}, err
		}
	}
	cases := []struct {
		name        string
		closeBefore *Close // closed before it is live
		closeAfter  *Close // closed once live
		run         AgentRun
		cancel      bool
		wantReason  string // the error's failure reason; "" for none
		wantCtx     bool
		wantReward  *float64
		wantMetric  string
	}{
		{name: "closed before live", closeBefore: &Close{Reward: &reward}, wantReward: &reward},
		{name: "closed once live", closeAfter: &Close{FinalResponse: "42"}},
		{name: "cancelled", cancel: true, wantCtx: true},
		{name: "harness exits 0 without calls", run: harness(0, nil), wantMetric: "harness_exit_code"},
		{name: "harness fails without calling the policy", run: harness(1, nil), wantReason: trajectory.ReasonSandboxFailed, wantMetric: "harness_exit_code"},
		{name: "harness cannot start", run: harness(0, &agent.Error{Reason: trajectory.ReasonSandboxFailed, Err: errors.New("no sandbox")}), wantReason: trajectory.ReasonSandboxFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gw := gateway.New(hclog.NewNullLogger(), 0)
			s := NewSlot()
			if tc.closeBefore != nil {
				if err := s.Close(*tc.closeBefore); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				o   *Outcome
				err error
			}
			done := make(chan result, 1)
			go func() {
				o, err := s.Run(ctx, gw, session.Config{ID: "r-1", Key: "k"}, tc.run, "h")
				done <- result{o, err}
			}()
			select {
			case <-s.Live():
			case <-time.After(10 * time.Second):
				t.Fatal("never live")
			}
			switch {
			case tc.closeAfter != nil:
				if err := s.Close(*tc.closeAfter); err != nil {
					t.Fatal(err)
				}
			case tc.cancel:
				cancel()
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the session did not end")
			}
			var ae *agent.Error
			switch {
			case tc.wantCtx:
				if !errors.Is(r.err, context.Canceled) {
					t.Errorf("error %v, want the context's", r.err)
				}
			case tc.wantReason != "":
				if !errors.As(r.err, &ae) || ae.Reason != tc.wantReason {
					t.Errorf("error %v, want reason %s", r.err, tc.wantReason)
				}
			case r.err != nil:
				t.Errorf("error %v", r.err)
			}
			if r.o == nil || r.o.Outcome == nil {
				t.Fatal("no outcome")
			}
			if tc.wantReward != nil && (r.o.Close == nil || r.o.Close.Reward == nil || *r.o.Close.Reward != *tc.wantReward) {
				t.Errorf("close %+v, want reward %v", r.o.Close, *tc.wantReward)
			}
			if tc.closeAfter != nil && (r.o.Close == nil || r.o.Close.FinalResponse != tc.closeAfter.FinalResponse) {
				t.Errorf("close %+v", r.o.Close)
			}
			if tc.run != nil && r.o.Close == nil {
				t.Error("a harness's end did not close the session for its domain to score")
			}
			if _, ok := r.o.Metrics[tc.wantMetric]; tc.wantMetric != "" && !ok {
				t.Errorf("metrics %v lack %s", r.o.Metrics, tc.wantMetric)
			}
			if closed := tc.closeBefore != nil || tc.closeAfter != nil || tc.run != nil; closed {
				if err := s.Close(Close{}); !errors.Is(err, ErrClosed) {
					t.Errorf("a close after the session was closed: %v, want ErrClosed", err)
				}
			}
		})
	}
}

func TestMaxAuxRequests(t *testing.T) {
	for _, c := range []struct{ configured, turns, want int }{{0, 10, 72}, {5, 10, 5}, {0, 0, 32}} {
		if got := MaxAuxRequests(c.configured, c.turns); got != c.want {
			t.Errorf("MaxAuxRequests(%d, %d) = %d, want %d", c.configured, c.turns, got, c.want)
		}
	}
}
