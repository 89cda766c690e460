package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/trajectory"
)

// ChatRequest is a first turn the server renders itself: the messages and
// tools in, the prompt's ids and the generation out, in one exchange
// instead of /tokenize and then /v1/completions. GenerateRequest.PromptIDs
// is not used.
type ChatRequest struct {
	Messages []trajectory.Message
	Tools    []trajectory.Tool
	Kwargs   map[string]any
	// PromptEstimate is the prompt's length as far as the caller can
	// tell (admission counts it against the server's cache).
	PromptEstimate int
	GenerateRequest
}

// ChatGenerator is a protocol that can render and generate in one
// exchange. A server it cannot trust to render as its /tokenize does
// answers ErrNoChat, and the caller renders and generates apart. The
// prompt returned is the caller's: it may append to it in place (its
// spare capacity, if any, is room for the generated ids).
type ChatGenerator interface {
	GenerateChat(ctx context.Context, req ChatRequest) (prompt []int, res *GenerateResult, err error)
}

// ErrNoChat: render with /tokenize and generate with /v1/completions
// instead (never retried: Retriable says no).
var ErrNoChat = errors.New("this backend cannot render and generate in one exchange")

// chatRequest follows vLLM's ChatCompletionRequest. tool_choice "none"
// because vLLM answers 400 to the default ("auto") without
// --enable-auto-tool-choice, and the host parses the calls itself; the
// tools are still rendered (unless the server runs with
// --exclude-tools-when-tool-choice-none, which the first exchange's check
// against /tokenize finds).
type chatRequest struct {
	Model               string               `json:"model,omitempty"`
	Messages            []trajectory.Message `json:"messages"`
	Tools               []trajectory.Tool    `json:"tools,omitempty"`
	ToolChoice          string               `json:"tool_choice,omitempty"`
	AddGenerationPrompt bool                 `json:"add_generation_prompt"`
	ChatTemplateKwargs  map[string]any       `json:"chat_template_kwargs,omitempty"`
	MaxTokens           int                  `json:"max_tokens"`
	Temperature         float64              `json:"temperature"`
	TopP                float64              `json:"top_p"`
	TopK                int                  `json:"top_k,omitempty"`
	Seed                *int64               `json:"seed,omitempty"`
	Stop                []string             `json:"stop,omitempty"`
	Logprobs            bool                 `json:"logprobs"`
	// return_token_ids gives the generated ids and the prompt's (vLLM >= 0.10.2).
	ReturnTokenIDs    bool   `json:"return_token_ids"`
	SkipSpecialTokens bool   `json:"skip_special_tokens"`
	Stream            bool   `json:"stream"`
	IgnoreEOS         bool   `json:"ignore_eos,omitempty"`
	Priority          int    `json:"priority,omitempty"`
	CacheSalt         string `json:"cache_salt,omitempty"`
}

type chatResponse struct {
	Choices        []chatChoice `json:"choices"`
	PromptTokenIDs []int        `json:"prompt_token_ids"`
}

type chatChoice struct {
	Message      chatAnswer    `json:"message"`
	FinishReason string        `json:"finish_reason"`
	TokenIDs     []int         `json:"token_ids"`
	Logprobs     *chatLogprobs `json:"logprobs"`
}

// chatAnswer is the message's text and what a server-side parser (a
// reasoning or tool parser) took out of it: when it took anything, the
// content is not the generated text.
type chatAnswer struct {
	Content          string `json:"content"`
	Reasoning        string `json:"reasoning"`
	ReasoningContent string `json:"reasoning_content"`
	Parsed           bool   `json:"-"`
}

type chatLogprobs struct {
	Content []chatLogprob `json:"content"`
}

type chatLogprob struct {
	Logprob float64 `json:"logprob"`
}

// UnmarshalJSON notes what the generic decoder would otherwise drop: a
// tool call or function call taken out of the content.
func (a *chatAnswer) UnmarshalJSON(b []byte) error {
	var m struct {
		Content          *string          `json:"content"`
		Reasoning        *string          `json:"reasoning"`
		ReasoningContent *string          `json:"reasoning_content"`
		ToolCalls        []map[string]any `json:"tool_calls"`
		FunctionCall     map[string]any   `json:"function_call"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*a = chatAnswer{}
	if m.Content != nil {
		a.Content = *m.Content
	}
	if m.Reasoning != nil {
		a.Reasoning = *m.Reasoning
	}
	if m.ReasoningContent != nil {
		a.ReasoningContent = *m.ReasoningContent
	}
	a.Parsed = m.Reasoning != nil || m.ReasoningContent != nil || len(m.ToolCalls) > 0 || m.FunctionCall != nil
	return nil
}

func (r *chatResponse) decodeFast(b []byte) bool {
	if decodeChat(b, r) {
		return true
	}
	*r = chatResponse{}
	return false
}

// Chat states of a server: unknown until its first exchange is checked
// against /tokenize.
const (
	chatUnchecked int32 = iota
	chatTrusted
	chatRefused
)

// GenerateChat implements ChatGenerator through /v1/chat/completions with
// return_token_ids. The server's first answer is checked: its prompt ids
// must equal /tokenize's for the same messages, or the server renders
// chat requests differently (tools left out) and is not asked again.
func (v *VLLM) GenerateChat(ctx context.Context, r ChatRequest) ([]int, *GenerateResult, error) {
	state := v.chat.Load()
	if state == chatRefused {
		return nil, nil, ErrNoChat
	}
	req := chatRequest{
		Model: v.Model, Messages: openAIMessages(r.Messages), Tools: r.Tools, AddGenerationPrompt: true, ChatTemplateKwargs: r.Kwargs,
		MaxTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP, TopK: r.TopK, Seed: r.Seed, Stop: r.Stop,
		Logprobs: true, ReturnTokenIDs: true, SkipSpecialTokens: false, IgnoreEOS: r.IgnoreEOS, Priority: r.Priority, CacheSalt: r.CacheSalt,
	}
	if len(r.Tools) > 0 {
		req.ToolChoice = "none"
	}
	var resp chatResponse
	if err := postJSON(ctx, v.BaseURL+"/v1/chat/completions", &req, &resp); err != nil {
		var se *StatusError
		if errors.As(err, &se) && (se.Status == http.StatusNotFound || se.Status == http.StatusMethodNotAllowed) {
			v.chat.Store(chatRefused) // no chat endpoint
		}
		if errors.As(err, &se) && se.Status/100 == 4 || state == chatUnchecked && ctx.Err() == nil {
			// A request the server refuses (a prompt too long, say) is
			// rendered and refused again apart, with the error that path
			// gives; and until a server has answered one chat request
			// well, its failures are not taken for the server's (no
			// retries, no failover): the rollout renders apart.
			return nil, nil, fmt.Errorf("%w: %w", ErrNoChat, err)
		}
		return nil, nil, err
	}
	if len(resp.Choices) != 1 {
		return nil, nil, fmt.Errorf("%s: expected 1 choice, got %d", v.BaseURL, len(resp.Choices))
	}
	c := resp.Choices[0]
	if resp.PromptTokenIDs == nil || c.TokenIDs == nil || c.Logprobs == nil {
		v.chat.Store(chatRefused) // a vLLM older than return_token_ids
		return nil, nil, fmt.Errorf("%w: %s answers without token ids or logprobs", ErrNoChat, v.BaseURL)
	}
	if len(c.Logprobs.Content) != len(c.TokenIDs) {
		return nil, nil, fmt.Errorf("%s: %d logprobs for %d tokens", v.BaseURL, len(c.Logprobs.Content), len(c.TokenIDs))
	}
	if state == chatUnchecked {
		ids, err := v.Render(ctx, r.Messages, r.Tools, tokenizer.RenderOptions{AddGenerationPrompt: true, Kwargs: r.Kwargs})
		if err != nil {
			return nil, nil, err
		}
		if !slices.Equal(ids, resp.PromptTokenIDs) {
			v.chat.Store(chatRefused)
			return nil, nil, fmt.Errorf("%w: %s renders chat requests unlike its /tokenize (%d ids against %d)", ErrNoChat, v.BaseURL, len(resp.PromptTokenIDs), len(ids))
		}
		v.chat.CompareAndSwap(chatUnchecked, chatTrusted)
	}
	lps := make([]float64, len(c.TokenIDs))
	for i, lp := range c.Logprobs.Content {
		lps[i] = lp.Logprob
	}
	// A server-side parser changed the content: the text is decoded from the ids instead.
	hasText := !c.Message.Parsed
	return resp.PromptTokenIDs, &GenerateResult{IDs: c.TokenIDs, Logprobs: lps, Text: c.Message.Content, HasText: hasText, FinishReason: c.FinishReason}, nil
}

// GenerateChat: NeMo RL's worker server has no chat endpoint.
func (g *Generate) GenerateChat(context.Context, ChatRequest) ([]int, *GenerateResult, error) {
	return nil, nil, ErrNoChat
}
