package engine

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/prorl/prorl/core/trajectory"
)

var encStrings = []string{"", "x", "<tool_call>\n{\"a\": 1}</tool_call>", "é\u2028\xff", "\\boxed{5} & <b>", "\x00\x1f"}

func randChat(rng *rand.Rand) []trajectory.Message {
	s := func() string { return encStrings[rng.IntN(len(encStrings))] }
	if rng.IntN(5) == 0 {
		return nil
	}
	out := make([]trajectory.Message, rng.IntN(4))
	for i := range out {
		out[i] = trajectory.Message{Role: s(), Content: s(), ToolCallID: s(), Name: s(), ReasoningContent: s()}
		for range rng.IntN(3) {
			out[i].ToolCalls = append(out[i].ToolCalls, trajectory.ToolCall{ID: s(), Type: s(), Function: trajectory.FunctionCall{Name: s(), Arguments: s()}})
		}
	}
	return out
}

// TestRequestEncodersMatchEncodingJSON: the written-out request bodies are
// encoding/json's bytes for the same structs.
func TestRequestEncodersMatchEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	check := func(in appender) {
		t.Helper()
		want, werr := json.Marshal(in)
		got, gerr := in.appendJSON(nil)
		if (werr != nil) != (gerr != nil) || werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("differ:\nours %s (%v)\nstd  %s (%v)", got, gerr, want, werr)
		}
	}
	for range 2000 {
		seed := rng.Int64()
		c := &completionRequest{Prompt: []int{1, 151644, -3}, MaxTokens: rng.IntN(9000), Temperature: []float64{0, 0.7, 1, 1e-7}[rng.IntN(4)], TopP: rng.Float64(),
			Logprobs: 1, ReturnTokensAsTokenIDs: rng.IntN(2) == 0, Stream: rng.IntN(2) == 0, IgnoreEOS: rng.IntN(2) == 0, Priority: rng.IntN(3) - 1}
		if rng.IntN(2) == 0 {
			c.Model, c.TopK, c.Seed, c.Stop = encStrings[rng.IntN(len(encStrings))], rng.IntN(50), &seed, []string{"</s>", "<&>"}
			c.CacheSalt = "policy-" + encStrings[rng.IntN(len(encStrings))]
		}
		if rng.IntN(4) == 0 {
			c.Prompt = nil
		}
		check(c)
		r := &tokenizeChatRequest{Messages: randChat(rng), AddGenerationPrompt: rng.IntN(2) == 0, ContinueFinalMessage: rng.IntN(2) == 0}
		if rng.IntN(2) == 0 {
			r.Model = "m"
			r.Tools = []trajectory.Tool{{Type: "function", Function: trajectory.ToolFunction{Name: "python", Description: "Run <code>", Parameters: json.RawMessage(`{ "type": "object" }`)}}}
			r.ChatTemplateKwargs = map[string]any{"enable_thinking": false, "x": []int{1}}
		}
		check(r)
		ch := &chatRequest{Messages: randChat(rng), AddGenerationPrompt: rng.IntN(2) == 0, MaxTokens: rng.IntN(9000), Temperature: c.Temperature,
			TopP: c.TopP, Logprobs: rng.IntN(2) == 0, ReturnTokenIDs: rng.IntN(2) == 0, Stream: rng.IntN(2) == 0, IgnoreEOS: c.IgnoreEOS, Priority: c.Priority, CacheSalt: c.CacheSalt}
		if rng.IntN(2) == 0 {
			ch.Model, ch.Tools, ch.ToolChoice, ch.ChatTemplateKwargs = r.Model, r.Tools, "none", r.ChatTemplateKwargs
			ch.TopK, ch.Seed, ch.Stop = c.TopK, c.Seed, c.Stop
		}
		check(ch)
	}
	// NaN cannot be sent: both refuse it.
	check(&completionRequest{Temperature: nan()})
}

func nan() float64 { z := 0.0; return z / z }
