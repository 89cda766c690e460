package simllm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/internal/testvllm"
)

// vllmCompletion sends prompt to a real vLLM and returns the n ids it
// generated and the prompt tokens it found in its prefix cache.
func vllmCompletion(t *testing.T, url string, prompt []int, n int) (out []int, cached int) {
	t.Helper()
	return vllmCompletionSalted(t, url, prompt, n, "")
}

// vllmCompletionSalted is vllmCompletion under a cache_salt ("" none).
func vllmCompletionSalted(t *testing.T, url string, prompt []int, n int, salt string) (out []int, cached int) {
	t.Helper()
	req := map[string]any{"model": testvllm.Model, "prompt": prompt, "max_tokens": n, "ignore_eos": true,
		"temperature": 0, "return_token_ids": true}
	if salt != "" {
		req["cache_salt"] = salt
	}
	body, _ := json.Marshal(req)
	res, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var r struct {
		Choices []struct {
			TokenIDs []int `json:"token_ids"`
		} `json:"choices"`
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			PromptTokensDetails *struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil || res.StatusCode != 200 {
		t.Fatalf("vLLM: %d %v", res.StatusCode, err)
	}
	if len(r.Choices) != 1 || len(r.Choices[0].TokenIDs) != n || r.Usage.PromptTokens != len(prompt) || r.Usage.PromptTokensDetails == nil {
		t.Fatalf("vLLM answered %+v for a prompt of %d and %d tokens", r, len(prompt), n)
	}
	return r.Choices[0].TokenIDs, r.Usage.PromptTokensDetails.CachedTokens
}

// TestAgainstVLLM, prefix cache: the simulator's prefix cache finds, request
// by request, the prompt tokens a real vLLM (0.32, CPU build) finds in its
// own, on a sequence built to exercise it: a group's repeated prompt, turns
// that extend a conversation with the previous answer and a tool's output,
// prompts cut from earlier ones (at and off block boundaries), and new
// prompts that evict. Both caches hold the same number of blocks, and the
// simulator is given vLLM's own outputs, so the two see the same tokens.
//
// Requests go one at a time. vLLM counts the blocks of running requests
// against its cache and the simulator does not (EngineModel), so only a
// sequential run can be compared exactly. Each request's length less one
// is a whole number of blocks: vLLM keeps a partly filled last block in its
// free list, where it takes a place in the eviction order without holding
// anything; the simulator has no such block.
//
// The same server answers TestProtocolAgainstVLLM's requests (one start).
func TestAgainstVLLM(t *testing.T) {
	t.Setenv("VLLM_SERVER_DEV_MODE", "1") // /pause, /resume, /is_paused
	url := testvllm.Start(t, "--max-model-len", "1024", "--block-size", "32", "--num-gpu-blocks-override", "40",
		"--enable-prompt-tokens-details", "--max-num-seqs", "4")
	t.Run("prefix cache", func(t *testing.T) { prefixCacheAgainstVLLM(t, url) })
	t.Run("protocol", func(t *testing.T) { protocolAgainstVLLM(t, url) })
	t.Run("cache salt", func(t *testing.T) { cacheSaltAgainstVLLM(t, url) })
}

// cacheSaltAgainstVLLM: a prompt cached under one cache_salt is found
// again under that salt only (not under another, nor without one), in vLLM
// and in the simulator, request by request.
func cacheSaltAgainstVLLM(t *testing.T, url string) {
	const bs = 32
	eng := NewEngine(EngineModel{Slots: 4, StepBase: time.Millisecond, CacheTokens: 39 * bs, BlockSize: bs, TimeScale: 1e-4})
	defer eng.Stop()
	p := make([]int, 3*bs)
	for i := range p {
		p[i] = 20000 + 7*i
	}
	var wants []int
	for i, salt := range []string{"prorl-policy-1", "prorl-policy-1", "prorl-policy-2", "", "prorl-policy-2", "prorl-policy-1"} {
		out, want := vllmCompletionSalted(t, url, p, bs+1, salt)
		wants = append(wants, want)
		before := eng.Stats().CachedTokens
		if err := eng.GenerateSalted(context.Background(), p, out, 0, salt); err != nil {
			t.Fatal(err)
		}
		if got := int(eng.Stats().CachedTokens - before); got != want {
			t.Errorf("request %d (salt %q): the simulator found %d cached, vLLM %d", i, salt, got, want)
		}
	}
	// vLLM's own answers say what a salt does: a hit under the same one,
	// none under another or without one.
	if wants[1] == 0 || wants[2] != 0 || wants[3] != 0 || wants[4] == 0 {
		t.Fatalf("vLLM's cached tokens %v: the salt did not separate the cache", wants)
	}
	t.Logf("cached tokens, request by request: %v (vLLM and the simulator)", wants)
}

func prefixCacheAgainstVLLM(t *testing.T, url string) {
	const bs, blocks = 32, 40
	// vLLM keeps one of its blocks as the null block: the cache has the rest.
	eng := NewEngine(EngineModel{Slots: 4, StepBase: time.Millisecond, CacheTokens: (blocks - 1) * bs, BlockSize: bs, TimeScale: 1e-4})
	defer eng.Stop()
	// The same with room for everything: where it finds more, vLLM had evicted.
	roomy := NewEngine(EngineModel{Slots: 4, StepBase: time.Millisecond, CacheTokens: 1 << 20, BlockSize: bs, TimeScale: 1e-4})
	defer roomy.Stop()
	r := rand.New(rand.NewSource(19))
	ids := func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = 1000 + r.Intn(150000) // below Qwen3's special tokens
		}
		return s
	}
	var prompts, seqs [][]int // earlier prompts, and with their outputs
	hits, evicted, mismatches := 0, 0, 0
	for i := 0; i < 80; i++ {
		var p []int
		switch k := r.Intn(10); {
		case len(prompts) == 0 || k < 3: // a new prompt
			p = ids(40 + r.Intn(360))
		case k < 5: // a group's next rollout: the same prompt
			p = prompts[r.Intn(len(prompts))]
		case k < 8: // the next turn: the conversation, then a tool's output
			s := seqs[r.Intn(len(seqs))]
			p = append(append([]int(nil), s...), ids(5+r.Intn(120))...)
		default: // an earlier prompt cut short, often at a block boundary
			s := prompts[r.Intn(len(prompts))]
			n := 33 + r.Intn(max(1, len(s)-33))
			if r.Intn(2) == 0 {
				n = max(bs, n/bs*bs)
			}
			p = s[:min(n, len(s))]
		}
		if len(p) > 900 {
			p = ids(40 + r.Intn(360))
		}
		// At least 9 new tokens, and prompt + output - 1 a whole number of blocks.
		n := (len(p)+8+bs-1)/bs*bs + 1 - len(p)
		out, want := vllmCompletion(t, url, p, n)
		before := eng.Stats().CachedTokens
		if err := eng.Generate(context.Background(), p, out, 0); err != nil {
			t.Fatal(err)
		}
		got := int(eng.Stats().CachedTokens - before)
		before = roomy.Stats().CachedTokens
		if err := roomy.Generate(context.Background(), p, out, 0); err != nil {
			t.Fatal(err)
		}
		if all := int(roomy.Stats().CachedTokens - before); want < all {
			evicted++ // vLLM had evicted some of what an unbounded cache would hold
		}
		if got != want {
			mismatches++
			if mismatches <= 5 {
				t.Errorf("request %d (%d prompt tokens): the simulator found %d cached, vLLM %d", i, len(p), got, want)
			}
		}
		if want > 0 {
			hits++
		}
		prompts = append(prompts, p)
		seqs = append(seqs, append(append([]int(nil), p...), out...))
	}
	if mismatches > 0 {
		t.Fatalf("%d of 80 requests differ", mismatches)
	}
	if hits < 20 || evicted < 5 {
		t.Fatalf("the sequence did not exercise the cache: %d requests hit, %d found less than an unbounded cache would hold", hits, evicted)
	}
	t.Logf("80 requests, %d hit vLLM's cache, %d found less than an unbounded cache would hold (evicted); the simulator agreed on every one", hits, evicted)
}

// shape is v's JSON structure with the values left out: objects by key,
// arrays by their first element.
func shape(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = shape(e)
		}
		return out
	case []any:
		if len(x) == 0 {
			return []any{}
		}
		return []any{shape(x[0])}
	case nil:
		return nil
	case float64:
		return "number"
	case string:
		return "string"
	case bool:
		return "bool"
	}
	return fmt.Sprintf("%T", v)
}

// within reports where sim's shape is not part of ref's: a field the
// reference does not send, or of another type (a null on either side, or
// an empty array, stands for any value).
func within(path string, sim, ref any) []string {
	if sim == nil || ref == nil {
		return nil
	}
	switch s := sim.(type) {
	case map[string]any:
		r, ok := ref.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: object here, %v in vLLM's", path, ref)}
		}
		var out []string
		if strings.HasSuffix(path, ".logprobs.top_logprobs[]") { // completions: keyed by token, compare the values
			for _, k := range slices.Sorted(maps.Keys(s)) {
				for _, rv := range r {
					out = append(out, within(path+"."+k, s[k], rv)...)
					break
				}
			}
			return out
		}
		for _, k := range slices.Sorted(maps.Keys(s)) {
			rv, ok := r[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s: not in vLLM's answer", path, k))
				continue
			}
			out = append(out, within(path+"."+k, s[k], rv)...)
		}
		return out
	case []any:
		r, ok := ref.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: array here, %v in vLLM's", path, ref)}
		}
		if len(s) == 0 || len(r) == 0 {
			return nil
		}
		return within(path+"[]", s[0], r[0])
	}
	if sim != ref {
		return []string{fmt.Sprintf("%s: %v here, %v in vLLM's", path, sim, ref)}
	}
	return nil
}

// exchange sends one request and returns the status and the decoded JSON
// answer (nil for an empty body).
func exchange(t *testing.T, method, url string, body any) (int, any) {
	t.Helper()
	code, v, _ := exchangeRaw(t, method, url, body)
	return code, v
}

// exchangeRaw is exchange with the answer's bytes too.
func exchangeRaw(t *testing.T, method, url string, body any) (int, any, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var v any
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s %s: %d, not JSON: %.200s", method, url, res.StatusCode, b)
		}
	}
	return res.StatusCode, v, b
}

// protocolAgainstVLLM: the simulator answers the requests the host sends
// (and the ones of its API that tests use) with vLLM's status codes and
// vLLM's fields and types, none of its own; on Qwen3's tokenizer and
// template (Options.Local) /tokenize and /detokenize answer the same ids
// and text as vLLM does.
func protocolAgainstVLLM(t *testing.T, url string) {
	_, modelDir := testvllm.Paths(t)
	local, err := tokenizer.LoadDir(modelDir, tokenizer.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sim := New(Options{Model: testvllm.Model, MaxModelLen: 1024, CorrectRate: 1, Local: local})
	ts := httptest.NewServer(sim)
	defer ts.Close()
	msgs := []map[string]any{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 17 + 25?"}}
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "finish", "description": "End with the answer.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"message": map[string]any{"type": "string"}}}}}}
	_, tok := exchange(t, "POST", url+"/tokenize", map[string]any{"model": testvllm.Model, "messages": msgs, "tools": tools, "add_generation_prompt": true})
	prompt := []int{}
	for _, id := range tok.(map[string]any)["tokens"].([]any) {
		prompt = append(prompt, int(id.(float64)))
	}
	seed := 7
	for _, c := range []struct {
		name, method, path string
		body               any
		same               bool // the same answer, values too
		samePrompt         bool // the same prompt_token_ids (the chat template rendered alike)
		golden             string
	}{
		{"tokenize messages", "POST", "/tokenize", map[string]any{"model": testvllm.Model, "messages": msgs, "tools": tools, "add_generation_prompt": true}, true, false, ""},
		{"tokenize text", "POST", "/tokenize", map[string]any{"model": testvllm.Model, "prompt": "Hello, world! 17 + 25 = 42", "add_special_tokens": false}, true, false, ""},
		{"detokenize", "POST", "/detokenize", map[string]any{"model": testvllm.Model, "tokens": prompt}, true, false, ""},
		// The host's request (core/engine/encode.go), every field it sends.
		{"completion", "POST", "/v1/completions", map[string]any{"model": testvllm.Model, "prompt": prompt, "max_tokens": 8, "temperature": 1.0,
			"top_p": 1.0, "top_k": 20, "seed": seed, "stop": []string{"</answer>"}, "logprobs": 0, "return_tokens_as_token_ids": true,
			"skip_special_tokens": false, "stream": false}, false, false, ""},
		{"completion, token ids", "POST", "/v1/completions", map[string]any{"model": testvllm.Model, "prompt": prompt, "max_tokens": 8, "temperature": 1.0,
			"return_token_ids": true, "logprobs": 1}, false, false, ""},
		{"completion, priority without priority scheduling", "POST", "/v1/completions", map[string]any{"model": testvllm.Model, "prompt": prompt,
			"max_tokens": 8, "priority": 3}, false, false, ""},
		{"completion, cache salt", "POST", "/v1/completions", map[string]any{"model": testvllm.Model, "prompt": prompt, "max_tokens": 8,
			"cache_salt": "prorl-policy-3"}, false, false, ""},
		{"completion, empty cache salt", "POST", "/v1/completions", map[string]any{"model": testvllm.Model, "prompt": prompt, "max_tokens": 8,
			"cache_salt": ""}, false, false, ""},
		{"completion, another model", "POST", "/v1/completions", map[string]any{"model": "gpt-4", "prompt": prompt, "max_tokens": 8}, false, false, ""},
		{"completion, bad max_tokens", "POST", "/v1/completions", map[string]any{"model": testvllm.Model, "prompt": prompt, "max_tokens": -1}, false, false, ""},
		{"completion, prompt over max_model_len", "POST", "/v1/completions", map[string]any{"model": testvllm.Model, "prompt": make([]int, 2000), "max_tokens": 8}, false, false, ""},
		// The host's first-turn request (core/engine/chat.go), every field it sends.
		{name: "chat", method: "POST", path: "/v1/chat/completions", body: map[string]any{"model": testvllm.Model, "messages": msgs, "tools": tools,
			"tool_choice": "none", "add_generation_prompt": true, "max_tokens": 8, "temperature": 1.0, "top_p": 1.0, "top_k": 20, "seed": seed,
			"stop": []string{"</answer>"}, "logprobs": true, "return_token_ids": true, "skip_special_tokens": false, "stream": false},
			samePrompt: true, golden: "chat.json"},
		{name: "chat, top logprobs as token ids", method: "POST", path: "/v1/chat/completions", body: map[string]any{"model": testvllm.Model,
			"messages": msgs, "max_tokens": 4, "logprobs": true, "top_logprobs": 1, "return_tokens_as_token_ids": true}},
		{name: "chat, no logprobs or ids", method: "POST", path: "/v1/chat/completions", body: map[string]any{"model": testvllm.Model, "messages": msgs, "max_completion_tokens": 4}},
		{name: "chat, tools and no tool_choice", method: "POST", path: "/v1/chat/completions", body: map[string]any{"model": testvllm.Model, "messages": msgs, "tools": tools, "max_tokens": 4}},
		{name: "chat, tool_choice without tools", method: "POST", path: "/v1/chat/completions", body: map[string]any{"model": testvllm.Model, "messages": msgs, "tool_choice": "required", "max_tokens": 4}},
		{name: "chat, tool_choice none without tools", method: "POST", path: "/v1/chat/completions", body: map[string]any{"model": testvllm.Model, "messages": msgs, "tool_choice": "none", "max_tokens": 4}},
		{name: "chat, bad max_tokens", method: "POST", path: "/v1/chat/completions", body: map[string]any{"model": testvllm.Model, "messages": msgs, "max_tokens": 0}},
		{name: "chat, cache salt", method: "POST", path: "/v1/chat/completions", body: map[string]any{"model": testvllm.Model, "messages": msgs, "max_tokens": 4,
			"cache_salt": "prorl-policy-3"}},
		{name: "chat, empty cache salt", method: "POST", path: "/v1/chat/completions", body: map[string]any{"model": testvllm.Model, "messages": msgs, "max_tokens": 4,
			"cache_salt": ""}},
		{name: "chat, another model", method: "POST", path: "/v1/chat/completions", body: map[string]any{"model": "gpt-4", "messages": msgs, "max_tokens": 4}},
		{"models", "GET", "/v1/models", nil, false, false, ""},
		{"health", "GET", "/health", nil, true, false, ""},
		{"pause", "POST", "/pause?mode=abort&clear_cache=false", nil, true, false, ""},
		{"is paused", "GET", "/is_paused", nil, true, false, ""},
		{"resume", "POST", "/resume", nil, true, false, ""},
		{"is paused after resume", "GET", "/is_paused", nil, true, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			refCode, ref, refRaw := exchangeRaw(t, c.method, url+c.path, c.body)
			simCode, got, simRaw := exchangeRaw(t, c.method, ts.URL+c.path, c.body)
			if simCode != refCode {
				t.Fatalf("status %d, vLLM's %d (%v)", simCode, refCode, ref)
			}
			if c.golden != "" && os.Getenv("PRORL_UPDATE_GOLDEN") == "1" {
				// The host's decoder is tested on both answers (core/engine/testdata).
				for who, b := range map[string][]byte{"vllm_": refRaw, "sim_": simRaw} {
					if err := os.WriteFile(filepath.Join("..", "..", "core", "engine", "testdata", who+c.golden), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			if c.samePrompt {
				p, r := got.(map[string]any)["prompt_token_ids"], ref.(map[string]any)["prompt_token_ids"]
				if r == nil || fmt.Sprint(p) != fmt.Sprint(r) {
					t.Errorf("prompt_token_ids\n%v\nvLLM's\n%v", p, r)
				}
			}
			if c.same {
				if a, b := fmt.Sprint(got), fmt.Sprint(ref); a != b {
					t.Fatalf("answer\n%s\nvLLM's\n%s", a, b)
				}
				return
			}
			for _, d := range within("", shape(got), shape(ref)) {
				t.Error(d)
			}
		})
	}
}
