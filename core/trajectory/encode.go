package trajectory

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Every finished rollout is encoded once (the store keeps those bytes and
// the API sends them), and most of a result is numbers: token ids, masks,
// logprobs. Written out, the encoding costs about half what reflection-based
// encoders do. It is byte for byte what encoding/json produces
// (TestAppendJSONMatchesEncodingJSON, FuzzAppendJSON), so a field added to
// these types without adding it here fails those tests.

// AppendJSON appends r's JSON encoding to b.
func (r *Result) AppendJSON(b []byte) ([]byte, error) {
	e := encoder{b: b}
	e.result(r)
	return e.b, e.err
}

// AppendToolsJSON appends tools as encoding/json encodes them.
func AppendToolsJSON(b []byte, tools []Tool) ([]byte, error) {
	e := encoder{b: b}
	e.tools(tools)
	return e.b, e.err
}

// AppendJSONString appends s quoted as encoding/json quotes it.
func AppendJSONString(b []byte, s string) []byte { return appendString(b, s) }

// AppendJSONFloat appends f as encoding/json formats it (false for NaN
// and ±Inf, which JSON cannot hold).
func AppendJSONFloat(b []byte, f float64) ([]byte, bool) { return appendFloat(b, f) }

// AppendJSONInts appends ids as a JSON array (null for nil).
func AppendJSONInts(b []byte, ids []int) []byte {
	e := encoder{b: b}
	e.ints(ids)
	return e.b
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

type encoder struct {
	b   []byte
	err error
}

func (e *encoder) raw(s string) { e.b = append(e.b, s...) }

// key writes `,"name":` (no comma for the first field of an object).
func (e *encoder) key(k string) {
	if c := e.b[len(e.b)-1]; c != '{' && c != '[' {
		e.b = append(e.b, ',')
	}
	e.b = append(e.b, '"')
	e.b = append(e.b, k...)
	e.b = append(e.b, '"', ':')
}

func (e *encoder) str(s string) { e.b = appendString(e.b, s) }

func (e *encoder) int(n int64) { e.b = strconv.AppendInt(e.b, n, 10) }

func (e *encoder) bool(v bool) { e.b = strconv.AppendBool(e.b, v) }

// float writes f as encoding/json does (NaN and ±Inf are errors).
func (e *encoder) float(f float64) {
	var ok bool
	if e.b, ok = appendFloat(e.b, f); !ok && e.err == nil {
		e.err = &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)}
	}
}

// appendFloat formats like encoding/json: %f, or %e for very small or
// large magnitudes with a short exponent (1e-07 -> 1e-7).
func appendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0'), false
	}
	if f == 0 && !math.Signbit(f) {
		return append(b, '0'), true
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// The loops below work on a local slice: appending through e.b stores a
// pointer into the encoder on every element (a write barrier while the GC
// runs), which cost more than the formatting.

func (e *encoder) ints(v []int) {
	if v == nil {
		e.raw("null")
		return
	}
	b := append(e.b, '[')
	for i, n := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendInt(b, n)
	}
	e.b = append(b, ']')
}

// appendInt is strconv.AppendInt with a quicker path for token ids.
func appendInt(b []byte, n int) []byte {
	if n < 0 || n >= 1e8 {
		return strconv.AppendInt(b, int64(n), 10)
	}
	var d [8]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(b, d[i:]...)
}

func (e *encoder) mask(v []int8) {
	if v == nil {
		e.raw("null")
		return
	}
	b := append(e.b, '[')
	for i, n := range v {
		if i > 0 {
			b = append(b, ',')
		}
		if n == 0 || n == 1 {
			b = append(b, '0'+byte(n))
		} else {
			b = strconv.AppendInt(b, int64(n), 10)
		}
	}
	e.b = append(b, ']')
}

func (e *encoder) floats(v []float64) {
	if v == nil {
		e.raw("null")
		return
	}
	b := append(e.b, '[')
	for i, f := range v {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendFloat(b, f); !ok && e.err == nil {
			e.err = &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)}
		}
	}
	e.b = append(b, ']')
}

func (e *encoder) strs(v []string) {
	if v == nil {
		e.raw("null")
		return
	}
	e.b = append(e.b, '[')
	for i, s := range v {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.str(s)
	}
	e.b = append(e.b, ']')
}

// rawJSON writes a RawMessage as encoding/json does (compacted, HTML
// escaped, an error if invalid). Tool schemas repeat in every rollout of a
// domain, so small ones are compacted once.
func (e *encoder) rawJSON(m json.RawMessage) {
	if len(m) <= maxCachedRaw {
		rawMu.RLock()
		v, ok := rawCache[string(m)]
		rawMu.RUnlock()
		if ok {
			e.b = append(e.b, v...)
			return
		}
	}
	v, err := json.Marshal(m)
	if err != nil {
		if e.err == nil {
			e.err = err
		}
		return
	}
	if len(m) <= maxCachedRaw {
		rawMu.Lock()
		if len(rawCache) >= maxCachedRaws {
			clear(rawCache) // bounded: an unusual workload just stops hitting
		}
		rawCache[string(m)] = v
		rawMu.Unlock()
	}
	e.b = append(e.b, v...)
}

const (
	maxCachedRaw  = 16 << 10
	maxCachedRaws = 256
)

var (
	rawMu    sync.RWMutex
	rawCache = map[string][]byte{}
)

func (e *encoder) result(r *Result) {
	e.raw("{")
	e.key("id")
	e.str(r.ID)
	e.key("group_id")
	e.str(r.GroupID)
	e.key("sample_index")
	e.int(int64(r.SampleIndex))
	e.key("attempt")
	e.int(int64(r.Attempt))
	e.key("domain")
	e.str(r.Domain)
	if r.TaskID != "" {
		e.key("task_id")
		e.str(r.TaskID)
	}
	e.key("status")
	e.str(string(r.Status))
	if r.Stage != "" {
		e.key("stage")
		e.str(r.Stage)
	}
	if r.Failure != nil {
		e.key("failure")
		e.raw("{")
		e.key("stage")
		e.str(r.Failure.Stage)
		e.key("reason")
		e.str(r.Failure.Reason)
		if r.Failure.Message != "" {
			e.key("message")
			e.str(r.Failure.Message)
		}
		e.raw("}")
	}
	e.key("reward")
	e.float(r.Reward)
	e.key("resolved")
	e.bool(r.Resolved)
	if len(r.Metrics) > 0 {
		e.key("metrics")
		e.metrics(r.Metrics)
	}
	if len(r.Info) > 0 {
		e.key("info")
		e.rawJSON(r.Info)
	}
	if r.FinalResponse != "" {
		e.key("final_response")
		e.str(r.FinalResponse)
	}
	if r.EndReason != "" {
		e.key("end_reason")
		e.str(r.EndReason)
	}
	e.key("policy_version")
	e.int(r.PolicyVersion)
	e.key("turns")
	if r.Turns == nil {
		e.raw("null")
	} else {
		e.raw("[")
		for i := range r.Turns {
			if i > 0 {
				e.raw(",")
			}
			e.turn(&r.Turns[i])
		}
		e.raw("]")
	}
	e.key("tokens")
	e.raw("{")
	e.key("ids")
	e.ints(r.Tokens.IDs)
	e.key("loss_mask")
	e.mask(r.Tokens.LossMask)
	e.key("logprobs")
	e.floats(r.Tokens.Logprobs)
	e.key("prompt_len")
	e.int(int64(r.Tokens.PromptLen))
	e.raw("}")
	e.key("messages")
	e.messages(r.Messages)
	e.key("tools")
	e.tools(r.Tools)
	if len(r.Traces) > 0 {
		e.key("traces")
		e.raw("[")
		for i := range r.Traces {
			if i > 0 {
				e.raw(",")
			}
			e.trace(&r.Traces[i])
		}
		e.raw("]")
	}
	e.key("timing")
	e.raw("{")
	e.key("queued")
	e.float(r.Timing.QueuedMS)
	e.key("init")
	e.float(r.Timing.InitMS)
	e.key("run")
	e.float(r.Timing.RunMS)
	e.key("eval")
	e.float(r.Timing.EvalMS)
	e.key("total")
	e.float(r.Timing.TotalMS)
	e.raw("}")
	if len(r.Metadata) > 0 {
		e.key("metadata")
		e.rawJSON(r.Metadata)
	}
	e.key("submitted_at")
	e.time(r.SubmittedAt.MarshalJSON())
	if r.FinishedAt != nil {
		e.key("finished_at")
		e.time(r.FinishedAt.MarshalJSON())
	}
	if r.Seq != 0 {
		e.key("seq")
		e.b = strconv.AppendUint(e.b, r.Seq, 10)
	}
	e.raw("}")
}

func (e *encoder) time(v []byte, err error) {
	if err != nil {
		if e.err == nil {
			e.err = fmt.Errorf("json: error calling MarshalJSON for type time.Time: %w", err)
		}
		v = []byte("null")
	}
	e.b = append(e.b, v...)
}

func (e *encoder) metrics(m map[string]float64) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.raw("{")
	for i, k := range keys {
		if i > 0 {
			e.raw(",")
		}
		e.str(k)
		e.raw(":")
		e.float(m[k])
	}
	e.raw("}")
}

func (e *encoder) turn(t *Turn) {
	e.raw("{")
	e.key("index")
	e.int(int64(t.Index))
	if t.Trace != 0 {
		e.key("trace")
		e.int(int64(t.Trace))
	}
	e.key("prompt_delta_ids")
	e.ints(t.PromptDeltaIDs)
	e.key("response_ids")
	e.ints(t.ResponseIDs)
	e.key("logprobs")
	e.floats(t.Logprobs)
	e.key("finish_reason")
	e.str(t.FinishReason)
	e.key("backend")
	e.str(t.Backend)
	if len(t.Backends) > 0 {
		e.key("backends")
		e.strs(t.Backends)
	}
	e.key("policy_version")
	e.int(t.PolicyVersion)
	if len(t.PolicySpans) > 0 {
		e.key("policy_spans")
		e.raw("[")
		for i, s := range t.PolicySpans {
			if i > 0 {
				e.raw(",")
			}
			e.raw("{")
			e.key("start")
			e.int(int64(s.Start))
			e.key("end")
			e.int(int64(s.End))
			e.key("version")
			e.int(s.Version)
			e.raw("}")
		}
		e.raw("]")
	}
	e.key("tool_calls")
	e.int(int64(t.ToolCalls))
	e.key("generate_ms")
	e.float(t.GenerateMS)
	e.key("tools_ms")
	e.float(t.ToolsMS)
	e.key("overhead_ms")
	e.float(t.OverheadMS)
	e.raw("}")
}

func (e *encoder) messages(ms []Message) {
	if ms == nil {
		e.raw("null")
		return
	}
	e.raw("[")
	for i := range ms {
		if i > 0 {
			e.raw(",")
		}
		m := &ms[i]
		e.raw("{")
		e.key("role")
		e.str(m.Role)
		e.key("content")
		e.str(m.Content)
		if m.ReasoningContent != "" {
			e.key("reasoning_content")
			e.str(m.ReasoningContent)
		}
		if len(m.ToolCalls) > 0 {
			e.key("tool_calls")
			e.raw("[")
			for j, c := range m.ToolCalls {
				if j > 0 {
					e.raw(",")
				}
				e.raw("{")
				e.key("id")
				e.str(c.ID)
				e.key("type")
				e.str(c.Type)
				e.key("function")
				e.raw("{")
				e.key("name")
				e.str(c.Function.Name)
				e.key("arguments")
				e.str(c.Function.Arguments)
				e.raw("}}")
			}
			e.raw("]")
		}
		if m.ToolCallID != "" {
			e.key("tool_call_id")
			e.str(m.ToolCallID)
		}
		if m.Name != "" {
			e.key("name")
			e.str(m.Name)
		}
		if m.Span != nil {
			e.key("token_span")
			e.raw("[")
			e.int(int64(m.Span[0]))
			e.raw(",")
			e.int(int64(m.Span[1]))
			e.raw("]")
		}
		e.raw("}")
	}
	e.raw("]")
}

func (e *encoder) tools(ts []Tool) {
	if ts == nil {
		e.raw("null")
		return
	}
	e.raw("[")
	for i := range ts {
		if i > 0 {
			e.raw(",")
		}
		t := &ts[i]
		e.raw("{")
		e.key("type")
		e.str(t.Type)
		e.key("function")
		e.raw("{")
		e.key("name")
		e.str(t.Function.Name)
		e.key("description")
		e.str(t.Function.Description)
		e.key("parameters")
		e.rawJSON(t.Function.Parameters)
		e.raw("}}")
	}
	e.raw("]")
}

func (e *encoder) trace(t *Trace) {
	e.raw("{")
	e.key("prompt_ids")
	e.ints(t.PromptIDs)
	e.key("response_ids")
	e.ints(t.ResponseIDs)
	e.key("loss_mask")
	e.mask(t.LossMask)
	e.key("response_logprobs")
	e.floats(t.ResponseLogprobs)
	e.key("prompt_messages")
	e.messages(t.PromptMessages)
	e.key("response_messages")
	e.messages(t.ResponseMessages)
	e.key("tools")
	e.tools(t.Tools)
	e.key("finish_reason")
	e.str(t.FinishReason)
	e.key("calls")
	e.int(int64(t.Calls))
	e.raw("}")
}

const hexDigits = "0123456789abcdef"

// appendString quotes s exactly as encoding/json does with HTML escaping:
// invalid UTF-8 becomes U+FFFD, and U+2028/U+2029 are escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
