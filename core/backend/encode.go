package backend

import (
	"github.com/prorl/prorl/core/jsonw"
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

func (r *completionRequest) appendJSON(b []byte) ([]byte, error) {
	w := &jsonw.Writer{B: append(b, '{')}
	if r.Model != "" {
		w.Key("model")
		w.Str(r.Model)
	}
	w.Key("prompt")
	w.Ints(r.Prompt)
	w.Key("max_tokens")
	w.Int(int64(r.MaxTokens))
	w.Key("temperature")
	w.Float(r.Temperature)
	w.Key("top_p")
	w.Float(r.TopP)
	if r.TopK != 0 {
		w.Key("top_k")
		w.Int(int64(r.TopK))
	}
	if r.Seed != nil {
		w.Key("seed")
		w.Int(*r.Seed)
	}
	if len(r.Stop) > 0 {
		w.Key("stop")
		w.Strs(r.Stop)
	}
	w.Key("logprobs")
	w.Int(int64(r.Logprobs))
	w.Key("return_tokens_as_token_ids")
	w.Bool(r.ReturnTokensAsTokenIDs)
	w.Key("skip_special_tokens")
	w.Bool(r.SkipSpecialTokens)
	w.Key("stream")
	w.Bool(r.Stream)
	if r.IgnoreEOS {
		w.Key("ignore_eos")
		w.Bool(r.IgnoreEOS)
	}
	if r.Priority != 0 {
		w.Key("priority")
		w.Int(int64(r.Priority))
	}
	return append(w.B, '}'), w.Err
}

func (r *tokenizeChatRequest) appendJSON(b []byte) ([]byte, error) {
	w := &jsonw.Writer{B: append(b, '{')}
	if r.Model != "" {
		w.Key("model")
		w.Str(r.Model)
	}
	w.Key("messages")
	w.List(r.Messages == nil, len(r.Messages), func(i int) { writeChatMessage(w, &r.Messages[i]) })
	if len(r.Tools) > 0 {
		w.Key("tools")
		trajectory.WriteTools(w, r.Tools)
	}
	w.Key("add_generation_prompt")
	w.Bool(r.AddGenerationPrompt)
	w.Key("continue_final_message")
	w.Bool(r.ContinueFinalMessage)
	w.Key("add_special_tokens")
	w.Bool(r.AddSpecialTokens)
	if len(r.ChatTemplateKwargs) > 0 {
		w.Key("chat_template_kwargs")
		w.Value(r.ChatTemplateKwargs)
	}
	return append(w.B, '}'), w.Err
}

func (r *chatRequest) appendJSON(b []byte) ([]byte, error) {
	w := &jsonw.Writer{B: append(b, '{')}
	if r.Model != "" {
		w.Key("model")
		w.Str(r.Model)
	}
	w.Key("messages")
	w.List(r.Messages == nil, len(r.Messages), func(i int) { writeChatMessage(w, &r.Messages[i]) })
	if len(r.Tools) > 0 {
		w.Key("tools")
		trajectory.WriteTools(w, r.Tools)
	}
	if r.ToolChoice != "" {
		w.Key("tool_choice")
		w.Str(r.ToolChoice)
	}
	w.Key("add_generation_prompt")
	w.Bool(r.AddGenerationPrompt)
	if len(r.ChatTemplateKwargs) > 0 {
		w.Key("chat_template_kwargs")
		w.Value(r.ChatTemplateKwargs)
	}
	w.Key("max_tokens")
	w.Int(int64(r.MaxTokens))
	w.Key("temperature")
	w.Float(r.Temperature)
	w.Key("top_p")
	w.Float(r.TopP)
	if r.TopK != 0 {
		w.Key("top_k")
		w.Int(int64(r.TopK))
	}
	if r.Seed != nil {
		w.Key("seed")
		w.Int(*r.Seed)
	}
	if len(r.Stop) > 0 {
		w.Key("stop")
		w.Strs(r.Stop)
	}
	w.Key("logprobs")
	w.Bool(r.Logprobs)
	w.Key("return_token_ids")
	w.Bool(r.ReturnTokenIDs)
	w.Key("skip_special_tokens")
	w.Bool(r.SkipSpecialTokens)
	w.Key("stream")
	w.Bool(r.Stream)
	if r.IgnoreEOS {
		w.Key("ignore_eos")
		w.Bool(r.IgnoreEOS)
	}
	if r.Priority != 0 {
		w.Key("priority")
		w.Int(int64(r.Priority))
	}
	return append(w.B, '}'), w.Err
}

func writeChatMessage(w *jsonw.Writer, m *chatMessage) {
	w.Raw("{")
	w.Key("role")
	w.Str(m.Role)
	w.Key("content")
	w.Str(m.Content)
	if len(m.ToolCalls) > 0 {
		w.Key("tool_calls")
		trajectory.WriteToolCalls(w, m.ToolCalls)
	}
	if m.ToolCallID != "" {
		w.Key("tool_call_id")
		w.Str(m.ToolCallID)
	}
	if m.Name != "" {
		w.Key("name")
		w.Str(m.Name)
	}
	if m.ReasoningContent != "" {
		w.Key("reasoning_content")
		w.Str(m.ReasoningContent)
	}
	w.Raw("}")
}
