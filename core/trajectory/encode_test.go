package trajectory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prorl/prorl/core/jsonw"
)

// equalStd fails unless MarshalResult gives encoding/json's bytes (or
// both fail).
func equalStd(t *testing.T, r *Result) {
	t.Helper()
	want, werr := json.Marshal(r)
	got, gerr := MarshalResult(r)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("encoding/json error %v, ours %v", werr, gerr)
	}
	if werr == nil && !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("differs at byte %d:\nours %q\nstd  %q", i, got[max(0, i-80):min(len(got), i+80)], want[max(0, i-80):min(len(want), i+80)])
	}
}

var nastyStrings = []string{"", "plain", "<tool_call>&amp;</tool_call>", "quote \" back \\ slash", "\b\f\n\r\t\x00\x1f\x7f",
	"é 日本 🙂", "\u2028\u2029", "bad \xff\xfe utf8 \xe2\x82", "\\boxed{5}", strings.Repeat("x", 300)}

var nastyFloats = []float64{0, math.Copysign(0, -1), 1, -1.1089537540702534, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 123456789e30, -2.5e-300, math.SmallestNonzeroFloat64, math.MaxFloat64, 0.1}

func randResult(rng *rand.Rand) *Result {
	s := func() string { return nastyStrings[rng.IntN(len(nastyStrings))] }
	f := func() float64 {
		if rng.IntN(3) == 0 {
			return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20))
		}
		return nastyFloats[rng.IntN(len(nastyFloats))]
	}
	ints := func() []int {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return []int{}
		}
		v := make([]int, rng.IntN(20))
		for i := range v {
			v[i] = rng.IntN(300000) - 1000
		}
		if len(v) > 0 && rng.IntN(4) == 0 {
			v[0] = math.MinInt64
		}
		return v
	}
	floats := func() []float64 {
		if rng.IntN(4) == 0 {
			return nil
		}
		v := make([]float64, rng.IntN(20))
		for i := range v {
			v[i] = f()
		}
		return v
	}
	mask := func() []int8 {
		if rng.IntN(4) == 0 {
			return nil
		}
		v := make([]int8, rng.IntN(20))
		for i := range v {
			v[i] = int8(rng.IntN(256) - 128)
			if rng.IntN(2) == 0 {
				v[i] = int8(rng.IntN(2))
			}
		}
		return v
	}
	raw := func() json.RawMessage {
		return []json.RawMessage{nil, json.RawMessage(`{ "a" : [1, 2.50, "<&>"] , "b":null}`), json.RawMessage(`"\u2028"`), json.RawMessage(` 7 `)}[rng.IntN(4)]
	}
	msgs := func() []Message {
		if rng.IntN(4) == 0 {
			return nil
		}
		v := make([]Message, rng.IntN(4))
		for i := range v {
			v[i] = Message{Role: s(), Content: s(), ReasoningContent: s(), ToolCallID: s(), Name: s()}
			if rng.IntN(2) == 0 {
				v[i].Span = &[2]int{rng.IntN(100), rng.IntN(100)}
			}
			for range rng.IntN(3) {
				v[i].ToolCalls = append(v[i].ToolCalls, ToolCall{ID: s(), Type: s(), Function: FunctionCall{Name: s(), Arguments: s()}})
			}
		}
		return v
	}
	tools := func() []Tool {
		if rng.IntN(3) == 0 {
			return nil
		}
		v := make([]Tool, rng.IntN(3))
		for i := range v {
			v[i] = Tool{Type: s(), Function: ToolFunction{Name: s(), Description: s(), Parameters: raw()}}
		}
		return v
	}
	r := &Result{ID: s(), GroupID: s(), SampleIndex: rng.IntN(9) - 1, Attempt: rng.IntN(3), Domain: s(), TaskID: s(),
		Status: Status(s()), Stage: s(), Reward: f(), Resolved: rng.IntN(2) == 0, Info: raw(), FinalResponse: s(), EndReason: s(),
		PolicyVersion: rng.Int64N(1<<40) - 5, Tokens: Tokens{IDs: ints(), LossMask: mask(), Logprobs: floats(), PromptLen: rng.IntN(1000)},
		Messages: msgs(), Tools: tools(), Timing: Timing{f(), f(), f(), f(), f()}, Metadata: raw(),
		SubmittedAt: time.Date(2026, 11, 24, 19, 0, rng.IntN(60), rng.IntN(1e9), time.FixedZone("x", 3600*(rng.IntN(25)-12))),
		Seq:         rng.Uint64N(4)}
	if rng.IntN(2) == 0 {
		r.Failure = &Failure{Stage: s(), Reason: s(), Message: s()}
	}
	if rng.IntN(2) == 0 {
		r.Staleness = &Staleness{InQueue: rng.Int64N(5), InFlight: rng.Int64N(5)}
		r.Stale = rng.IntN(2) == 0
	}
	if rng.IntN(2) == 0 {
		r.Metrics = map[string]float64{}
		for range rng.IntN(5) {
			r.Metrics[s()] = f()
		}
	}
	if rng.IntN(2) == 0 {
		ft := r.SubmittedAt.Add(time.Duration(rng.Int64N(1e12)))
		r.FinishedAt = &ft
	}
	if rng.IntN(4) != 0 {
		r.Turns = make([]Turn, rng.IntN(4))
		for i := range r.Turns {
			r.Turns[i] = Turn{Index: i, Trace: rng.IntN(2), PromptDeltaIDs: ints(), ResponseIDs: ints(), Logprobs: floats(), FinishReason: s(),
				Backend: s(), PolicyVersion: rng.Int64N(9), ToolCalls: rng.IntN(3), GenerateMS: f(), ToolsMS: f(), OverheadMS: f()}
			if rng.IntN(2) == 0 {
				r.Turns[i].Backends = []string{s(), s()}
				r.Turns[i].PolicySpans = []PolicySpan{{0, 3, 1}, {3, 9, 2}}
			}
		}
	}
	if rng.IntN(2) == 0 {
		consistentTokens(rng, r)
	}
	for i := range rng.IntN(3) {
		r.Attempts = append(r.Attempts, Attempt{Attempt: i + 1, Stage: s(), Reason: s(), Message: s(), PolicyVersion: rng.Int64N(9),
			StartedAt: r.SubmittedAt, EndedAt: r.SubmittedAt.Add(time.Duration(rng.Int64N(1e12))), GeneratedTokens: rng.IntN(100)})
	}
	for range rng.IntN(3) {
		r.Traces = append(r.Traces, Trace{PromptIDs: ints(), ResponseIDs: ints(), LossMask: mask(), ResponseLogprobs: floats(),
			PromptMessages: msgs(), ResponseMessages: msgs(), Tools: tools(), FinishReason: s(), Calls: rng.IntN(5)})
	}
	return r
}

// simResult is a rollout the simulator served, as the API returned it.
func simResult(tb testing.TB) *Result {
	tb.Helper()
	data, err := os.ReadFile("testdata/sim_result.json")
	if err != nil {
		tb.Fatal(err)
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		tb.Fatal(err)
	}
	return &r
}

// consistentTokens makes r's tokens its turns' deltas and responses, as
// a single-agent rollout's are (the encoder then reuses the turns'
// bytes), and sometimes breaks that in one place.
func consistentTokens(rng *rand.Rand, r *Result) {
	tk := Tokens{IDs: []int{}, Logprobs: []float64{}}
	for i := range r.Turns {
		t := &r.Turns[i]
		if len(t.Logprobs) != len(t.ResponseIDs) {
			t.Logprobs = make([]float64, len(t.ResponseIDs))
			for j := range t.Logprobs {
				t.Logprobs[j] = -rng.Float64() * 10
			}
		}
		tk.IDs = append(append(tk.IDs, t.PromptDeltaIDs...), t.ResponseIDs...)
		tk.Logprobs = append(append(tk.Logprobs, make([]float64, len(t.PromptDeltaIDs))...), t.Logprobs...)
	}
	tk.LossMask = make([]int8, len(tk.IDs))
	r.Tokens = tk
	n := len(tk.IDs)
	switch rng.IntN(8) {
	case 0:
		r.Tokens.IDs = append(r.Tokens.IDs, 7)
	case 1:
		r.Tokens.Logprobs = append(r.Tokens.Logprobs, -1)
	case 2:
		if n > 0 {
			r.Tokens.IDs[rng.IntN(n)]++
		}
	case 3:
		if n > 0 {
			r.Tokens.Logprobs[rng.IntN(n)] = math.Copysign(0, -1)
		}
	case 4:
		if n > 0 {
			r.Tokens.Logprobs[rng.IntN(n)] = -0.5
		}
	case 5:
		if n > 0 {
			r.Tokens.IDs = r.Tokens.IDs[:n-1]
			r.Tokens.Logprobs = r.Tokens.Logprobs[:n-1]
		}
	}
}

// TestReuseTurnBytes: a simulator rollout's tokens are written from its
// turns' bytes (the fast path is taken, and equals encoding/json above).
func TestReuseTurnBytes(t *testing.T) {
	r := *simResult(t)
	w := &jsonw.Writer{}
	spans := make([]turnSpans, len(r.Turns))
	for i := range r.Turns {
		spans[i] = writeTurn(w, &r.Turns[i])
	}
	if !reuseIDs(w, &r, spans) || !reuseLogprobs(w, &r, spans) {
		t.Fatal("a simulator rollout's tokens were not written from its turns")
	}
	r.Tokens.Logprobs[0] = math.Copysign(0, -1)
	if reuseLogprobs(w, &r, spans) {
		t.Fatal("-0 on a prompt token (written \"-0\") was taken for 0")
	}
}

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	sim := *simResult(t)
	now := time.Now()
	sim.FinishedAt = &now
	cases := map[string]*Result{"zero": {}, "simulator rollout": &sim}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) { equalStd(t, r) })
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		equalStd(t, randResult(rng))
	}
}

func TestAppendJSONErrors(t *testing.T) {
	for name, r := range map[string]*Result{
		"NaN reward":        {Reward: math.NaN()},
		"Inf logprob":       {Tokens: Tokens{Logprobs: []float64{math.Inf(-1)}}},
		"invalid info":      {Info: json.RawMessage(`{"a":`)},
		"year out of range": {SubmittedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := MarshalResult(r); err == nil {
				t.Fatal("no error")
			}
			equalStd(t, r)
		})
	}
}

// FuzzAppendJSON puts arbitrary strings, numbers and raw JSON where a
// rollout's text and numbers go.
func FuzzAppendJSON(f *testing.F) {
	f.Add("<think>\n\\boxed{5}</think>", -1.25, 151645, []byte(`{"x":[1,2]}`), uint64(1))
	f.Add("\xff\u2028", 1e-7, -1, []byte(`null`), uint64(7))
	f.Fuzz(func(t *testing.T, s string, x float64, id int, raw []byte, seed uint64) {
		r := randResult(rand.New(rand.NewPCG(seed, 0)))
		r.ID, r.FinalResponse, r.Reward, r.Info = s, s, x, raw
		r.Tokens.IDs = append(r.Tokens.IDs, id)
		r.Tokens.Logprobs = append(r.Tokens.Logprobs, x)
		r.Messages = append(r.Messages, Message{Role: "assistant", Content: s, ToolCalls: []ToolCall{{Function: FunctionCall{Arguments: s}}}})
		r.Metrics = map[string]float64{s: x, "k": x}
		equalStd(t, r)
	})
}

func BenchmarkMarshalResult(b *testing.B) {
	r := *simResult(b)
	b.Run("ours", func(b *testing.B) {
		for b.Loop() {
			if _, err := MarshalResult(&r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(&r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A frozen tool list is written from its one encoding: encoding/json's
// bytes, for the list itself and for other lists that share its first
// element (a shorter one, a longer one made by append) or equal it.
func TestFreezeTools(t *testing.T) {
	tool := func(name string) Tool {
		return Tool{Type: "function", Function: ToolFunction{Name: name, Description: "d <" + name + ">", Parameters: json.RawMessage(`{"type": "object"}`)}}
	}
	frozen := FreezeTools([]Tool{tool("a"), tool("b"), tool("c")})
	longer := append(frozen, tool("d")) // capacity 3: a copy
	longerInPlace := append(make([]Tool, 0, 8), tool("a"), tool("b"))
	FreezeTools(longerInPlace)
	grown := append(longerInPlace, tool("x")) // same array, one more element
	for name, ts := range map[string][]Tool{
		"frozen": frozen, "prefix": frozen[:2], "suffix": frozen[1:], "appended copy": longer,
		"frozen in a larger array": longerInPlace, "grown in place": grown, "empty": frozen[:0], "nil": nil,
	} {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(ts)
			if err != nil {
				t.Fatal(err)
			}
			w := &jsonw.Writer{B: []byte("[")}
			WriteTools(w, ts)
			if got := w.B[1:]; !bytes.Equal(got, want) || w.Err != nil {
				t.Fatalf("got %s (%v), want %s", got, w.Err, want)
			}
		})
	}
	bad := FreezeTools([]Tool{{Function: ToolFunction{Parameters: json.RawMessage(`{`)}}})
	if _, err := MarshalResult(&Result{Tools: bad}); err == nil {
		t.Fatal("a list with invalid parameters, frozen, was written without an error")
	}
}

// Past maxFrozen lists, the oldest are forgotten and written out again:
// still the same bytes.
func TestFreezeToolsBounded(t *testing.T) {
	lists := make([][]Tool, maxFrozen+10)
	for i := range lists {
		lists[i] = FreezeTools([]Tool{{Type: "function", Function: ToolFunction{Name: fmt.Sprint(i), Parameters: json.RawMessage(`{}`)}}})
	}
	if n := frozenCount.Load(); n > maxFrozen {
		t.Fatalf("%d lists remembered, bound %d", n, maxFrozen)
	}
	for _, i := range []int{0, maxFrozen / 2, len(lists) - 1} {
		want, _ := json.Marshal(lists[i])
		w := &jsonw.Writer{B: []byte("[")}
		WriteTools(w, lists[i])
		if !bytes.Equal(w.B[1:], want) {
			t.Fatalf("list %d: got %s, want %s", i, w.B[1:], want)
		}
	}
}
