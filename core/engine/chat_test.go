package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/simllm"
)

// chatServer is the simulator behind edit, which may rewrite a chat
// request's body or answer it alone; it counts chat requests.
func chatServer(t *testing.T, edit func(w http.ResponseWriter, body []byte) ([]byte, bool)) (*VLLM, *atomic.Int32) {
	t.Helper()
	sim := simllm.New(simllm.Options{Model: "m", CorrectRate: 1})
	var chats atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			chats.Add(1)
			body, _ := io.ReadAll(r.Body)
			if edit != nil {
				var done bool
				if body, done = edit(w, body); done {
					return
				}
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return &VLLM{BaseURL: srv.URL, Model: "m"}, &chats
}

var chatTask = ChatRequest{
	Messages: []trajectory.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "What is 17 + 25?"}},
	Tools: []trajectory.Tool{{Type: "function", Function: trajectory.ToolFunction{Name: "finish", Description: "Answer.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}}}`)}}},
	GenerateRequest: GenerateRequest{MaxTokens: 64, Temperature: 1, TopP: 1},
}

// TestGenerateChat: the prompt is the server's /tokenize render, the
// generation the same as /v1/completions gives for that prompt, and the
// server is trusted after its first answer checks out.
func TestGenerateChat(t *testing.T) {
	v, chats := chatServer(t, nil)
	ctx := context.Background()
	prompt, g, err := v.GenerateChat(ctx, chatTask)
	if err != nil {
		t.Fatal(err)
	}
	want, err := v.Render(ctx, chatTask.Messages, chatTask.Tools, tokenizer.RenderOptions{AddGenerationPrompt: true})
	if err != nil || !slices.Equal(prompt, want) {
		t.Fatalf("prompt %v, /tokenize %v (%v)", prompt, want, err)
	}
	req := chatTask.GenerateRequest
	req.PromptIDs = prompt
	c, err := v.Generate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.IDs, c.IDs) || !slices.Equal(g.Logprobs, c.Logprobs) || g.Text != c.Text || !g.HasText || g.FinishReason != c.FinishReason {
		t.Fatalf("chat %+v\ncompletion %+v", g, c)
	}
	if v.chat.Load() != chatTrusted {
		t.Fatal("the server is not trusted after a first answer that checks out")
	}
	if _, _, err := v.GenerateChat(ctx, chatTask); err != nil || chats.Load() != 2 {
		t.Fatalf("second exchange: %v, %d chat requests", err, chats.Load())
	}
}

// TestGenerateChatDeclined: servers the host must not trust with a chat
// request answer ErrNoChat (not retried), and a server found out once is
// not asked again.
func TestGenerateChatDeclined(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(w http.ResponseWriter, body []byte) ([]byte, bool)
		refused bool // not asked again
	}{
		// vLLM with --exclude-tools-when-tool-choice-none: the prompt lacks the tools.
		{"tools left out", func(_ http.ResponseWriter, body []byte) ([]byte, bool) {
			var m map[string]any
			_ = json.Unmarshal(body, &m)
			delete(m, "tools")
			b, _ := json.Marshal(m)
			return b, false
		}, true},
		{"no chat endpoint", func(w http.ResponseWriter, _ []byte) ([]byte, bool) {
			http.NotFound(w, nil)
			return nil, true
		}, true},
		// A vLLM older than return_token_ids ignores it.
		{"no token ids", func(_ http.ResponseWriter, body []byte) ([]byte, bool) {
			return bytes.Replace(body, []byte(`"return_token_ids":true`), []byte(`"return_token_ids":false`), 1), false
		}, true},
		// A server that fails its first chat request is not retried or
		// failed over for it: the rollout renders apart.
		{"first chat request fails", func(w http.ResponseWriter, _ []byte) ([]byte, bool) {
			w.WriteHeader(500)
			return nil, true
		}, false},
		{"a request refused", func(w http.ResponseWriter, _ []byte) ([]byte, bool) {
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"error":{"message":"too long","type":"BadRequestError","param":null,"code":400}}`))
			return nil, true
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, chats := chatServer(t, tc.edit)
			r := &Retrying{Client: v, Attempts: 4}
			_, _, err := r.GenerateChat(context.Background(), chatTask)
			if !errors.Is(err, ErrNoChat) || Retriable(err) || chats.Load() != 1 {
				t.Fatalf("err %v (retriable %v), %d chat requests", err, Retriable(err), chats.Load())
			}
			_, _, err = r.GenerateChat(context.Background(), chatTask)
			if want := map[bool]int32{true: 1, false: 2}[tc.refused]; !errors.Is(err, ErrNoChat) || chats.Load() != want {
				t.Fatalf("again: err %v, %d chat requests, want %d", err, chats.Load(), want)
			}
		})
	}
}

// TestGenerateChatParsed: a server whose reasoning or tool parser took
// text out of the content gives the ids and logprobs, and the text is
// decoded from the ids instead.
func TestGenerateChatParsed(t *testing.T) {
	sim := simllm.New(simllm.Options{Model: "m", CorrectRate: 1})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, r)
		out := strings.Replace(rec.Body.String(), `"content":`, `"reasoning":"thought","content":`, 1)
		_, _ = w.Write([]byte(out))
	}))
	defer srv.Close()
	v := &VLLM{BaseURL: srv.URL, Model: "m"}
	v.chat.Store(chatTrusted)
	_, g, err := v.GenerateChat(context.Background(), chatTask)
	if err != nil || g.HasText || len(g.IDs) == 0 || len(g.Logprobs) != len(g.IDs) {
		t.Fatalf("%+v %v", g, err)
	}
}

// TestGenerateChatTrustedFailure: once a server has answered a chat
// request well, its failures are its own: retried, then the caller's
// failover, not a quiet render apart.
func TestGenerateChatTrustedFailure(t *testing.T) {
	var failing atomic.Bool
	v, chats := chatServer(t, func(w http.ResponseWriter, body []byte) ([]byte, bool) {
		if failing.Load() {
			w.WriteHeader(503)
			return nil, true
		}
		return body, false
	})
	r := &Retrying{Client: v, Attempts: 3}
	if _, _, err := r.GenerateChat(context.Background(), chatTask); err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	_, _, err := r.GenerateChat(context.Background(), chatTask)
	if err == nil || errors.Is(err, ErrNoChat) || !Retriable(err) || chats.Load() != 1+3 {
		t.Fatalf("err %v, %d chat requests", err, chats.Load())
	}
}
