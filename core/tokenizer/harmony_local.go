package tokenizer

import (
	"fmt"

	"github.com/prorl/prorl/core/tokenizer/harmony"
	"github.com/prorl/prorl/core/trajectory"
)

// loadHarmony finishes loading a model rendered in the harmony format: its
// tokenizer must have harmony's tokens. A turn's end for the splicer is
// <|call|> (a tool call), <|return|> (the answer) or <|end|> (the history's
// form of an answer).
func (l *Local) loadHarmony(dir string) (*Local, error) {
	if err := l.opts.HarmonyOptions.Validate(); err != nil {
		return nil, err
	}
	l.stops = nil
	for _, t := range []string{"<|start|>", "<|message|>", "<|channel|>", "<|call|>", "<|return|>", "<|end|>", "<|constrain|>"} {
		id, ok := l.tok.TokenID(t)
		if !ok || !l.tok.IsAdded(id) {
			return nil, fmt.Errorf("%s: the harmony format needs the token %s (GPT-OSS's tokenizer)", dir, t)
		}
		switch t {
		case "<|call|>", "<|return|>", "<|end|>":
			l.stops = append(l.stops, id)
		}
	}
	return l, nil
}

// renderHarmony renders with the harmony format. The splicer's
// placeholder for a generated turn followed by tool results becomes a
// tool call carrying the placeholder, so the observation that follows
// starts after <|call|>, as it does after a real call. A template kwarg
// reasoning_effort overrides the configured one.
func (l *Local) renderHarmony(msgs []trajectory.Message, tools []trajectory.Tool, opts RenderOptions) (string, error) {
	ho := l.opts.HarmonyOptions
	ho.AddGenerationPrompt = opts.AddGenerationPrompt
	if e, ok := opts.Kwargs["reasoning_effort"].(string); ok {
		ho.ReasoningEffort = e
	}
	for i, m := range msgs {
		if m.Role != "assistant" || m.Content != assistantMark || len(m.ToolCalls) > 0 || i+1 >= len(msgs) || msgs[i+1].Role != "tool" {
			continue
		}
		msgs = append([]trajectory.Message(nil), msgs...)
		call := msgs[i]
		call.Content = ""
		for _, t := range msgs[i+1:] {
			if t.Role != "tool" {
				break
			}
			name := t.Name
			if name == "" {
				name = "tool"
			}
			call.ToolCalls = append(call.ToolCalls, trajectory.ToolCall{ID: t.ToolCallID, Type: "function", Function: trajectory.FunctionCall{Name: name, Arguments: assistantMark}})
		}
		msgs[i] = call
		break
	}
	return harmony.Render(msgs, tools, ho)
}
