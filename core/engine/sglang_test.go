package engine

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
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
		// SGLang's FINISH_ABORT.to_json: an abort asked for (/abort_request,
		// /pause_generation) has no status_code and keeps its tokens; one
		// for an error has one.
		{"aborted, tokens kept", `{"text":"hi","output_ids":[5,6],"meta_info":{"finish_reason":{"type":"abort","message":"Aborted","status_code":null,"err_type":null},"output_token_logprobs":[[-0.5,5,null],[-1.25,6,null]]}}`,
			[]int{5, 6}, []float64{-0.5, -1.25}, FinishAbort, ""},
		{"aborted before a token", `{"text":"","output_ids":[],"meta_info":{"finish_reason":{"type":"abort","message":"Abort in waiting queue"},"output_token_logprobs":[]}}`,
			nil, nil, FinishAbort, ""},
		{"abort for an error", `{"text":"","meta_info":{"finish_reason":{"type":"abort","message":"out of memory","status_code":503},"output_token_logprobs":[]}}`, nil, nil, "", `"abort" (status 503): out of memory`},
		{"unknown finish", `{"text":"","meta_info":{"finish_reason":{"type":"halted"},"output_token_logprobs":[]}}`, nil, nil, "", `"halted"`},
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

// TestSGLangControl: the pause, continue and abort requests as SGLang's
// http_server takes them (PauseGenerationReqInput, ContinueGenerationReqInput,
// AbortReq in sglang/srt/managers/io_struct.py), and a server without them.
func TestSGLangControl(t *testing.T) {
	type call struct{ path, body string }
	var mu sync.Mutex // the handler runs on the server's goroutines
	var got []call
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, call{r.URL.Path, string(b)})
		code := status
		mu.Unlock()
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"message":"Generation paused successfully.","status":"ok"}`))
	}))
	defer srv.Close()
	set := func(code int) []call {
		mu.Lock()
		defer mu.Unlock()
		sent := got
		got, status = nil, code
		return sent
	}
	s := &SGLang{BaseURL: srv.URL}
	ctx := context.Background()
	var _ Pauser = s
	var _ Aborter = s
	for _, c := range []struct {
		name string
		do   func() error
		want call
	}{
		{"pause", func() error { return s.Pause(ctx, true) }, call{"/pause_generation", `{"mode":"abort"}`}},
		{"resume", func() error { return s.Resume(ctx) }, call{"/continue_generation", `{}`}},
		{"abort in flight", func() error { return s.AbortInFlight(ctx) }, call{"/abort_request", `{"rid":"","abort_all":true}`}},
	} {
		set(http.StatusOK)
		err := c.do()
		if sent := set(http.StatusNotFound); err != nil || len(sent) != 1 || sent[0] != c.want {
			t.Fatalf("%s: %v, sent %+v, want %+v", c.name, err, sent, c.want)
		}
		// 404: an SGLang before these endpoints.
		if err := c.do(); !errors.Is(err, ErrNoPause) {
			t.Fatalf("%s on a server without it: %v", c.name, err)
		}
		set(http.StatusInternalServerError)
		var se *StatusError
		if err := c.do(); errors.Is(err, ErrNoPause) || !errors.As(err, &se) || se.Status != 500 {
			t.Fatalf("%s on a failing server: %v", c.name, err)
		}
	}
	set(http.StatusOK)
	if err := s.Pause(ctx, false); !errors.Is(err, ErrNoPause) || len(set(http.StatusOK)) != 0 {
		t.Fatalf("a drain pause: %v", err)
	}
}
