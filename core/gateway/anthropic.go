package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/prorl/prorl/core/gateway/session"
	"github.com/prorl/prorl/core/trajectory"
)

// Anthropic Messages (POST /v1/messages), as the anthropic SDKs and Claude
// Code send it.
type messagesRequest struct {
	Model         string             `json:"model"`
	MaxTokens     *int               `json:"max_tokens"`
	Messages      []anthropicMessage `json:"messages"`
	System        anthropicBlocks    `json:"system"`
	Tools         []anthropicTool    `json:"tools"`
	ToolChoice    json.RawMessage    `json:"tool_choice"`
	Stream        bool               `json:"stream"`
	StopSequences []string           `json:"stop_sequences"`
	Thinking      *struct {
		Type string `json:"type"`
	} `json:"thinking"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content anthropicBlocks `json:"content"`
}

type anthropicTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// anthropicBlocks is content: a string, or a list of blocks.
type anthropicBlocks []anthropicBlock

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   anthropicBlocks `json:"content"`
	IsError   bool            `json:"is_error"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
}

func (b *anthropicBlocks) UnmarshalJSON(data []byte) error {
	return oneOrList(data, (*[]anthropicBlock)(b), func(s string) []anthropicBlock { return []anthropicBlock{{Type: "text", Text: s}} },
		"content", "a string or a list of content blocks")
}

// text joins text blocks; another block type is an error naming it.
func (b anthropicBlocks) text(field string) (string, *apiError) {
	var parts []string
	for i, bl := range b {
		if bl.Type != "text" {
			return "", invalidf(fmt.Sprintf("%s[%d].type", field, i), "content block %q is not supported here (text only)", bl.Type)
		}
		parts = append(parts, bl.Text)
	}
	return strings.Join(parts, "\n"), nil
}

func (q *messagesRequest) call() (session.Call, *apiError) {
	var c session.Call
	if q.MaxTokens == nil {
		return c, invalidf("max_tokens", "required")
	}
	if *q.MaxTokens < 1 {
		return c, invalidf("max_tokens", "must be at least 1")
	}
	c.MaxTokens = *q.MaxTokens
	if len(q.Messages) == 0 {
		return c, invalidf("messages", "at least one message is required")
	}
	if len(q.System) > 0 {
		sys, aerr := q.System.text("system")
		if aerr != nil {
			return c, aerr
		}
		c.Messages = append(c.Messages, trajectory.Message{Role: "system", Content: sys})
	}
	for i, m := range q.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "user":
			// Tool results become tool messages, text a user message, in
			// their order; consecutive texts join into one message.
			var text []string
			flush := func() {
				if len(text) > 0 {
					c.Messages = append(c.Messages, trajectory.Message{Role: "user", Content: strings.Join(text, "\n")})
					text = nil
				}
			}
			for j, bl := range m.Content {
				switch bl.Type {
				case "text":
					text = append(text, bl.Text)
				case "tool_result":
					flush()
					out, aerr := bl.Content.text(fmt.Sprintf("%s.content[%d].content", field, j))
					if aerr != nil {
						return c, aerr
					}
					c.Messages = append(c.Messages, trajectory.Message{Role: "tool", Content: out, ToolCallID: bl.ToolUseID})
				default:
					return c, invalidf(fmt.Sprintf("%s.content[%d].type", field, j), "content block %q is not supported in a user message (text, tool_result)", bl.Type)
				}
			}
			flush()
			if len(m.Content) == 0 {
				c.Messages = append(c.Messages, trajectory.Message{Role: "user"})
			}
		case "assistant":
			am := trajectory.Message{Role: "assistant"}
			var text []string
			for j, bl := range m.Content {
				switch bl.Type {
				case "text":
					text = append(text, bl.Text)
				case "thinking":
					am.ReasoningContent = bl.Thinking
				case "redacted_thinking":
				case "tool_use":
					args := string(bl.Input)
					if len(bl.Input) == 0 || args == "null" {
						args = "{}"
					}
					am.ToolCalls = append(am.ToolCalls, trajectory.ToolCall{ID: bl.ID, Type: "function", Function: trajectory.FunctionCall{Name: bl.Name, Arguments: args}})
				default:
					return c, invalidf(fmt.Sprintf("%s.content[%d].type", field, j), "content block %q is not supported in an assistant message", bl.Type)
				}
			}
			am.Content = strings.Join(text, "")
			c.Messages = append(c.Messages, am)
		case "system":
			// Claude Code sends instructions mid-conversation as system messages.
			text, aerr := m.Content.text(field + ".content")
			if aerr != nil {
				return c, aerr
			}
			c.Messages = append(c.Messages, trajectory.Message{Role: "system", Content: text})
		default:
			return c, invalidf(field+".role", "unknown role %q (user, assistant, system)", m.Role)
		}
	}
	if q.Messages[len(q.Messages)-1].Role == "assistant" {
		return c, invalidf(fmt.Sprintf("messages[%d].role", len(q.Messages)-1), "a final assistant message (prefill) is not supported")
	}
	none, aerr := toolChoiceNone(q.ToolChoice, "tool_choice")
	if aerr != nil {
		return c, aerr
	}
	if !none {
		for i, t := range q.Tools {
			if t.Type != "" && t.Type != "custom" {
				// A server tool runs at the provider; the gateway has none,
				// so the policy is not shown it (a harness must not stop for it).
				continue
			}
			if t.Name == "" {
				return c, invalidf(fmt.Sprintf("tools[%d].name", i), "empty")
			}
			c.Tools = append(c.Tools, trajectory.Tool{Type: "function", Function: trajectory.ToolFunction{Name: t.Name, Description: t.Description, Parameters: objectSchema(t.InputSchema)}})
		}
	}
	c.Stop = q.StopSequences
	return c, nil
}

func (g *Gateway) messages(w http.ResponseWriter, r *http.Request, s *session.Session, _ provider) *apiError {
	var q messagesRequest
	rep, aerr := g.complete(w, r, s, &q, q.call)
	if aerr != nil {
		return aerr
	}
	model := modelName(q.Model, s)
	m := rep.Message
	stop := map[string]string{"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}[rep.FinishReason]
	thinking := q.Thinking != nil && q.Thinking.Type == "enabled" && m.ReasoningContent != ""
	var blocks []map[string]any
	if thinking {
		blocks = append(blocks, map[string]any{"type": "thinking", "thinking": m.ReasoningContent, "signature": signature(m.ReasoningContent)})
	}
	if m.Content != "" {
		blocks = append(blocks, map[string]any{"type": "text", "text": m.Content})
	}
	for _, tc := range m.ToolCalls {
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Function.Name, "input": inputObject(tc.Function.Arguments)})
	}
	if blocks == nil {
		blocks = []map[string]any{}
	}
	usage := map[string]any{"input_tokens": rep.PromptTokens, "output_tokens": rep.CompletionTokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	id := "msg_" + rep.ID
	if !q.Stream {
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "type": "message", "role": "assistant", "model": model, "content": blocks,
			"stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return nil
	}
	out := newSSE(w)
	out.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message", "role": "assistant",
		"model": model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": rep.PromptTokens, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})
	for i, b := range blocks {
		switch b["type"] {
		case "thinking":
			out.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			out.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": b["thinking"]}})
			out.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "signature_delta", "signature": b["signature"]}})
		case "text":
			out.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			out.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		case "tool_use":
			in, _ := json.Marshal(b["input"])
			out.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			out.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		}
		out.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	out.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": rep.CompletionTokens}})
	out.event("message_stop", map[string]any{"type": "message_stop"})
	return nil
}

// inputObject is a tool call's arguments as the JSON value Anthropic's
// input field holds.
func inputObject(args string) json.RawMessage {
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	b, _ := json.Marshal(map[string]string{"raw": args})
	return b
}

// signature stands in for Anthropic's thinking signature: the gateway does
// not check it (a harness sends thinking back only to be compared).
func signature(thinking string) string { return fmt.Sprintf("prorl-%d", len(thinking)) }

func (g *Gateway) countTokens(w http.ResponseWriter, r *http.Request, s *session.Session, _ provider) *apiError {
	var q messagesRequest
	n, aerr := g.count(w, r, s, &q, func() (session.Call, *apiError) {
		one := 1
		q.MaxTokens = &one // count_tokens has no max_tokens
		return q.call()
	}, "messages")
	if aerr != nil {
		return aerr
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": n})
	return nil
}
