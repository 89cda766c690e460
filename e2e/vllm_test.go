package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/testvllm"
)

// recordingProxy forwards to target and writes every exchange, bodies as
// they crossed the wire, to a JSONL log in the simulator's log format.
func recordingProxy(t *testing.T, target string) (url, logPath string) {
	t.Helper()
	logPath = filepath.Join(t.TempDir(), "vllm.jsonl")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := io.ReadAll(r.Body)
		out, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), bytes.NewReader(req))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out.Header = r.Header.Clone()
		res, err := http.DefaultClient.Do(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		resp, _ := io.ReadAll(res.Body)
		for k, v := range res.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(res.StatusCode)
		_, _ = w.Write(resp)
		if !json.Valid(req) {
			req, _ = json.Marshal(string(req))
		}
		if !json.Valid(resp) {
			resp, _ = json.Marshal(string(resp))
		}
		line, _ := json.Marshal(map[string]any{"time": time.Now(), "path": r.URL.Path, "request": json.RawMessage(req),
			"response": json.RawMessage(resp), "status": res.StatusCode})
		mu.Lock()
		defer mu.Unlock()
		_, _ = f.Write(append(line, '\n'))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, logPath
}

// TestVLLMEndToEnd runs math rollouts through the host against a real vLLM
// (0.32, its CPU build; a random-weight model of Qwen3's architecture on
// Qwen3's tokenizer, made to call the math tools by a logits processor,
// scripts/vllm/tool_script.py) in the host's default mode: no tokenizer of
// its own, every prompt from vLLM's /tokenize. Each rollout takes three
// turns; every turn's prompt is exactly what vLLM was sent, every id and
// logprob exactly what it returned (read back from the wire by a
// recording proxy, not by the host's decoder), the loss mask exactly the
// generated tokens, and the answer vLLM's tokens spell is graded correct.
func TestVLLMEndToEnd(t *testing.T) {
	base := testvllm.Start(t, "--max-model-len", "4096", "--max-num-seqs", "8", "--logits-processors", "tool_script:ToolScript")
	proxy, logPath := recordingProxy(t, base)
	e := newEnv(t, envOpts{})
	e.startHost()
	e.register(map[string]any{"url": proxy, "protocol": "vllm", "model": testvllm.Model})
	var sub struct {
		RolloutIDs []string `json:"rollout_ids"`
	}
	r := e.do("POST", "/v1/rollouts", map[string]any{
		"task":     map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"},
		"sampling": map[string]any{"temperature": 1.0, "max_tokens_per_turn": 64, "seed": 7},
		"n":        6, "max_turns": 5,
	})
	if r.code != 202 {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	r.json(t, &sub)
	log := func() []simEntry { return readEntries(t, logPath) }
	tokenizes, completions := 0, 0
	for _, id := range sub.RolloutIDs {
		res := e.wait(t, id)
		if res.Status != trajectory.StatusCompleted || len(res.Turns) != 3 || res.Reward != 1 {
			t.Fatalf("%s: %s, %d turns, reward %v, failure %+v", res.ID, res.Status, len(res.Turns), res.Reward, res.Failure)
		}
		checkTokens(t, res, log())
	}
	for _, en := range log() {
		if en.Status != 200 {
			t.Fatalf("vLLM answered %d to %s: %s", en.Status, en.Path, en.Response)
		}
		switch en.Path {
		case "/tokenize":
			tokenizes++
		case "/v1/completions":
			completions++
		}
	}
	if completions != 18 || tokenizes == 0 {
		t.Fatalf("%d completions and %d tokenize calls for 6 rollouts of 3 turns", completions, tokenizes)
	}
	u, _ := url.Parse(base)
	t.Logf("vLLM at %s: 6 rollouts of 3 turns, %d /tokenize and %d /v1/completions calls, every token exactly vLLM's", u.Host, tokenizes, completions)
}
