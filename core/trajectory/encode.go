package trajectory

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prorl/prorl/core/jsonw"
)

// Every finished rollout is encoded once (the store keeps those bytes and
// the API sends them), and most of a result is numbers: token ids, masks,
// logprobs. Written out, the encoding costs about half what reflection-based
// encoders do. It is byte for byte what encoding/json produces
// (TestAppendJSONMatchesEncodingJSON, FuzzAppendJSON), so a field added to
// these types without adding it here fails those tests.

// AppendJSON appends r's JSON encoding to b.
func (r *Result) AppendJSON(b []byte) ([]byte, error) {
	w := &jsonw.Writer{B: b}
	writeResult(w, r)
	return w.B, w.Err
}

// WriteTools writes tools as encoding/json encodes them.
func WriteTools(w *jsonw.Writer, tools []Tool) { writeTools(w, tools) }

// A plugin's tools go, the same each time, into every generation request
// and every result of its rollouts: a list FreezeTools was given is written
// from its one encoding (bench Rollouts' profile: writing tools took 4%
// of the host's CPU per single-turn rollout). The map holds the list's
// first element, so its array is never reused for another list while here.
var (
	frozenTools sync.Map // *Tool (a list's first element) -> frozenList
	frozenCount atomic.Int64
)

type frozenList struct {
	n    int
	json []byte
}

// maxFrozen bounds the lists remembered; past it they are forgotten and
// written out again until frozen anew.
const maxFrozen = 1024

// FreezeTools promises that neither ts nor its elements change again and
// returns it; its JSON is then written from one encoding.
func FreezeTools(ts []Tool) []Tool {
	if len(ts) == 0 {
		return ts
	}
	w := &jsonw.Writer{}
	encodeTools(w, ts)
	if w.Err != nil {
		return ts // written out (and failing) each time, as before
	}
	if frozenCount.Add(1) > maxFrozen {
		frozenTools.Clear()
		frozenCount.Store(1)
	}
	frozenTools.Store(&ts[0], frozenList{n: len(ts), json: w.B})
	return ts
}

// MarshalResult returns r's JSON encoding.
func MarshalResult(r *Result) ([]byte, error) {
	// Room for the usual rollout: ids and mask ~8 bytes a token, a
	// logprob ~20 for generated tokens and 2 for prompt ones.
	n := 1024 + 10*len(r.Tokens.IDs)
	for _, t := range r.Turns {
		n += 28*len(t.ResponseIDs) + 6*len(t.PromptDeltaIDs)
	}
	for _, m := range r.Messages {
		n += len(m.Content) + 64
	}
	return r.AppendJSON(make([]byte, 0, n))
}

func writeResult(w *jsonw.Writer, r *Result) {
	w.Raw("{")
	w.Key("id")
	w.Str(r.ID)
	w.Key("group_id")
	w.Str(r.GroupID)
	w.Key("sample_index")
	w.Int(int64(r.SampleIndex))
	w.Key("attempt")
	w.Int(int64(r.Attempt))
	w.Key("domain")
	w.Str(r.Domain)
	if r.TaskID != "" {
		w.Key("task_id")
		w.Str(r.TaskID)
	}
	w.Key("status")
	w.Str(string(r.Status))
	if r.Sample != "" {
		w.Key("sample")
		w.Str(r.Sample)
	}
	if r.MaskSample {
		w.Key("mask_sample")
		w.Bool(true)
	}
	if len(r.Attempts) > 0 {
		// Rare (a retried sample) and small: the standard encoder.
		b, err := json.Marshal(r.Attempts)
		if err == nil {
			w.Key("attempts")
			w.RawJSON(b)
		}
	}
	if r.Stage != "" {
		w.Key("stage")
		w.Str(r.Stage)
	}
	if r.Failure != nil {
		w.Key("failure")
		w.Raw("{")
		w.Key("stage")
		w.Str(r.Failure.Stage)
		w.Key("reason")
		w.Str(r.Failure.Reason)
		if r.Failure.Message != "" {
			w.Key("message")
			w.Str(r.Failure.Message)
		}
		w.Raw("}")
	}
	w.Key("reward")
	w.Float(r.Reward)
	w.Key("resolved")
	w.Bool(r.Resolved)
	if len(r.Metrics) > 0 {
		w.Key("metrics")
		writeMetrics(w, r.Metrics)
	}
	if len(r.Info) > 0 {
		w.Key("info")
		w.RawJSON(r.Info)
	}
	if r.FinalResponse != "" {
		w.Key("final_response")
		w.Str(r.FinalResponse)
	}
	if r.EndReason != "" {
		w.Key("end_reason")
		w.Str(r.EndReason)
	}
	w.Key("policy_version")
	w.Int(r.PolicyVersion)
	if r.Staleness != nil {
		w.Key("staleness")
		w.Raw("{")
		w.Key("in_queue")
		w.Int(r.Staleness.InQueue)
		w.Key("in_flight")
		w.Int(r.Staleness.InFlight)
		w.Raw("}")
	}
	if r.Stale {
		w.Key("stale")
		w.Bool(true)
	}
	w.Key("turns")
	spans := make([]turnSpans, len(r.Turns))
	w.List(r.Turns == nil, len(r.Turns), func(i int) { spans[i] = writeTurn(w, &r.Turns[i]) })
	w.Key("tokens")
	w.Raw("{")
	w.Key("ids")
	if !reuseIDs(w, r, spans) {
		w.Ints(r.Tokens.IDs)
	}
	w.Key("loss_mask")
	w.Mask(r.Tokens.LossMask)
	w.Key("logprobs")
	if !reuseLogprobs(w, r, spans) {
		w.Floats(r.Tokens.Logprobs)
	}
	w.Key("prompt_len")
	w.Int(int64(r.Tokens.PromptLen))
	w.Raw("}")
	w.Key("messages")
	WriteMessages(w, r.Messages)
	w.Key("tools")
	writeTools(w, r.Tools)
	if len(r.Traces) > 0 {
		w.Key("traces")
		w.List(false, len(r.Traces), func(i int) { writeTrace(w, &r.Traces[i]) })
	}
	w.Key("timing")
	w.Raw("{")
	w.Key("queued")
	w.Float(r.Timing.QueuedMS)
	w.Key("init")
	w.Float(r.Timing.InitMS)
	w.Key("run")
	w.Float(r.Timing.RunMS)
	w.Key("eval")
	w.Float(r.Timing.EvalMS)
	w.Key("total")
	w.Float(r.Timing.TotalMS)
	w.Raw("}")
	if len(r.Metadata) > 0 {
		w.Key("metadata")
		w.RawJSON(r.Metadata)
	}
	w.Key("submitted_at")
	writeTime(w, r.SubmittedAt)
	if r.FinishedAt != nil {
		w.Key("finished_at")
		writeTime(w, *r.FinishedAt)
	}
	if r.Seq != 0 {
		w.Key("seq")
		w.Uint(r.Seq)
	}
	w.Raw("}")
}

func writeTime(w *jsonw.Writer, t time.Time) {
	v, err := t.MarshalJSON()
	if err != nil {
		if w.Err == nil {
			w.Err = fmt.Errorf("json: error calling MarshalJSON for type time.Time: %w", err)
		}
		v = []byte("null")
	}
	w.B = append(w.B, v...)
}

func writeMetrics(w *jsonw.Writer, m map[string]float64) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.Raw("{")
	for i, k := range keys {
		if i > 0 {
			w.Raw(",")
		}
		w.Str(k)
		w.Raw(":")
		w.Float(m[k])
	}
	w.Raw("}")
}

// turnSpans are where a turn's arrays were written, without brackets.
type turnSpans struct{ delta, resp, logprobs [2]int }

// inner writes an array with write and returns where its elements are
// (none for null).
func inner(w *jsonw.Writer, null bool, write func()) [2]int {
	s := len(w.B) + 1
	write()
	if null {
		return [2]int{}
	}
	return [2]int{s, len(w.B) - 1}
}

func writeTurn(w *jsonw.Writer, t *Turn) turnSpans {
	var sp turnSpans
	w.Raw("{")
	w.Key("index")
	w.Int(int64(t.Index))
	if t.Trace != 0 {
		w.Key("trace")
		w.Int(int64(t.Trace))
	}
	w.Key("prompt_delta_ids")
	sp.delta = inner(w, t.PromptDeltaIDs == nil, func() { w.Ints(t.PromptDeltaIDs) })
	w.Key("response_ids")
	sp.resp = inner(w, t.ResponseIDs == nil, func() { w.Ints(t.ResponseIDs) })
	w.Key("logprobs")
	sp.logprobs = inner(w, t.Logprobs == nil, func() { w.Floats(t.Logprobs) })
	w.Key("finish_reason")
	w.Str(t.FinishReason)
	w.Key("backend")
	w.Str(t.Backend)
	if len(t.Backends) > 0 {
		w.Key("backends")
		w.Strs(t.Backends)
	}
	w.Key("policy_version")
	w.Int(t.PolicyVersion)
	if len(t.PolicySpans) > 0 {
		w.Key("policy_spans")
		w.List(false, len(t.PolicySpans), func(i int) {
			s := t.PolicySpans[i]
			w.Raw("{")
			w.Key("start")
			w.Int(int64(s.Start))
			w.Key("end")
			w.Int(int64(s.End))
			w.Key("version")
			w.Int(s.Version)
			w.Raw("}")
		})
	}
	w.Key("tool_calls")
	w.Int(int64(t.ToolCalls))
	w.Key("generate_ms")
	w.Float(t.GenerateMS)
	w.Key("tools_ms")
	w.Float(t.ToolsMS)
	w.Key("overhead_ms")
	w.Float(t.OverheadMS)
	w.Raw("}")
	return sp
}

// A single-agent rollout's tokens are its turns' prompt deltas and
// responses in order, and its logprobs zero on the deltas and the
// turns' logprobs on the responses. When that holds (checked, not
// assumed: a gateway session's turns need not add up to its tokens),
// the tokens' arrays are the turns' formatted bytes again, which halves
// the number formatting of a result.

// reuseIDs writes tokens.ids from the turns' bytes if they add up to it.
func reuseIDs(w *jsonw.Writer, r *Result, spans []turnSpans) bool {
	ids, at := r.Tokens.IDs, 0
	if ids == nil || len(r.Turns) == 0 {
		return false
	}
	for i := range r.Turns {
		t := &r.Turns[i]
		for _, part := range [][]int{t.PromptDeltaIDs, t.ResponseIDs} {
			if at+len(part) > len(ids) || !slices.Equal(ids[at:at+len(part)], part) {
				return false
			}
			at += len(part)
		}
	}
	if at != len(ids) {
		return false
	}
	b := append(w.B, '[')
	for _, sp := range spans {
		b = appendSpan(b, sp.delta)
		b = appendSpan(b, sp.resp)
	}
	w.B = append(b, ']')
	return true
}

// reuseLogprobs writes tokens.logprobs from the turns' bytes if they add
// up to it, with zeros on the prompt deltas.
func reuseLogprobs(w *jsonw.Writer, r *Result, spans []turnSpans) bool {
	lp, at := r.Tokens.Logprobs, 0
	if lp == nil || len(r.Turns) == 0 || len(lp) != len(r.Tokens.IDs) {
		return false
	}
	for i := range r.Turns {
		t := &r.Turns[i]
		if len(t.Logprobs) != len(t.ResponseIDs) || at+len(t.PromptDeltaIDs)+len(t.Logprobs) > len(lp) {
			return false
		}
		for _, f := range lp[at : at+len(t.PromptDeltaIDs)] {
			if math.Float64bits(f) != 0 { // +0 only: -0 is written "-0"
				return false
			}
		}
		at += len(t.PromptDeltaIDs)
		for j, f := range t.Logprobs {
			if math.Float64bits(f) != math.Float64bits(lp[at+j]) {
				return false
			}
		}
		at += len(t.Logprobs)
	}
	if at != len(lp) {
		return false
	}
	b := append(w.B, '[')
	for i, sp := range spans {
		if last := b[len(b)-1]; len(r.Turns[i].PromptDeltaIDs) > 0 && last != '[' && last != ',' {
			b = append(b, ',')
		}
		for range r.Turns[i].PromptDeltaIDs {
			b = append(b, "0,"...)
		}
		b = appendSpan(b, sp.logprobs)
	}
	if b[len(b)-1] == ',' {
		b = b[:len(b)-1]
	}
	w.B = append(b, ']')
	return true
}

// appendSpan appends b[sp[0]:sp[1]] to b after a comma unless b ends a
// list's start or is empty; b may hold the span itself.
func appendSpan(b []byte, sp [2]int) []byte {
	if sp[0] >= sp[1] {
		return b
	}
	if last := b[len(b)-1]; last != '[' && last != ',' {
		b = append(b, ',')
	}
	return append(b, b[sp[0]:sp[1]]...)
}

// WriteMessages writes chat messages as encoding/json encodes them: the
// one writer of chat messages, for results and for servers' requests.
func WriteMessages(w *jsonw.Writer, ms []Message) {
	w.List(ms == nil, len(ms), func(i int) { writeMessage(w, &ms[i]) })
}

func writeMessage(w *jsonw.Writer, m *Message) {
	w.Raw("{")
	w.Key("role")
	w.Str(m.Role)
	w.Key("content")
	w.Str(m.Content)
	if m.ReasoningContent != "" {
		w.Key("reasoning_content")
		w.Str(m.ReasoningContent)
	}
	if len(m.ToolCalls) > 0 {
		w.Key("tool_calls")
		WriteToolCalls(w, m.ToolCalls)
	}
	if m.ToolCallID != "" {
		w.Key("tool_call_id")
		w.Str(m.ToolCallID)
	}
	if m.Name != "" {
		w.Key("name")
		w.Str(m.Name)
	}
	if m.Span != nil {
		w.Key("token_span")
		w.Raw("[")
		w.Int(int64(m.Span[0]))
		w.Raw(",")
		w.Int(int64(m.Span[1]))
		w.Raw("]")
	}
	w.Raw("}")
}

// WriteToolCalls writes tool calls as encoding/json encodes them.
func WriteToolCalls(w *jsonw.Writer, calls []ToolCall) {
	w.List(calls == nil, len(calls), func(i int) {
		c := &calls[i]
		w.Raw("{")
		w.Key("id")
		w.Str(c.ID)
		w.Key("type")
		w.Str(c.Type)
		w.Key("function")
		w.Raw("{")
		w.Key("name")
		w.Str(c.Function.Name)
		w.Key("arguments")
		w.Str(c.Function.Arguments)
		w.Raw("}}")
	})
}

func writeTools(w *jsonw.Writer, ts []Tool) {
	if len(ts) > 0 {
		if f, ok := frozenTools.Load(&ts[0]); ok && f.(frozenList).n == len(ts) {
			w.B = append(w.B, f.(frozenList).json...)
			return
		}
	}
	encodeTools(w, ts)
}

func encodeTools(w *jsonw.Writer, ts []Tool) {
	w.List(ts == nil, len(ts), func(i int) {
		t := &ts[i]
		w.Raw("{")
		w.Key("type")
		w.Str(t.Type)
		w.Key("function")
		w.Raw("{")
		w.Key("name")
		w.Str(t.Function.Name)
		w.Key("description")
		w.Str(t.Function.Description)
		w.Key("parameters")
		w.RawJSON(t.Function.Parameters)
		w.Raw("}}")
	})
}

func writeTrace(w *jsonw.Writer, t *Trace) {
	w.Raw("{")
	w.Key("prompt_ids")
	w.Ints(t.PromptIDs)
	w.Key("response_ids")
	w.Ints(t.ResponseIDs)
	w.Key("loss_mask")
	w.Mask(t.LossMask)
	w.Key("response_logprobs")
	w.Floats(t.ResponseLogprobs)
	w.Key("prompt_messages")
	WriteMessages(w, t.PromptMessages)
	w.Key("response_messages")
	WriteMessages(w, t.ResponseMessages)
	w.Key("tools")
	writeTools(w, t.Tools)
	w.Key("finish_reason")
	w.Str(t.FinishReason)
	w.Key("calls")
	w.Int(int64(t.Calls))
	w.Raw("}")
}
