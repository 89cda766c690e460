package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prorl/prorl/core/gateway/session"
	"github.com/prorl/prorl/core/trajectory"
)

// OpenAI Chat Completions (POST /v1/chat/completions), as the openai SDKs
// and OpenAI-compatible harnesses send it.
type chatRequest struct {
	Model         string          `json:"model"`
	Messages      []chatMessage   `json:"messages"`
	Tools         []chatTool      `json:"tools"`
	ToolChoice    json.RawMessage `json:"tool_choice"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int       `json:"max_tokens"`
	MaxCompletionTokens *int       `json:"max_completion_tokens"`
	N                   *int       `json:"n"`
	Stop                stringList `json:"stop"`
	ResponseFormat      *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	Logprobs bool `json:"logprobs"`
	// temperature, top_p, seed and the penalties are the harness's wish;
	// the session samples with the trainer's settings (read and ignored).
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    chatContent    `json:"content"`
	Name       string         `json:"name"`
	ToolCalls  []chatToolCall `json:"tool_calls"`
	ToolCallID string         `json:"tool_call_id"`
	// Reasoning a harness echoes back (vLLM's field names) is not part of
	// what is compared: harnesses drop it as often as they keep it.
	ReasoningContent string `json:"reasoning_content"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// chatContent is a message's content: a string, null, or a list of parts
// of which text parts are supported.
type chatContent struct {
	Text    string
	badPart string // the type of a part the gateway cannot render
	badIdx  int
}

func (c *chatContent) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &c.Text)
	}
	var parts []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return &fieldError{field: "content", msg: "must be a string, null or a list of content parts"}
	}
	var texts []string
	for i, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			texts = append(texts, p.Text)
		case "refusal":
			texts = append(texts, p.Refusal)
		default:
			if c.badPart == "" {
				c.badPart, c.badIdx = p.Type, i
			}
		}
	}
	// Text parts join with a newline, as vLLM renders them.
	c.Text = strings.Join(texts, "\n")
	return nil
}

// stringList is a string or a list of strings (stop).
type stringList []string

func (s *stringList) UnmarshalJSON(b []byte) error {
	return oneOrList(b, (*[]string)(s), func(one string) []string { return []string{one} }, "stop", "a string or a list of strings")
}

// oneOrList decodes a field the APIs allow as a string (one makes it a
// list) or as a list; null leaves it empty.
func oneOrList[T any](b []byte, dst *[]T, one func(string) []T, field, what string) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*dst = one(s)
		return nil
	}
	var many []T
	if err := json.Unmarshal(b, &many); err != nil {
		return &fieldError{field: field, msg: "must be " + what + ": " + err.Error()}
	}
	*dst = many
	return nil
}

// toolChoice reads tool_choice: "auto", "none", "required" or a named
// function. Only "none" changes what is rendered (no tools shown, none
// parsed); the others leave the choice to the model, since constraining
// decoding would sample from another distribution than the policy's.
func toolChoiceNone(raw json.RawMessage, field string) (bool, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "required", "any":
			return false, nil
		case "none":
			return true, nil
		}
		return false, invalidf(field, "unknown tool_choice %q (auto, none, required)", s)
	}
	var o struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &o) != nil {
		return false, invalidf(field, "must be a string or an object")
	}
	switch o.Type {
	case "function", "tool", "auto", "any", "allowed_tools", "custom":
		return false, nil
	case "none":
		return true, nil
	}
	return false, invalidf(field, "unknown tool_choice type %q", o.Type)
}

func (q *chatRequest) call() (session.Call, *apiError) {
	var c session.Call
	if len(q.Messages) == 0 {
		return c, invalidf("messages", "at least one message is required")
	}
	if q.N != nil && *q.N != 1 {
		return c, invalidf("n", "only n=1 is supported: each choice would be a separate rollout")
	}
	if q.ResponseFormat != nil && q.ResponseFormat.Type != "" && q.ResponseFormat.Type != "text" {
		return c, invalidf("response_format", "response_format %q needs constrained decoding, which would sample off-policy", q.ResponseFormat.Type)
	}
	for i, m := range q.Messages {
		field := fmt.Sprintf("messages[%d]", i)
		if m.Content.badPart != "" {
			return c, invalidf(fmt.Sprintf("%s.content[%d].type", field, m.Content.badIdx), "content part %q is not supported (text only)", m.Content.badPart)
		}
		tm := trajectory.Message{Role: m.Role, Content: m.Content.Text, Name: m.Name, ToolCallID: m.ToolCallID, ReasoningContent: m.ReasoningContent}
		switch m.Role {
		case "system", "user", "assistant", "tool":
		case "developer":
			tm.Role = "system" // chat templates know system, not developer
		default:
			return c, invalidf(field+".role", "unknown role %q", m.Role)
		}
		if m.Role != "tool" {
			tm.ToolCallID = ""
		}
		for j, tc := range m.ToolCalls {
			if tc.Function.Name == "" {
				return c, invalidf(fmt.Sprintf("%s.tool_calls[%d].function.name", field, j), "empty")
			}
			args := tc.Function.Arguments
			if args == "" {
				args = "{}"
			}
			tm.ToolCalls = append(tm.ToolCalls, trajectory.ToolCall{ID: tc.ID, Type: "function", Function: trajectory.FunctionCall{Name: tc.Function.Name, Arguments: args}})
		}
		c.Messages = append(c.Messages, tm)
	}
	if n := c.Messages[len(c.Messages)-1]; n.Role == "assistant" {
		return c, invalidf(fmt.Sprintf("messages[%d].role", len(c.Messages)-1), "a final assistant message (prefill) is not supported")
	}
	none, aerr := toolChoiceNone(q.ToolChoice, "tool_choice")
	if aerr != nil {
		return c, aerr
	}
	if !none {
		for i, t := range q.Tools {
			if t.Type != "function" {
				return c, invalidf(fmt.Sprintf("tools[%d].type", i), "tool type %q is not supported (function only)", t.Type)
			}
			if t.Function.Name == "" {
				return c, invalidf(fmt.Sprintf("tools[%d].function.name", i), "empty")
			}
			c.Tools = append(c.Tools, trajectory.Tool{Type: "function", Function: trajectory.ToolFunction{Name: t.Function.Name, Description: t.Function.Description, Parameters: objectSchema(t.Function.Parameters)}})
		}
	}
	switch {
	case q.MaxCompletionTokens != nil:
		c.MaxTokens = *q.MaxCompletionTokens
	case q.MaxTokens != nil:
		c.MaxTokens = *q.MaxTokens
	}
	if c.MaxTokens < 0 {
		return c, invalidf("max_tokens", "must not be negative")
	}
	c.Stop = q.Stop
	return c, nil
}

func objectSchema(p json.RawMessage) json.RawMessage {
	if len(p) == 0 || string(p) == "null" {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return p
}

type chatToolCallOut struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func chatCalls(m trajectory.Message, indexed bool) []chatToolCallOut {
	out := make([]chatToolCallOut, len(m.ToolCalls))
	for i, tc := range m.ToolCalls {
		out[i].ID, out[i].Type = tc.ID, "function"
		out[i].Function.Name, out[i].Function.Arguments = tc.Function.Name, tc.Function.Arguments
		if indexed {
			out[i].Index = &i
		}
	}
	return out
}

func (g *Gateway) chatCompletions(w http.ResponseWriter, r *http.Request, s *session.Session, _ provider) *apiError {
	var q chatRequest
	rep, aerr := g.complete(w, r, s, &q, q.call)
	if aerr != nil {
		return aerr
	}
	model := modelName(q.Model, s)
	id, created := "chatcmpl-"+rep.ID, time.Now().Unix()
	usage := map[string]int{"prompt_tokens": rep.PromptTokens, "completion_tokens": rep.CompletionTokens, "total_tokens": rep.PromptTokens + rep.CompletionTokens}
	m := rep.Message
	if !q.Stream {
		msg := map[string]any{"role": "assistant", "content": nilIfEmpty(m.Content, len(m.ToolCalls) > 0), "refusal": nil}
		if len(m.ToolCalls) > 0 {
			msg["tool_calls"] = chatCalls(m, false)
		}
		if m.ReasoningContent != "" {
			msg["reasoning_content"] = m.ReasoningContent
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "chat.completion", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": rep.FinishReason, "logprobs": nil}}, "usage": usage})
		return nil
	}
	// The reply is generated whole, then streamed as OpenAI chunks: an RL
	// rollout has no reader waiting on the first token.
	out := newSSE(w)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}}}
	}
	out.event("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	if m.ReasoningContent != "" {
		out.event("", chunk(map[string]any{"reasoning_content": m.ReasoningContent}, nil))
	}
	if m.Content != "" {
		out.event("", chunk(map[string]any{"content": m.Content}, nil))
	}
	if len(m.ToolCalls) > 0 {
		out.event("", chunk(map[string]any{"tool_calls": chatCalls(m, true)}, nil))
	}
	out.event("", chunk(map[string]any{}, rep.FinishReason))
	if q.StreamOptions != nil && q.StreamOptions.IncludeUsage {
		out.event("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model, "choices": []any{}, "usage": usage})
	}
	out.raw("[DONE]")
	return nil
}

func nilIfEmpty(s string, toolCalls bool) any {
	if s == "" && toolCalls {
		return nil
	}
	return s
}
