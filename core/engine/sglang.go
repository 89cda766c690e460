package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/trajectory"
)

// ErrNoTokenizer: the protocol cannot render chat templates; the host's
// Go tokenizer ([tokenizer] model_dir) must.
var ErrNoTokenizer = errors.New("this backend protocol has no chat tokenizer: set tokenizer.model_dir")

// SGLang speaks SGLang's native API: POST /generate {input_ids,
// sampling_params, return_logprob} -> {text, meta_info: {finish_reason,
// output_token_logprobs: [[logprob, id, text], ...]}}.
type SGLang struct {
	BaseURL string
	Model   string
}

type sglangRequest struct {
	InputIDs       []int          `json:"input_ids"`
	SamplingParams sglangSampling `json:"sampling_params"`
	ReturnLogprob  bool           `json:"return_logprob"`
	// -1: logprobs of the output only, not of the prompt.
	LogprobStartLen int `json:"logprob_start_len"`
	// ExtraKey separates the radix cache (SGLang's cache_salt on /generate).
	ExtraKey string `json:"extra_key,omitempty"`
}

type sglangSampling struct {
	MaxNewTokens int      `json:"max_new_tokens"`
	Temperature  float64  `json:"temperature"`
	TopP         float64  `json:"top_p"`
	TopK         int      `json:"top_k"` // -1: off
	Stop         []string `json:"stop,omitempty"`
	Seed         *int64   `json:"sampling_seed,omitempty"`
	// Special tokens stay in the text (tool tags are special in some vocabularies).
	SkipSpecialTokens bool `json:"skip_special_tokens"`
	NoStopTrim        bool `json:"no_stop_trim"`
}

type sglangResponse struct {
	Text      string `json:"text"`
	OutputIDs []int  `json:"output_ids"`
	MetaInfo  struct {
		FinishReason *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			// StatusCode is set on an abort for an error (400: a bad
			// request, 500/503: the server's fault); an abort asked for
			// (/abort_request, /pause_generation) has none.
			StatusCode *int `json:"status_code"`
		} `json:"finish_reason"`
		OutputTokenLogprobs [][3]any `json:"output_token_logprobs"`
	} `json:"meta_info"`
}

// Generate implements Client.
func (s *SGLang) Generate(ctx context.Context, r GenerateRequest) (*GenerateResult, error) {
	topK := r.TopK
	if topK <= 0 {
		topK = -1
	}
	var resp sglangResponse
	err := postJSON(ctx, s.BaseURL+"/generate", sglangRequest{
		InputIDs: r.PromptIDs, ReturnLogprob: true, LogprobStartLen: -1, ExtraKey: r.CacheSalt,
		SamplingParams: sglangSampling{MaxNewTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP, TopK: topK,
			Stop: r.Stop, Seed: r.Seed, NoStopTrim: true},
	}, &resp)
	if err != nil {
		return nil, err
	}
	fr := resp.MetaInfo.FinishReason
	if fr == nil {
		return nil, fmt.Errorf("%s: response has no finish_reason", s.BaseURL)
	}
	aborted := fr.Type == FinishAbort && fr.StatusCode == nil
	if fr.Type != "stop" && fr.Type != "length" && !aborted {
		if fr.StatusCode != nil {
			return nil, fmt.Errorf("%s: generation ended with %q (status %d): %s", s.BaseURL, fr.Type, *fr.StatusCode, fr.Message)
		}
		return nil, fmt.Errorf("%s: generation ended with %q: %s", s.BaseURL, fr.Type, fr.Message)
	}
	out := &GenerateResult{Text: resp.Text, HasText: true, FinishReason: fr.Type}
	for i, e := range resp.MetaInfo.OutputTokenLogprobs {
		id, ok := e[1].(float64)
		if !ok || id != float64(int(id)) {
			return nil, fmt.Errorf("%s: output_token_logprobs[%d] has no token id", s.BaseURL, i)
		}
		lp, _ := e[0].(float64) // null for a token without a logprob
		out.IDs = append(out.IDs, int(id))
		out.Logprobs = append(out.Logprobs, lp)
	}
	if resp.OutputIDs != nil && len(resp.OutputIDs) != len(out.IDs) {
		return nil, fmt.Errorf("%s: %d output_ids but %d output_token_logprobs", s.BaseURL, len(resp.OutputIDs), len(out.IDs))
	}
	for i, id := range resp.OutputIDs {
		if id != out.IDs[i] {
			return nil, fmt.Errorf("%s: output_ids[%d]=%d but output_token_logprobs has %d", s.BaseURL, i, id, out.IDs[i])
		}
	}
	return out, nil
}

// Render implements tokenizer.Tokenizer: the host's Go tokenizer renders.
func (s *SGLang) Render(context.Context, []trajectory.Message, []trajectory.Tool, tokenizer.RenderOptions) ([]int, error) {
	return nil, ErrNoTokenizer
}

// Decode implements tokenizer.Tokenizer: the host's Go tokenizer decodes.
func (s *SGLang) Decode(context.Context, []int) (string, error) { return "", ErrNoTokenizer }

// Pause implements Pauser with SGLang's POST /pause_generation {"mode":
// "abort"}: the generations in flight end with finish_reason "abort" (no
// status_code) and their tokens so far, and new ones wait in the server
// until /continue_generation. SGLang's other modes keep the requests in
// flight (in_place, retract), which a drain waiting for them to finish
// cannot use: the host drains by itself.
func (s *SGLang) Pause(ctx context.Context, abort bool) error {
	if !abort {
		return fmt.Errorf("%w: SGLang's pause modes do not let in-flight requests finish", ErrNoPause)
	}
	return s.control(ctx, "/pause_generation", `{"mode":"abort"}`)
}

// Resume implements Pauser (POST /continue_generation).
func (s *SGLang) Resume(ctx context.Context) error {
	return s.control(ctx, "/continue_generation", `{}`)
}

// AbortInFlight implements Aborter with SGLang's POST /abort_request
// {"abort_all": true}: every generation in flight ends with its tokens so
// far; the server takes requests on, its prefix cache kept.
func (s *SGLang) AbortInFlight(ctx context.Context) error {
	return s.control(ctx, "/abort_request", `{"rid":"","abort_all":true}`)
}

// control posts one of SGLang's control requests; a server without the
// endpoint (an older SGLang) answers ErrNoPause.
func (s *SGLang) control(ctx context.Context, path, body string) error {
	url := s.BaseURL + path
	var out bytes.Buffer
	status, err := post(ctx, url, []byte(body), &out)
	if err == nil && status/100 != 2 {
		err = statusError(url, status, out.Bytes())
	}
	return withoutPauseAPI(err)
}

// Health implements Client.
func (s *SGLang) Health(ctx context.Context) error { return getOK(ctx, s.BaseURL+"/health") }
