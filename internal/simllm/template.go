package simllm

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/prorl/prorl/core/flightcache"
)

// Message is an OpenAI chat message as /tokenize receives it.
type Message struct {
	Role       string          `json:"role"`
	Content    *string         `json:"content"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Name       string          `json:"name,omitempty"`
	Reasoning  string          `json:"reasoning_content,omitempty"`
	Extra      json.RawMessage `json:"-"`
}

// ToolCall in OpenAI format; arguments may be a JSON string or an object.
type ToolCall struct {
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// Tool definition in OpenAI format.
type Tool struct {
	Type     string          `json:"type"`
	Function json.RawMessage `json:"function"`
}

func content(m Message) string {
	if m.Content == nil {
		return ""
	}
	return *m.Content
}

// RenderChat applies the simulator's chat template, a ChatML template in the
// style of Qwen2.5 (tools listed in the system turn, Hermes tool calls,
// consecutive tool results grouped in one user turn):
//
//	<|im_start|>system\n{system}{tools block}<|im_end|>\n
//	<|im_start|>user\n{content}<|im_end|>\n
//	<|im_start|>assistant\n{content}[\n<tool_call>\n{"name": N, "arguments": A}\n</tool_call>]...<|im_end|>\n
//	<|im_start|>user\n<tool_response>\n{content}\n</tool_response>...<|im_end|>\n
//	generation prompt: <|im_start|>assistant\n
func RenderChat(msgs []Message, tools []Tool, addGenerationPrompt bool) string {
	var b strings.Builder
	start := 0
	if len(msgs) > 0 && msgs[0].Role == "system" || len(tools) > 0 {
		b.WriteString("<|im_start|>system\n")
		if len(msgs) > 0 && msgs[0].Role == "system" {
			b.WriteString(content(msgs[0]))
			start = 1
		} else {
			b.WriteString("You are a helpful assistant.")
		}
		if len(tools) > 0 {
			b.WriteString("\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n")
			b.WriteString("You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
			for _, t := range tools {
				b.WriteString("\n")
				b.Write(compactTool(t.Function))
			}
			b.WriteString("\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>")
		}
		b.WriteString("<|im_end|>\n")
	}
	for i := start; i < len(msgs); i++ {
		m := msgs[i]
		switch m.Role {
		case "tool":
			if i == start || msgs[i-1].Role != "tool" {
				b.WriteString("<|im_start|>user")
			}
			b.WriteString("\n<tool_response>\n")
			b.WriteString(content(m))
			b.WriteString("\n</tool_response>")
			if i == len(msgs)-1 || msgs[i+1].Role != "tool" {
				b.WriteString("<|im_end|>\n")
			}
		case "assistant":
			b.WriteString("<|im_start|>assistant\n")
			b.WriteString(content(m))
			for j, c := range m.ToolCalls {
				if j > 0 || content(m) != "" {
					b.WriteString("\n")
				}
				args := c.Function.Arguments
				var s string
				if json.Unmarshal(args, &s) == nil {
					args = json.RawMessage(s)
				}
				b.WriteString("<tool_call>\n{\"name\": ")
				name, _ := json.Marshal(c.Function.Name)
				b.Write(name)
				b.WriteString(", \"arguments\": ")
				b.Write(compactJSON(args))
				b.WriteString("}\n</tool_call>")
			}
			b.WriteString("<|im_end|>\n")
		default:
			b.WriteString("<|im_start|>" + m.Role + "\n")
			b.WriteString(content(m))
			b.WriteString("<|im_end|>\n")
		}
	}
	if addGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
	}
	return b.String()
}

func compactJSON(raw json.RawMessage) []byte {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	out, _ := json.Marshal(v)
	return out
}

// compactTool is compactJSON for a tool's definition, remembered: a client
// sends the same tool definitions with every request, and decoding and
// encoding them again was a tenth of the simulator's CPU per single-turn
// rollout.
func compactTool(raw json.RawMessage) []byte {
	if len(raw) > maxCompactedLen {
		return compactJSON(raw)
	}
	out, _ := compacted.Get(context.Background(), string(raw), func() ([]byte, error) {
		return slices.Clone(compactJSON(raw)), nil // compactJSON returns raw itself when it is not JSON
	})
	return out
}

// compacted keeps the most recent definitions up to maxCompactedLen long.
var compacted = flightcache.New[[]byte](1024)

const maxCompactedLen = 64 << 10
