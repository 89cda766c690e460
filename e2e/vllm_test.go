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
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/testvllm"
	"github.com/prorl/prorl/sdk/sdktest"
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
	// Rollouts alone: the first turn of each is one chat exchange.
	for i := range 3 {
		var one struct {
			RolloutIDs []string `json:"rollout_ids"`
		}
		e.do("POST", "/v1/rollouts", map[string]any{
			"task":     map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"},
			"sampling": map[string]any{"temperature": 1.0, "max_tokens_per_turn": 64, "seed": 8 + i}, "max_turns": 5,
		}).json(t, &one)
		sub.RolloutIDs = append(sub.RolloutIDs, one.RolloutIDs...)
	}
	log := func() []simEntry { return readEntries(t, logPath) }
	tokenizes, completions, chats := 0, 0, 0
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
		case "/v1/chat/completions":
			chats++
			// The prompt vLLM rendered for the chat request is the one its
			// /tokenize renders for the same messages and tools.
			var req map[string]json.RawMessage // as sent: a template writes the tools' keys in their order
			var resp struct {
				PromptTokenIDs []int `json:"prompt_token_ids"`
			}
			if json.Unmarshal(en.Request, &req) != nil || json.Unmarshal(en.Response, &resp) != nil {
				t.Fatalf("chat exchange not JSON: %s", en.Request)
			}
			var tok struct {
				Tokens []int `json:"tokens"`
			}
			body, _ := json.Marshal(map[string]any{"model": testvllm.Model, "messages": req["messages"], "tools": req["tools"], "add_generation_prompt": true})
			tr, err := http.Post(base+"/tokenize", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			err = json.NewDecoder(tr.Body).Decode(&tok)
			tr.Body.Close()
			if err != nil || len(tok.Tokens) == 0 || !slices.Equal(tok.Tokens, resp.PromptTokenIDs) {
				t.Fatalf("chat prompt_token_ids differ from /tokenize's for the same messages:\n%v\n%v", resp.PromptTokenIDs, tok.Tokens)
			}
		}
	}
	// 6 grouped rollouts generate every turn with /v1/completions; 3 alone
	// their first turn with /v1/chat/completions.
	if completions != 6*3+3*2 || chats != 3 || tokenizes == 0 {
		t.Fatalf("%d completions, %d chat and %d tokenize calls for 9 rollouts of 3 turns, 3 alone", completions, chats, tokenizes)
	}
	u, _ := url.Parse(base)
	t.Logf("vLLM at %s: 9 rollouts of 3 turns (3 alone), %d /tokenize, %d /v1/chat/completions and %d /v1/completions calls, every token exactly vLLM's", u.Host, tokenizes, chats, completions)
}

// TestPolicyPauseVLLM: a weight-sync pause against a real vLLM (its
// /pause, /is_paused and /resume, served in its dev mode as RL trainers
// run it): vLLM ends the generations in flight with finish_reason "abort"
// and their tokens so far, the turns continue from them under the new
// version after :resume, and every span's ids and logprobs are exactly
// what vLLM returned for that span's request.
func TestPolicyPauseVLLM(t *testing.T) {
	t.Setenv("VLLM_SERVER_DEV_MODE", "1")
	t.Setenv("PRORL_TOOL_SCRIPT_DELAY_MS", "60") // a turn of 22 tokens takes 1.3 s or more
	base := testvllm.Start(t, "--max-model-len", "4096", "--max-num-seqs", "8", "--logits-processors", "tool_script:ToolScript")
	proxy, logPath := recordingProxy(t, base)
	e := newEnv(t, envOpts{})
	e.startHost()
	e.register(map[string]any{"url": proxy, "protocol": "vllm", "model": testvllm.Model})
	waitHealthy(t, e, 1)
	var sub api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{
		"task":     map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"},
		"sampling": map[string]any{"temperature": 1.0, "max_tokens_per_turn": 64, "seed": 5},
		"n":        2, "max_turns": 5,
	}).json(t, &sub)
	// And a rollout alone: its first turn is one chat exchange, aborted
	// too, and continued through /v1/completions from vLLM's prompt.
	var lone api.SubmitResponse
	e.do("POST", "/v1/rollouts", map[string]any{
		"task":     map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"},
		"sampling": map[string]any{"temperature": 1.0, "max_tokens_per_turn": 64, "seed": 6}, "max_turns": 5,
	}).json(t, &lone)
	waitGenerating(t, e, 3)
	time.Sleep(400 * time.Millisecond) // some tokens of the first turn, not all
	rep, spanned := abortAndContinue(t, e, base, logPath, append(sub.RolloutIDs, lone.RolloutIDs...), func(res *trajectory.Result) {
		if res.Status != trajectory.StatusCompleted || len(res.Turns) != 3 || res.Reward != 1 {
			t.Fatalf("%s: %s, %d turns, reward %v, failure %+v", res.ID, res.Status, len(res.Turns), res.Reward, res.Failure)
		}
	})
	aborts := map[string]int{}
	for _, en := range readEntries(t, logPath) {
		if bytes.Contains(en.Response, []byte(`"finish_reason":"abort"`)) {
			aborts[en.Path]++
		}
	}
	if aborts["/v1/completions"] == 0 || aborts["/v1/chat/completions"] == 0 {
		t.Fatalf("vLLM's answers with finish_reason abort: %v; want some of both endpoints", aborts)
	}
	t.Logf("vLLM: %d in flight, %d aborted (answers with finish_reason abort: %v); %d turns continued under version 4, every span exactly vLLM's", rep.InFlight, rep.Aborted, aborts, spanned)
}

// TestVLLMGateway drives the gateway with the official OpenAI and
// Anthropic Python SDKs (scripts/gateway/sdk_agent.py) against a real vLLM
// in the host's default mode (vLLM's /tokenize, Qwen3's template): the
// calls of a session merge into one trace (before the splice followed a
// placeholder assistant that was not the conversation's last, every call
// of a Qwen3 session started a trace of its own), and every trace is
// exactly the prompts vLLM was sent and the ids and logprobs it returned.
func TestVLLMGateway(t *testing.T) {
	py := sdktest.Reference(t, "../scripts/ref.py", "client")
	base := testvllm.Start(t, "--max-model-len", "4096", "--max-num-seqs", "8", "--logits-processors", "tool_script:ToolScript")
	proxy, logPath := recordingProxy(t, base)
	e := newEnv(t, envOpts{})
	e.startHost()
	e.register(map[string]any{"url": proxy, "protocol": "vllm", "model": testvllm.Model})
	merged, calls := sdkSessions(t, e, py, logPath, 2)
	if merged == 0 {
		t.Fatalf("no call merged into a trace in %d calls", calls)
	}
	t.Logf("vLLM: 4 sessions, %d calls, %.0f merged into their trace, every trace exactly vLLM's", calls, merged)
}
