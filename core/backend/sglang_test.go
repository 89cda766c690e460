package backend

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prorl/prorl/core/tokenizer"
)

func TestSGLang(t *testing.T) {
	cases := []struct {
		name, resp string
		ids        []int
		logprobs   []float64
		finish     string
		err        string
	}{
		{"stop", `{"text":"hi","output_ids":[5,6,2],"meta_info":{"finish_reason":{"type":"stop","matched":2},"output_token_logprobs":[[-0.5,5,null],[-1.25,6,null],[-0.01,2,null]]}}`,
			[]int{5, 6, 2}, []float64{-0.5, -1.25, -0.01}, "stop", ""},
		{"length, no output_ids", `{"text":"x","meta_info":{"finish_reason":{"type":"length","length":1},"output_token_logprobs":[[null,9,"x"]]}}`,
			[]int{9}, []float64{0}, "length", ""},
		{"abort", `{"text":"","meta_info":{"finish_reason":{"type":"abort","message":"out of memory"},"output_token_logprobs":[]}}`, nil, nil, "", `"abort": out of memory`},
		{"no finish reason", `{"text":"","meta_info":{"finish_reason":null,"output_token_logprobs":[]}}`, nil, nil, "", "no finish_reason"},
		{"ids disagree", `{"text":"","output_ids":[1],"meta_info":{"finish_reason":{"type":"stop"},"output_token_logprobs":[[-1,2,null]]}}`, nil, nil, "", "output_ids[0]=1"},
		{"no id", `{"text":"","meta_info":{"finish_reason":{"type":"stop"},"output_token_logprobs":[[-1,null,null]]}}`, nil, nil, "", "has no token id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got map[string]any
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/generate" {
					http.NotFound(w, r)
					return
				}
				_ = json.NewDecoder(r.Body).Decode(&got)
				_, _ = w.Write([]byte(c.resp))
			}))
			defer srv.Close()
			seed := int64(3)
			res, err := (&SGLang{BaseURL: srv.URL}).Generate(context.Background(), GenerateRequest{PromptIDs: []int{1, 2}, MaxTokens: 8, Temperature: 0.7, TopP: 1, Seed: &seed})
			sp, _ := got["sampling_params"].(map[string]any)
			if got["return_logprob"] != true || sp["max_new_tokens"] != 8.0 || sp["top_k"] != -1.0 || sp["sampling_seed"] != 3.0 || sp["skip_special_tokens"] != false {
				t.Fatalf("request %v", got)
			}
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.IDs, c.ids) || !slices.Equal(res.Logprobs, c.logprobs) || res.FinishReason != c.finish {
				t.Fatalf("got %+v", res)
			}
		})
	}
	if _, err := (&SGLang{}).Render(context.Background(), nil, nil, tokenizer.RenderOptions{}); err != ErrNoTokenizer {
		t.Fatalf("Render: %v", err)
	}
}
