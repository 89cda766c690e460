package engine

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
	writeSampling(w, r.MaxTokens, r.Temperature, r.TopP, r.TopK, r.Seed, r.Stop)
	w.Key("logprobs")
	w.Int(int64(r.Logprobs))
	w.Key("return_tokens_as_token_ids")
	w.Bool(r.ReturnTokensAsTokenIDs)
	writeFlags(w, r.SkipSpecialTokens, r.Stream, r.IgnoreEOS, r.Priority, r.CacheSalt)
	return append(w.B, '}'), w.Err
}

func (r *tokenizeChatRequest) appendJSON(b []byte) ([]byte, error) {
	w := &jsonw.Writer{B: append(b, '{')}
	if r.Model != "" {
		w.Key("model")
		w.Str(r.Model)
	}
	w.Key("messages")
	trajectory.WriteMessages(w, r.Messages)
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
	trajectory.WriteMessages(w, r.Messages)
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
	writeSampling(w, r.MaxTokens, r.Temperature, r.TopP, r.TopK, r.Seed, r.Stop)
	w.Key("logprobs")
	w.Bool(r.Logprobs)
	w.Key("return_token_ids")
	w.Bool(r.ReturnTokenIDs)
	writeFlags(w, r.SkipSpecialTokens, r.Stream, r.IgnoreEOS, r.Priority, r.CacheSalt)
	return append(w.B, '}'), w.Err
}

// writeSampling writes the sampling fields the completion and chat
// requests share, in their order.
func writeSampling(w *jsonw.Writer, maxTokens int, temperature, topP float64, topK int, seed *int64, stop []string) {
	w.Key("max_tokens")
	w.Int(int64(maxTokens))
	w.Key("temperature")
	w.Float(temperature)
	w.Key("top_p")
	w.Float(topP)
	if topK != 0 {
		w.Key("top_k")
		w.Int(int64(topK))
	}
	if seed != nil {
		w.Key("seed")
		w.Int(*seed)
	}
	if len(stop) > 0 {
		w.Key("stop")
		w.Strs(stop)
	}
}

// writeFlags writes the fields both requests end with.
func writeFlags(w *jsonw.Writer, skipSpecialTokens, stream, ignoreEOS bool, priority int, cacheSalt string) {
	w.Key("skip_special_tokens")
	w.Bool(skipSpecialTokens)
	w.Key("stream")
	w.Bool(stream)
	if ignoreEOS {
		w.Key("ignore_eos")
		w.Bool(ignoreEOS)
	}
	if priority != 0 {
		w.Key("priority")
		w.Int(int64(priority))
	}
	if cacheSalt != "" {
		w.Key("cache_salt")
		w.Str(cacheSalt)
	}
}
