package backend

import (
	json "github.com/goccy/go-json"
	"strconv"

	"github.com/prorl/prorl/core/trajectory"
)

// Every turn sends its whole context as token ids, and every rendering the
// conversation with the tools' schemas: written out, these bodies cost a
// fraction of reflection (and the schemas are compacted once, not each
// time). Byte for byte what encoding/json gives for the request structs
// (TestRequestEncodersMatchEncodingJSON).

// appender is a request body that writes itself.
type appender interface {
	appendJSON(b []byte) ([]byte, error)
}

type jsonWriter struct {
	b     []byte
	err   error
	first bool
}

func (w *jsonWriter) key(k string) {
	if !w.first {
		w.b = append(w.b, ',')
	}
	w.first = false
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

func (w *jsonWriter) str(k, v string) {
	w.key(k)
	w.b = trajectory.AppendJSONString(w.b, v)
}

func (w *jsonWriter) int(k string, v int64) {
	w.key(k)
	w.b = strconv.AppendInt(w.b, v, 10)
}

func (w *jsonWriter) bool(k string, v bool) {
	w.key(k)
	w.b = strconv.AppendBool(w.b, v)
}

func (w *jsonWriter) float(k string, v float64) {
	w.key(k)
	var ok bool
	if w.b, ok = trajectory.AppendJSONFloat(w.b, v); !ok && w.err == nil {
		w.err = &json.UnsupportedValueError{Str: strconv.FormatFloat(v, 'g', -1, 64)}
	}
}

// value writes anything else through the generic encoder (rare fields).
func (w *jsonWriter) value(k string, v any) {
	w.key(k)
	out, err := json.Marshal(v)
	if err != nil && w.err == nil {
		w.err = err
	}
	w.b = append(w.b, out...)
}

func (w *jsonWriter) strs(k string, v []string) {
	w.key(k)
	if v == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, '[')
	for i, s := range v {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = trajectory.AppendJSONString(w.b, s)
	}
	w.b = append(w.b, ']')
}

func (r *completionRequest) appendJSON(b []byte) ([]byte, error) {
	w := &jsonWriter{b: append(b, '{'), first: true}
	if r.Model != "" {
		w.str("model", r.Model)
	}
	w.key("prompt")
	w.b = trajectory.AppendJSONInts(w.b, r.Prompt)
	w.int("max_tokens", int64(r.MaxTokens))
	w.float("temperature", r.Temperature)
	w.float("top_p", r.TopP)
	if r.TopK != 0 {
		w.int("top_k", int64(r.TopK))
	}
	if r.Seed != nil {
		w.int("seed", *r.Seed)
	}
	if len(r.Stop) > 0 {
		w.strs("stop", r.Stop)
	}
	w.int("logprobs", int64(r.Logprobs))
	w.bool("return_tokens_as_token_ids", r.ReturnTokensAsTokenIDs)
	w.bool("skip_special_tokens", r.SkipSpecialTokens)
	w.bool("stream", r.Stream)
	if r.IgnoreEOS {
		w.bool("ignore_eos", r.IgnoreEOS)
	}
	if r.Priority != 0 {
		w.int("priority", int64(r.Priority))
	}
	return append(w.b, '}'), w.err
}

func (r *tokenizeChatRequest) appendJSON(b []byte) ([]byte, error) {
	w := &jsonWriter{b: append(b, '{'), first: true}
	if r.Model != "" {
		w.str("model", r.Model)
	}
	w.key("messages")
	if r.Messages == nil {
		w.b = append(w.b, "null"...)
	} else {
		w.b = append(w.b, '[')
		for i := range r.Messages {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.chatMessage(&r.Messages[i])
		}
		w.b = append(w.b, ']')
	}
	if len(r.Tools) > 0 {
		w.key("tools")
		var err error
		if w.b, err = trajectory.AppendToolsJSON(w.b, r.Tools); err != nil && w.err == nil {
			w.err = err
		}
	}
	w.bool("add_generation_prompt", r.AddGenerationPrompt)
	w.bool("continue_final_message", r.ContinueFinalMessage)
	w.bool("add_special_tokens", r.AddSpecialTokens)
	if len(r.ChatTemplateKwargs) > 0 {
		w.value("chat_template_kwargs", r.ChatTemplateKwargs)
	}
	return append(w.b, '}'), w.err
}

func (w *jsonWriter) chatMessage(m *chatMessage) {
	w.b = append(w.b, '{')
	w.first = true
	w.str("role", m.Role)
	w.str("content", m.Content)
	if len(m.ToolCalls) > 0 {
		w.key("tool_calls")
		w.b = append(w.b, '[')
		for i, c := range m.ToolCalls {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, '{')
			w.first = true
			w.str("id", c.ID)
			w.str("type", c.Type)
			w.key("function")
			w.b = append(w.b, '{')
			w.first = true
			w.str("name", c.Function.Name)
			w.str("arguments", c.Function.Arguments)
			w.b = append(w.b, '}', '}')
		}
		w.b = append(w.b, ']')
	}
	w.first = false
	if m.ToolCallID != "" {
		w.str("tool_call_id", m.ToolCallID)
	}
	if m.Name != "" {
		w.str("name", m.Name)
	}
	if m.ReasoningContent != "" {
		w.str("reasoning_content", m.ReasoningContent)
	}
	w.b = append(w.b, '}')
	w.first = false
}
