package simllm

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand"
	"net/http"
	"testing"
	"time"

	"github.com/prorl/prorl/internal/testvllm"
)

// vllmCompletion sends prompt to a real vLLM and returns the n ids it
// generated and the prompt tokens it found in its prefix cache.
func vllmCompletion(t *testing.T, url string, prompt []int, n int) (out []int, cached int) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": testvllm.Model, "prompt": prompt, "max_tokens": n, "ignore_eos": true,
		"temperature": 0, "return_token_ids": true})
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

// TestPrefixCacheAgainstVLLM: the simulator's prefix cache finds, request
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
func TestPrefixCacheAgainstVLLM(t *testing.T) {
	const bs, blocks = 32, 40
	url := testvllm.Start(t, "--max-model-len", "1024", "--block-size", "32", "--num-gpu-blocks-override", "40",
		"--enable-prompt-tokens-details", "--max-num-seqs", "4")
	// vLLM keeps one of its blocks as the null block: the cache has the rest.
	eng := NewEngine(EngineModel{Slots: 4, StepBase: time.Millisecond, CacheTokens: (blocks - 1) * bs, BlockSize: bs, TimeScale: 1e-4})
	defer eng.Stop()
	r := rand.New(rand.NewSource(19))
	ids := func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = 1000 + r.Intn(150000) // below Qwen3's special tokens
		}
		return s
	}
	var prompts, seqs [][]int // earlier prompts, and with their outputs
	hits, partial, mismatches := 0, 0, 0
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
		if got != want {
			mismatches++
			if mismatches <= 5 {
				t.Errorf("request %d (%d prompt tokens): the simulator found %d cached, vLLM %d", i, len(p), got, want)
			}
		}
		if want > 0 {
			hits++
			if want < (len(p)-1)/bs*bs {
				partial++ // some of a cached prefix had been evicted, or never cached
			}
		}
		prompts = append(prompts, p)
		seqs = append(seqs, append(append([]int(nil), p...), out...))
	}
	if mismatches > 0 {
		t.Fatalf("%d of 80 requests differ", mismatches)
	}
	if hits < 20 || partial < 5 {
		t.Fatalf("the sequence did not exercise the cache: %d requests hit, %d of them in part", hits, partial)
	}
	t.Logf("80 requests, %d hit vLLM's cache (%d in part); the simulator agreed on every one", hits, partial)
}
