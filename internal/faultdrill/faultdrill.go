// Package faultdrill runs a GRPO step against a live host while faults
// are injected around it, and counts what a trainer would get: groups
// returned whole, fake zeros, lost and duplicated samples, and what the
// retries cost. The host, its simulator and the faults are the caller's
// (a sandbox fault rate, a simulator's error rates, a plugin killed); the
// drill submits, watches and counts. e2e runs a short one, bench a long one.
package faultdrill

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/prorl/prorl/core/trajectory"
)

// Drill is one step.
type Drill struct {
	Host         string // the host's base URL
	Groups, Size int
	// Task is group g's task; every answer it gets right earns reward 1
	// (the simulator plays the right way only), so a trainable sample
	// with a lower reward is a failure scored as a zero.
	Task func(g int) map[string]any
	// Submit adds keys to every submission (retry_budget, ...).
	Submit map[string]any
	// Fault, when set, is called once Turns rollouts are in the run
	// stage (a plugin killed, a backend removed).
	Fault func() error
	// Turns is how many turns every trainable sample takes (the
	// simulator's script): a sample with more carries a failed attempt's
	// tokens. 0: not checked.
	Turns int
}

// Report is what the step returned.
type Report struct {
	Groups, Whole, Samples, Trainable int
	// FakeZeros are trainable samples with a reward below the one the
	// right answer earns; Lost submitted samples with no result;
	// Duplicates results seen twice; Leaked trainable samples with more
	// turns than their script (a failed attempt's tokens in them).
	FakeZeros, Lost, Duplicates, Leaked int
	// Retried samples took more than one attempt; Attempts is the extra
	// attempts they took, RetryTokens what those generated.
	Retried, Attempts, RetryTokens int
	// Tokens is what the returned samples generated.
	Tokens int
	// Reasons counts the failed attempts and the non-trainable results by reason.
	Reasons  map[string]int
	Makespan time.Duration
}

// WholeShare is the share of groups returned with every sample trainable.
func (r Report) WholeShare() float64 {
	if r.Groups == 0 {
		return 0
	}
	return float64(r.Whole) / float64(r.Groups)
}

// String is the report on one line.
func (r Report) String() string {
	keys := make([]string, 0, len(r.Reasons))
	for k := range r.Reasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var rs []string
	for _, k := range keys {
		rs = append(rs, fmt.Sprintf("%s=%d", k, r.Reasons[k]))
	}
	return fmt.Sprintf("groups %d, whole %d (%.1f%%); samples %d, trainable %d; fake zeros %d, lost %d, duplicates %d, leaked %d; "+
		"retried %d (+%d attempts, %d tokens = %.1f%% of %d); failures {%s}; makespan %s",
		r.Groups, r.Whole, 100*r.WholeShare(), r.Samples, r.Trainable, r.FakeZeros, r.Lost, r.Duplicates, r.Leaked,
		r.Retried, r.Attempts, r.RetryTokens, 100*float64(r.RetryTokens)/float64(max(1, r.Tokens)), r.Tokens, strings.Join(rs, " "), r.Makespan.Round(time.Millisecond))
}

// Run submits the step, injects the fault and collects every result.
func Run(ctx context.Context, d Drill) (Report, error) {
	rep := Report{Groups: d.Groups, Reasons: map[string]int{}}
	var since uint64 // results of earlier work are read past and skipped
	t0 := time.Now()
	group := map[string]int{} // rollout id -> group
	for g := range d.Groups {
		body := map[string]any{"task": d.Task(g), "n": d.Size}
		for k, v := range d.Submit {
			body[k] = v
		}
		var sub struct {
			RolloutIDs []string `json:"rollout_ids"`
		}
		if err := post(ctx, d.Host+"/v1/rollouts", body, &sub); err != nil {
			return rep, fmt.Errorf("submit group %d: %w", g, err)
		}
		for _, id := range sub.RolloutIDs {
			group[id] = g
		}
	}
	if d.Fault != nil {
		if err := waitRunning(ctx, d.Host, d.Size); err != nil {
			return rep, err
		}
		if err := d.Fault(); err != nil {
			return rep, fmt.Errorf("fault: %w", err)
		}
	}
	seen := map[string]*trajectory.Result{}
	for len(seen) < len(group) {
		var page struct {
			Results []*trajectory.Result `json:"results"`
			Next    uint64               `json:"next_since"`
		}
		if err := get(ctx, fmt.Sprintf("%s/v1/results?since=%d&wait=10s", d.Host, since), &page); err != nil {
			return rep, fmt.Errorf("%d of %d results after %s (%w); live: %s", len(seen), len(group), time.Since(t0).Round(time.Second), err, live(d.Host))
		}
		for _, r := range page.Results {
			if _, ok := group[r.ID]; !ok {
				continue
			}
			if seen[r.ID] != nil {
				rep.Duplicates++
				continue
			}
			seen[r.ID] = r
		}
		since = page.Next
		if ctx.Err() != nil {
			break
		}
	}
	rep.Makespan = time.Since(t0)
	trainable := make([]int, d.Groups)
	for id, g := range group {
		r := seen[id]
		if r == nil {
			rep.Lost++
			continue
		}
		rep.Samples++
		rep.Tokens += r.GeneratedTokens()
		if len(r.Attempts) > 0 {
			rep.Retried++
			rep.Attempts += len(r.Attempts)
		}
		for _, a := range r.Attempts {
			rep.RetryTokens += a.GeneratedTokens
			rep.Reasons["attempt:"+a.Reason]++
			if os.Getenv("FAULTDRILL_DEBUG") != "" {
				fmt.Fprintln(os.Stderr, "ATTEMPT", a.Stage, a.Reason, a.Message)
			}
		}
		if r.Sample != trajectory.SampleTrainable {
			reason := r.Sample
			if r.Failure != nil {
				reason = r.Failure.Reason
			}
			rep.Reasons["result:"+reason]++
			if os.Getenv("FAULTDRILL_DEBUG") != "" && r.Failure != nil {
				fmt.Fprintln(os.Stderr, "RESULT", r.Failure.Stage, r.Failure.Reason, r.Failure.Message)
			}
			continue
		}
		rep.Trainable++
		trainable[g]++
		if r.Reward < 1 {
			rep.FakeZeros++
		}
		if d.Turns > 0 && len(r.Turns) != d.Turns {
			rep.Leaked++
		}
	}
	for _, n := range trainable {
		if n == d.Size {
			rep.Whole++
		}
	}
	return rep, ctx.Err()
}

// live lists the host's live rollouts, for a drill that did not end.
func live(host string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var l struct {
		Rollouts []json.RawMessage `json:"rollouts"`
	}
	if err := get(ctx, host+"/v1/rollouts", &l); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for i, r := range l.Rollouts {
		if i == 10 {
			fmt.Fprintf(&b, " … %d in all", len(l.Rollouts))
			break
		}
		b.Write(r)
		b.WriteByte(' ')
	}
	return b.String()
}

// waitRunning waits until n rollouts are in the run stage.
func waitRunning(ctx context.Context, host string, n int) error {
	for {
		var l struct {
			Rollouts []json.RawMessage `json:"rollouts"`
		}
		if err := get(ctx, host+"/v1/rollouts?status=running&stage=run", &l); err != nil {
			return err
		}
		if len(l.Rollouts) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d rollouts in the run stage: %w", n, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func get(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	return do(req, out)
}

func post(ctx context.Context, url string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return do(req, out)
}

func do(req *http.Request, out any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %.300s", req.Method, req.URL.Path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}
