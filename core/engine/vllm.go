package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/trajectory"
)

// VLLM speaks vLLM's OpenAI-compatible server: /v1/completions with a
// token-id prompt, /tokenize with chat messages, /detokenize, /health.
type VLLM struct {
	BaseURL string
	Model   string
	// chat is whether its chat endpoint renders as /tokenize does (chat.go).
	chat atomic.Int32
}

// completionRequest follows vLLM's CompletionRequest. top_k, seed,
// skip_special_tokens and the token-id flags are vLLM extensions.
type completionRequest struct {
	Model                  string   `json:"model,omitempty"`
	Prompt                 []int    `json:"prompt"`
	MaxTokens              int      `json:"max_tokens"`
	Temperature            float64  `json:"temperature"`
	TopP                   float64  `json:"top_p"`
	TopK                   int      `json:"top_k,omitempty"`
	Seed                   *int64   `json:"seed,omitempty"`
	Stop                   []string `json:"stop,omitempty"`
	Logprobs               int      `json:"logprobs"`
	ReturnTokensAsTokenIDs bool     `json:"return_tokens_as_token_ids"`
	SkipSpecialTokens      bool     `json:"skip_special_tokens"`
	Stream                 bool     `json:"stream"`
	IgnoreEOS              bool     `json:"ignore_eos,omitempty"`
	Priority               int      `json:"priority,omitempty"`
	CacheSalt              string   `json:"cache_salt,omitempty"`
}

type completionResponse struct {
	Choices []completionChoice `json:"choices"`
}

type completionChoice struct {
	Text         string              `json:"text"`
	FinishReason string              `json:"finish_reason"`
	TokenIDs     []int               `json:"token_ids"`
	Logprobs     *completionLogprobs `json:"logprobs"`
}

type completionLogprobs struct {
	Tokens        []string   `json:"tokens"`
	TokenLogprobs []*float64 `json:"token_logprobs"`
}

func (r *completionResponse) decodeFast(b []byte) bool {
	if decodeCompletion(b, r) {
		return true
	}
	*r = completionResponse{} // the generic decoder starts from nothing
	return false
}

func (r *tokenizeResponse) decodeFast(b []byte) bool {
	if decodeTokenize(b, r) {
		return true
	}
	*r = tokenizeResponse{}
	return false
}

// Generate implements Client.
func (v *VLLM) Generate(ctx context.Context, r GenerateRequest) (*GenerateResult, error) {
	req := completionRequest{
		Model: v.Model, Prompt: r.PromptIDs, MaxTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP,
		TopK: r.TopK, Seed: r.Seed, Stop: r.Stop, Logprobs: 1,
		// Exact ids as "token_id:N" in logprobs.tokens (vLLM >= 0.6). Not
		// return_token_ids: it also echoes the whole prompt back, every turn.
		ReturnTokensAsTokenIDs: true, SkipSpecialTokens: false, IgnoreEOS: r.IgnoreEOS, Priority: r.Priority, CacheSalt: r.CacheSalt,
	}
	var resp completionResponse
	if err := postJSON(ctx, v.BaseURL+"/v1/completions", &req, &resp); err != nil {
		return nil, err
	}
	if len(resp.Choices) != 1 {
		return nil, fmt.Errorf("%s: expected 1 choice, got %d", v.BaseURL, len(resp.Choices))
	}
	c := resp.Choices[0]
	if c.Logprobs == nil {
		return nil, fmt.Errorf("%s: response has no logprobs", v.BaseURL)
	}
	ids := c.TokenIDs // servers that send them anyway
	if ids == nil {
		ids = make([]int, len(c.Logprobs.Tokens))
		for i, t := range c.Logprobs.Tokens {
			n, err := strconv.Atoi(strings.TrimPrefix(t, "token_id:"))
			if err != nil {
				return nil, fmt.Errorf("%s: response has no token ids (token %q)", v.BaseURL, t)
			}
			ids[i] = n
		}
	}
	if len(c.Logprobs.TokenLogprobs) != len(ids) {
		return nil, fmt.Errorf("%s: %d logprobs for %d tokens", v.BaseURL, len(c.Logprobs.TokenLogprobs), len(ids))
	}
	lps := make([]float64, len(ids))
	for i, lp := range c.Logprobs.TokenLogprobs {
		if lp != nil {
			lps[i] = *lp
		}
	}
	return &GenerateResult{IDs: ids, Logprobs: lps, Text: c.Text, HasText: true, FinishReason: c.FinishReason}, nil
}

type tokenizeChatRequest struct {
	Model                string               `json:"model,omitempty"`
	Messages             []trajectory.Message `json:"messages"`
	Tools                []trajectory.Tool    `json:"tools,omitempty"`
	AddGenerationPrompt  bool                 `json:"add_generation_prompt"`
	ContinueFinalMessage bool                 `json:"continue_final_message"`
	AddSpecialTokens     bool                 `json:"add_special_tokens"`
	ChatTemplateKwargs   map[string]any       `json:"chat_template_kwargs,omitempty"`
}

type tokenizeResponse struct {
	Count  int   `json:"count"`
	Tokens []int `json:"tokens"`
}

// Render implements tokenizer.Tokenizer through /tokenize.
func (v *VLLM) Render(ctx context.Context, msgs []trajectory.Message, tools []trajectory.Tool, opts tokenizer.RenderOptions) ([]int, error) {
	req := tokenizeChatRequest{
		Model: v.Model, Messages: openAIMessages(msgs), Tools: tools,
		AddGenerationPrompt: opts.AddGenerationPrompt, ChatTemplateKwargs: opts.Kwargs,
	}
	var resp tokenizeResponse
	if err := postJSON(ctx, v.BaseURL+"/tokenize", &req, &resp); err != nil {
		return nil, err
	}
	return resp.Tokens, nil
}

// Decode implements tokenizer.Tokenizer through /detokenize.
func (v *VLLM) Decode(ctx context.Context, ids []int) (string, error) {
	var resp struct {
		Prompt string `json:"prompt"`
	}
	if err := postJSON(ctx, v.BaseURL+"/detokenize", map[string]any{"model": v.Model, "tokens": ids}, &resp); err != nil {
		return "", err
	}
	return resp.Prompt, nil
}

// Pause implements Pauser with vLLM's POST /pause (mode=abort: in-flight
// requests end with finish_reason "abort" and their tokens so far; the
// prefix cache is cleared, as after a weight update it must be).
func (v *VLLM) Pause(ctx context.Context, abort bool) error {
	mode := "wait"
	if abort {
		mode = "abort"
	}
	return postQuery(ctx, v.BaseURL+"/pause?mode="+mode)
}

// AbortInFlight implements Aborter: a pause in abort mode that keeps the
// prefix cache (the weights have not changed), then a resume.
func (v *VLLM) AbortInFlight(ctx context.Context) error {
	if err := postQuery(ctx, v.BaseURL+"/pause?mode=abort&clear_cache=false"); err != nil {
		return withoutPauseAPI(err)
	}
	return v.Resume(ctx)
}

// withoutPauseAPI marks err ErrNoPause when it is a server's 404 or 405
// for a pause or abort endpoint: a server without that API.
func withoutPauseAPI(err error) error {
	var se *StatusError
	if errors.As(err, &se) && (se.Status == http.StatusNotFound || se.Status == http.StatusMethodNotAllowed) {
		return fmt.Errorf("%w: %w", ErrNoPause, err)
	}
	return err
}

// Resume implements Pauser (POST /resume).
func (v *VLLM) Resume(ctx context.Context) error { return postQuery(ctx, v.BaseURL+"/resume") }

// Health implements Client.
func (v *VLLM) Health(ctx context.Context) error { return getOK(ctx, v.BaseURL+"/health") }

// Discover returns the first model a vLLM-compatible server serves, or ""
// when it cannot tell (the server may not be up yet; requests then omit the
// model and vLLM uses its only one).
func Discover(ctx context.Context, base string) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	ms, err := (&VLLM{BaseURL: base}).Models(ctx)
	if err != nil || len(ms) == 0 {
		return ""
	}
	return ms[0]
}

// Models lists the served model ids (GET /v1/models).
func (v *VLLM) Models(ctx context.Context) ([]string, error) {
	var resp struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := getJSON(ctx, v.BaseURL+"/v1/models", &resp); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(resp.Data))
	for _, d := range resp.Data {
		out = append(out, d.ID)
	}
	return out, nil
}

// Generate speaks NeMo RL's worker server as ProRL uses it:
// POST /generate {prompt_ids,...} -> {response_ids, logprobs}. The protocol
// has no tokenizer, so rendering goes to the same server's /tokenize.
type Generate struct {
	VLLM
}

type generateRequest struct {
	PromptIDs         []int    `json:"prompt_ids"`
	MaxTokens         int      `json:"max_tokens"`
	Temperature       float64  `json:"temperature"`
	TopP              float64  `json:"top_p"`
	TopK              int      `json:"top_k,omitempty"`
	Seed              *int64   `json:"seed,omitempty"`
	Stop              []string `json:"stop,omitempty"`
	SkipSpecialTokens bool     `json:"skip_special_tokens"`
}

type generateResponse struct {
	ResponseIDs  []int     `json:"response_ids"`
	Logprobs     []float64 `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
}

// Pause: NeMo RL's worker server has no pause endpoint.
func (g *Generate) Pause(context.Context, bool) error { return ErrNoPause }

// Resume: see Pause.
func (g *Generate) Resume(context.Context) error { return ErrNoPause }

// AbortInFlight implements Aborter: NeMo RL's server cannot.
func (g *Generate) AbortInFlight(context.Context) error { return ErrNoPause }

// Generate implements Client.
func (g *Generate) Generate(ctx context.Context, r GenerateRequest) (*GenerateResult, error) {
	var resp generateResponse
	err := postJSON(ctx, g.BaseURL+"/generate", generateRequest{
		PromptIDs: r.PromptIDs, MaxTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP, TopK: r.TopK,
		Seed: r.Seed, Stop: r.Stop, SkipSpecialTokens: false,
	}, &resp)
	if err != nil {
		return nil, err
	}
	if len(resp.Logprobs) != len(resp.ResponseIDs) {
		return nil, fmt.Errorf("%s: %d logprobs for %d tokens", g.BaseURL, len(resp.Logprobs), len(resp.ResponseIDs))
	}
	fr := resp.FinishReason
	if fr == "" {
		// The protocol may not say; hitting max_tokens is a length stop.
		fr = "stop"
		if len(resp.ResponseIDs) >= r.MaxTokens {
			fr = "length"
		}
	}
	return &GenerateResult{IDs: resp.ResponseIDs, Logprobs: resp.Logprobs, FinishReason: fr}, nil
}
