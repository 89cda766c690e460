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

// OpenAI Responses (POST /v1/responses), as the openai SDKs and Codex send
// it: the whole conversation as input items every call (the gateway keeps
// no responses, so previous_response_id is refused by name).
type responsesRequest struct {
	Model              string          `json:"model"`
	Input              responsesInput  `json:"input"`
	Instructions       string          `json:"instructions"`
	Tools              []responsesTool `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Stream             bool            `json:"stream"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	PreviousResponseID string          `json:"previous_response_id"`
	Text               *struct {
		Format *struct {
			Type string `json:"type"`
		} `json:"format"`
	} `json:"text"`
}

type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	// Tools of a namespace (Codex groups its sub-agent tools in one).
	Tools []responsesTool `json:"tools"`
}

// hostedTools run at the provider, not in the harness: the gateway has
// none to run, so the policy is not shown them (Codex always offers
// web_search; refusing it would stop the harness).
var hostedTools = map[string]bool{"web_search": true, "web_search_preview": true, "file_search": true, "code_interpreter": true,
	"image_generation": true, "computer_use_preview": true, "mcp": true}

// functionTools flattens function tools and namespaces of them; ns maps a
// namespaced tool's name to its namespace, which its calls must name.
func functionTools(tools []responsesTool, field string, ns map[string]string) ([]trajectory.Tool, *apiError) {
	var out []trajectory.Tool
	for i, t := range tools {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case hostedTools[t.Type]:
		case t.Type == "namespace":
			inner, aerr := functionTools(t.Tools, f+".tools", nil)
			if aerr != nil {
				return nil, aerr
			}
			for _, it := range inner {
				if ns != nil {
					ns[it.Function.Name] = t.Name
				}
			}
			out = append(out, inner...)
		case t.Type == "function":
			if t.Name == "" {
				return nil, invalidf(f+".name", "empty")
			}
			out = append(out, trajectory.Tool{Type: "function", Function: trajectory.ToolFunction{Name: t.Name, Description: t.Description, Parameters: objectSchema(t.Parameters)}})
		default:
			return nil, invalidf(f+".type", "tool type %q is not supported (function, namespace; hosted tools are left out)", t.Type)
		}
	}
	return out, nil
}

type responsesItem struct {
	Type      string      `json:"type"`
	Role      string      `json:"role"`
	Content   chatContent `json:"content"`
	CallID    string      `json:"call_id"`
	Name      string      `json:"name"`
	Arguments string      `json:"arguments"`
	Output    chatContent `json:"output"`
	Summary   []struct {
		Text string `json:"text"`
	} `json:"summary"`
}

// responsesInput is a string (one user message) or a list of items.
type responsesInput []responsesItem

func (in *responsesInput) UnmarshalJSON(b []byte) error {
	return oneOrList(b, (*[]responsesItem)(in), func(s string) []responsesItem {
		return []responsesItem{{Type: "message", Role: "user", Content: chatContent{Text: s}}}
	}, "input", "a string or a list of input items")
}

// call converts the request; the map gives each namespaced tool its
// namespace (a call of it names it).
func (q *responsesRequest) call() (c session.Call, ns map[string]string, aerr *apiError) {
	ns = map[string]string{}
	if q.PreviousResponseID != "" {
		return c, nil, invalidf("previous_response_id", "the gateway keeps no responses: send the whole conversation as input (store: false)")
	}
	if q.Text != nil && q.Text.Format != nil && q.Text.Format.Type != "" && q.Text.Format.Type != "text" {
		return c, nil, invalidf("text.format.type", "format %q needs constrained decoding, which would sample off-policy", q.Text.Format.Type)
	}
	if len(q.Input) == 0 {
		return c, nil, invalidf("input", "at least one input item is required")
	}
	if q.Instructions != "" {
		c.Messages = append(c.Messages, trajectory.Message{Role: "system", Content: q.Instructions})
	}
	// Reasoning, an assistant message and function calls in a row are one
	// assistant turn, as the API returned them.
	inTurn := false
	turn := func() *trajectory.Message {
		if !inTurn {
			c.Messages = append(c.Messages, trajectory.Message{Role: "assistant"})
			inTurn = true
		}
		return &c.Messages[len(c.Messages)-1]
	}
	for i, it := range q.Input {
		field := fmt.Sprintf("input[%d]", i)
		if it.Content.badPart != "" {
			return c, nil, invalidf(fmt.Sprintf("%s.content[%d].type", field, it.Content.badIdx), "content part %q is not supported (text only)", it.Content.badPart)
		}
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			switch it.Role {
			case "assistant":
				m := turn()
				m.Content += it.Content.Text
			case "user", "system", "developer":
				inTurn = false
				role := it.Role
				if role == "developer" {
					role = "system"
				}
				c.Messages = append(c.Messages, trajectory.Message{Role: role, Content: it.Content.Text})
			default:
				return c, nil, invalidf(field+".role", "unknown role %q", it.Role)
			}
		case "reasoning":
			m := turn()
			var parts []string
			for _, s := range it.Summary {
				parts = append(parts, s.Text)
			}
			m.ReasoningContent = strings.Join(parts, "\n")
		case "function_call":
			if it.Name == "" {
				return c, nil, invalidf(field+".name", "empty")
			}
			args := it.Arguments
			if args == "" {
				args = "{}"
			}
			m := turn()
			m.ToolCalls = append(m.ToolCalls, trajectory.ToolCall{ID: it.CallID, Type: "function", Function: trajectory.FunctionCall{Name: it.Name, Arguments: args}})
		case "function_call_output":
			inTurn = false
			if it.Output.badPart != "" {
				return c, nil, invalidf(fmt.Sprintf("%s.output[%d].type", field, it.Output.badIdx), "output part %q is not supported (text only)", it.Output.badPart)
			}
			c.Messages = append(c.Messages, trajectory.Message{Role: "tool", Content: it.Output.Text, ToolCallID: it.CallID})
		default:
			return c, nil, invalidf(field+".type", "input item %q is not supported (message, reasoning, function_call, function_call_output)", typ)
		}
	}
	if inTurn {
		return c, nil, invalidf(fmt.Sprintf("input[%d]", len(q.Input)-1), "the input ends with an assistant turn (prefill is not supported)")
	}
	none, aerr := toolChoiceNone(q.ToolChoice, "tool_choice")
	if aerr != nil {
		return c, nil, aerr
	}
	if !none {
		if c.Tools, aerr = functionTools(q.Tools, "tools", ns); aerr != nil {
			return c, nil, aerr
		}
	}
	if q.MaxOutputTokens != nil {
		if *q.MaxOutputTokens < 1 {
			return c, nil, invalidf("max_output_tokens", "must be at least 1")
		}
		c.MaxTokens = *q.MaxOutputTokens
	}
	return c, ns, nil
}

func (g *Gateway) responses(w http.ResponseWriter, r *http.Request, s *session.Session, _ provider) *apiError {
	var q responsesRequest
	var ns map[string]string
	rep, aerr := g.complete(w, r, s, &q, func() (c session.Call, aerr *apiError) {
		c, ns, aerr = q.call()
		return c, aerr
	})
	if aerr != nil {
		return aerr
	}
	model := modelName(q.Model, s)
	m := rep.Message
	var items []map[string]any
	if m.ReasoningContent != "" {
		items = append(items, map[string]any{"type": "reasoning", "id": "rs_" + rep.ID, "summary": []any{map[string]any{"type": "summary_text", "text": m.ReasoningContent}}})
	}
	if m.Content != "" || len(m.ToolCalls) == 0 {
		items = append(items, map[string]any{"type": "message", "id": "msg_" + rep.ID, "status": "completed", "role": "assistant",
			"content": []any{outputText(m.Content)}})
	}
	for i, tc := range m.ToolCalls {
		item := map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%s_%d", rep.ID, i), "call_id": tc.ID,
			"name": tc.Function.Name, "arguments": tc.Function.Arguments, "status": "completed"}
		if n, ok := ns[tc.Function.Name]; ok {
			item["namespace"] = n
		}
		items = append(items, item)
	}
	resp := map[string]any{"id": "resp_" + rep.ID, "object": "response", "created_at": time.Now().Unix(), "status": "completed",
		"error": nil, "incomplete_details": nil, "model": model, "output": items, "parallel_tool_calls": true,
		"previous_response_id": nil, "store": false, "tool_choice": "auto", "tools": []any{}, "text": map[string]any{"format": map[string]any{"type": "text"}},
		"usage": map[string]any{"input_tokens": rep.PromptTokens, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": rep.CompletionTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens": rep.PromptTokens + rep.CompletionTokens}}
	if rep.FinishReason == "length" {
		resp["status"], resp["incomplete_details"] = "incomplete", map[string]any{"reason": "max_output_tokens"}
	}
	if !q.Stream {
		writeJSON(w, http.StatusOK, resp)
		return nil
	}
	out := newSSE(w)
	seq := 0
	emit := func(typ string, v map[string]any) {
		v["type"], v["sequence_number"] = typ, seq
		seq++
		out.event(typ, v)
	}
	started := map[string]any{}
	for k, v := range resp {
		started[k] = v
	}
	started["status"], started["output"], started["usage"], started["incomplete_details"] = "in_progress", []any{}, nil, nil
	emit("response.created", map[string]any{"response": started})
	emit("response.in_progress", map[string]any{"response": started})
	for i, it := range items {
		id, _ := it["id"].(string)
		switch it["type"] {
		case "message":
			emit("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{"type": "message", "id": id, "status": "in_progress", "role": "assistant", "content": []any{}}})
			emit("response.content_part.added", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "part": outputText("")})
			emit("response.output_text.delta", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "delta": m.Content, "logprobs": []any{}})
			emit("response.output_text.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "text": m.Content, "logprobs": []any{}})
			emit("response.content_part.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "part": outputText(m.Content)})
		case "function_call":
			added := map[string]any{}
			for k, v := range it {
				added[k] = v
			}
			added["arguments"], added["status"] = "", "in_progress"
			emit("response.output_item.added", map[string]any{"output_index": i, "item": added})
			emit("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": it["arguments"]})
			emit("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "arguments": it["arguments"]})
		default:
			emit("response.output_item.added", map[string]any{"output_index": i, "item": it})
		}
		emit("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	final := "response.completed"
	if resp["status"] == "incomplete" {
		final = "response.incomplete"
	}
	emit(final, map[string]any{"response": resp})
	return nil
}

func outputText(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
}

func (g *Gateway) responsesInputTokens(w http.ResponseWriter, r *http.Request, s *session.Session, _ provider) *apiError {
	var q responsesRequest
	n, aerr := g.count(w, r, s, &q, func() (session.Call, *apiError) {
		c, _, aerr := q.call()
		return c, aerr
	}, "input")
	if aerr != nil {
		return aerr
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "response.input_tokens", "input_tokens": n})
	return nil
}
