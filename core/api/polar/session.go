package polar

import (
	"encoding/json"

	"github.com/prorl/prorl/core/trajectory"
)

// toPolarSession converts a result to Polar's SessionResult.
func toPolarSession(res *trajectory.Result, taskID string, node *string) PolarSession {
	st := "ERROR"
	switch res.Status {
	case trajectory.StatusCompleted, trajectory.StatusTruncated:
		st = "COMPLETED"
	case trajectory.StatusTimeout:
		st = "TIMEOUT"
	}
	var errMsg *string
	if f := res.Failure; f != nil && st != "COMPLETED" {
		m := f.Reason
		if f.Message != "" {
			m += ": " + f.Message
		}
		errMsg = &m
	}
	meta := map[string]any{}
	var rm struct {
		TaskMetadata map[string]any `json:"task_metadata"`
	}
	if json.Unmarshal(res.Metadata, &rm) == nil {
		for k, v := range rm.TaskMetadata {
			meta[k] = v
		}
	}
	if res.Failure != nil && res.Failure.Reason == trajectory.ReasonEarlyStopped {
		meta["early_stopped"] = true
	}
	// What prorl adds to a trace's record: earlier attempts (their
	// reasons) and a sample marked stale.
	if len(res.Attempts) > 0 {
		reasons := make([]string, len(res.Attempts))
		for i, a := range res.Attempts {
			reasons[i] = a.Reason
		}
		meta["retried_after"] = reasons
	}
	if res.Stale {
		meta["stale"] = true
	}
	tr := PolarTrajectory{Status: st, Error: errMsg, Traces: []PolarTrace{},
		Metadata: map[string]any{"rollout_id": res.ID, "group_id": res.GroupID, "sample_index": res.SampleIndex, "attempt": res.Attempt,
			"domain": res.Domain, "policy_version": res.PolicyVersion, "record_count": len(res.Turns), "metrics": res.Metrics}}
	finish := func(trace *PolarTrace, last bool) {
		if res.EndReason != "" {
			e := res.EndReason
			trace.FinishReason = &e
		}
		if st == "COMPLETED" && last {
			r := res.Reward
			trace.Reward = &r
		}
		if len(res.Info) > 0 && last {
			trace.Metadata["info"] = res.Info
		}
	}
	if len(res.Traces) > 0 {
		// A gateway session: its traces as they are; the reward on the last,
		// as Polar's trajectory builder puts it.
		for i, gt := range res.Traces {
			trace := PolarTrace{PromptIDs: gt.PromptIDs, ResponseIDs: gt.ResponseIDs, LossMask: gt.LossMask, ResponseLogprobs: gt.ResponseLogprobs,
				PromptMessages: gt.PromptMessages, ResponseMessages: gt.ResponseMessages, Tools: orEmpty(gt.Tools),
				Metadata: map[string]any{"resolved": res.Resolved, "calls": gt.Calls}}
			finish(&trace, i == len(res.Traces)-1)
			if f := gt.FinishReason; f != "" {
				trace.FinishReason = &f
			}
			tr.Traces = append(tr.Traces, trace)
		}
	} else if tk := res.Tokens; tk.PromptLen > 0 && tk.PromptLen < len(tk.IDs) && len(tk.LossMask) == len(tk.IDs) && len(tk.Logprobs) == len(tk.IDs) {
		pl := tk.PromptLen
		first := len(res.Messages)
		for i, m := range res.Messages {
			if m.Role == "assistant" {
				first = i
				break
			}
		}
		trace := PolarTrace{PromptIDs: tk.IDs[:pl], ResponseIDs: tk.IDs[pl:], LossMask: tk.LossMask[pl:], ResponseLogprobs: tk.Logprobs[pl:],
			PromptMessages: res.Messages[:first], ResponseMessages: res.Messages[first:], Tools: orEmpty(res.Tools),
			Metadata: map[string]any{"resolved": res.Resolved, "turns": len(res.Turns)}}
		finish(&trace, true)
		tr.Traces = append(tr.Traces, trace)
	}
	t := res.Timing
	return PolarSession{SessionID: res.ID, TaskID: taskID, Status: st, Trajectory: tr, NodeID: node, Error: errMsg, Metadata: meta,
		Timing: PolarTiming{RegisterToInitQueueMS: t.QueuedMS, InitMS: t.InitMS, RunMS: t.RunMS, PostrunMS: t.EvalMS, EvalMS: t.EvalMS, E2EMS: t.TotalMS}}
}

func errored(rs []PolarSession) int {
	n := 0
	for _, r := range rs {
		if r.Status != "COMPLETED" {
			n++
		}
	}
	return n
}

func meanReward(rs []PolarSession) *float64 {
	var sum float64
	n := 0
	for _, r := range rs {
		if tr := r.Trajectory.Traces; len(tr) > 0 && tr[len(tr)-1].Reward != nil {
			sum += *tr[len(tr)-1].Reward
			n++
		}
	}
	if n == 0 {
		return nil
	}
	m := sum / float64(n)
	return &m
}

func meanTraces(rs []PolarSession) *float64 {
	if len(rs) == 0 {
		return nil
	}
	n := 0
	for _, r := range rs {
		n += len(r.Trajectory.Traces)
	}
	m := float64(n) / float64(len(rs))
	return &m
}

func meanCompletions(rs []PolarSession) *float64 {
	if len(rs) == 0 {
		return nil
	}
	n := 0
	for _, r := range rs {
		if c, ok := r.Trajectory.Metadata["record_count"].(int); ok {
			n += c
		}
	}
	m := float64(n) / float64(len(rs))
	return &m
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
