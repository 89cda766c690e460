package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prorl/prorl/core/tokenizer/bpe"
	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/testmodels"
)

// toolGrammar makes the random-weight model call the math domain's tools:
// llama.cpp samples every token itself, only within this grammar.
const toolGrammar = `root ::= think | finish
think ::= "<tool_call>\n{\"name\": \"think\", \"arguments\": {\"thought\": \"" [a-z ]{1,16} "\"}}\n</tool_call>"
finish ::= "<tool_call>\n{\"name\": \"finish\", \"arguments\": {\"message\": \"\\\\boxed{" [0-9]{1,2} "}\"}}\n</tool_call>"
`

// startLlamaCpp runs scripts/llamacpp/server.mjs (node-llama-cpp, CPU) on
// the tiny model `make models` generates, sampling constrained to tool
// calls; it returns the URL and log path.
func startLlamaCpp(t *testing.T, modelDir string) (url, logPath string) {
	return startLlamaCppWith(t, modelDir, true)
}

// startLlamaCppWith is startLlamaCpp with or without the tool-call grammar
// and with more server flags.
func startLlamaCppWith(t *testing.T, modelDir string, withGrammar bool, flags ...string) (url, logPath string) {
	t.Helper()
	home, _ := os.UserHomeDir()
	npm := filepath.Join(home, ".cache", "prorl", "npm")
	if _, err := os.Stat(filepath.Join(npm, "node_modules", "node-llama-cpp")); err != nil {
		t.Fatalf("node-llama-cpp missing (make models): %v", err)
	}
	// Node resolves packages next to the script, so it runs from the npm dir.
	src, err := os.ReadFile(filepath.Join("..", "scripts", "llamacpp", "server.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// A copy of its own, removed after: the npm directory is shared by
	// every checkout and run on this machine.
	f, err := os.CreateTemp(npm, "prorl-llamacpp-server-*.mjs")
	if err != nil {
		t.Fatal(err)
	}
	script := f.Name()
	t.Cleanup(func() { os.Remove(script) })
	if _, err := f.Write(src); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	grammar := filepath.Join(dir, "tools.gbnf")
	if err := os.WriteFile(grammar, []byte(toolGrammar), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath, addr := filepath.Join(dir, "llamacpp.jsonl"), filepath.Join(dir, "llamacpp.addr")
	args := []string{script, "--model", filepath.Join(modelDir, "model.gguf"), "--listen", "127.0.0.1:0", "--addr-file", addr, "--log", logPath, "--slots", "2"}
	if withGrammar {
		args = append(args, "--grammar", grammar)
	}
	p := startCmd(t, "llama.cpp server", exec.Command("node", append(args, flags...)...))
	return "http://" + waitFile(t, addr, p), logPath
}

// TestLlamaCppEndToEnd runs math rollouts through the host against a real
// inference engine (llama.cpp on CPU, a random-weight model on GPT-2's
// vocabulary) with the host's Go tokenizer: every turn's prompt is exactly
// the tokens the engine was sent, every generated id and logprob exactly
// what it returned, the loss mask exactly the generated tokens.
func TestLlamaCppEndToEnd(t *testing.T) {
	modelDir := filepath.Join(testmodels.Dir(t), "tiny-gpt2-llama")
	if _, err := os.Stat(filepath.Join(modelDir, "model.gguf")); err != nil {
		t.Fatalf("tiny model missing (make models): %v", err)
	}
	url, logPath := startLlamaCpp(t, modelDir)
	var results []*trajectory.Result
	for i, protocol := range []string{"vllm", "sglang"} {
		t.Run(protocol, func(t *testing.T) {
			// Another seed per protocol, so a turn can only match its own protocol's log entry.
			results = rolloutsOnEngine(t, url, logPath, modelDir, protocol, int64(7+i))
		})
	}
	if t.Failed() {
		return
	}
	// The Go tokenizer and llama.cpp's agree on the rendered prompt's text.
	// (Decoded in Go: llama.cpp's detokenize cleans up spaces before
	// punctuation, as Hugging Face's clean_up_tokenization_spaces does.)
	tok, err := bpe.Load(filepath.Join(modelDir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	first := results[0].Tokens.IDs[:results[0].Tokens.PromptLen]
	var llama struct {
		Tokens []int `json:"tokens"`
	}
	postJSON(t, url+"/tokenize", map[string]any{"prompt": tok.Decode(first)}, &llama)
	if !slices.Equal(llama.Tokens, first) {
		t.Fatalf("llama.cpp tokenises the prompt differently:\nGo    %v\nllama %v", first, llama.Tokens)
	}
	// And on the tokenizer corpus the goldens are made from (GPT-2's own
	// pre-tokenizer regex, which the other goldens do not use).
	var texts []string
	b, err := os.ReadFile(filepath.Join("..", "core", "tokenizer", "testdata", "corpus", "texts.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &texts); err != nil {
		t.Fatal(err)
	}
	for _, text := range texts[1:] {
		postJSON(t, url+"/tokenize", map[string]any{"prompt": text}, &llama)
		if got := tok.Encode(text); !slices.Equal(llama.Tokens, got) {
			t.Errorf("%q:\nGo    %v\nllama %v", text, got, llama.Tokens)
		}
	}
}

// rolloutsOnEngine runs 12 math rollouts through a fresh host whose only
// backend is the llama.cpp server, spoken to in protocol, and checks them.
func rolloutsOnEngine(t *testing.T, url, logPath, modelDir, protocol string, seed int64) []*trajectory.Result {
	e := newEnv(t, envOpts{extraTOML: "[tokenizer]\nmodel_dir = \"" + modelDir + "\"\n"})
	e.startHost()
	e.register(map[string]any{"url": url, "protocol": protocol})
	before := len(readEntries(t, logPath))
	var sub struct {
		RolloutIDs []string `json:"rollout_ids"`
	}
	r := e.do("POST", "/v1/rollouts", map[string]any{
		"task":     map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"},
		"sampling": map[string]any{"temperature": 1.0, "max_tokens_per_turn": 96, "seed": seed},
		"n":        12, "max_turns": 4,
	})
	if r.code != 202 {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	r.json(t, &sub)
	var results []*trajectory.Result
	for _, id := range sub.RolloutIDs {
		results = append(results, e.wait(t, id))
	}
	log := readEntries(t, logPath)[before:]
	path := map[string]string{"vllm": "/v1/completions", "sglang": "/generate"}[protocol]
	calls := 0
	for _, en := range log {
		if en.Path == path && en.Status == 200 {
			calls++
		}
	}
	const endOfText, imEnd = 50256, 50258 // GPT-2's <|endoftext|>, the model's <|im_end|>
	turns, multi := 0, 0
	for _, res := range results {
		if res.Status != trajectory.StatusCompleted && res.Status != trajectory.StatusTruncated {
			t.Fatalf("%s: %s %+v", res.ID, res.Status, res.Failure)
		}
		checkTokens(t, res, log)
		turns += len(res.Turns)
		if len(res.Turns) > 1 {
			multi++
		}
		// The engine ended every turn with one of its end-of-generation
		// tokens (the grammar leaves it nothing else); where it chose
		// <|im_end|>, the one the template writes, the template check found
		// the conversation rendered as exactly the tokens kept.
		templateEnd := true
		for k, turn := range res.Turns {
			last := turn.ResponseIDs[len(turn.ResponseIDs)-1]
			if turn.FinishReason != "stop" || (last != imEnd && last != endOfText) {
				t.Fatalf("%s turn %d: finish %q, last id %d", res.ID, turn.Index, turn.FinishReason, last)
			}
			if k < len(res.Turns)-1 { // the check runs after turns that continue
				templateEnd = templateEnd && last == imEnd
			}
		}
		if len(res.Turns) > 1 {
			checked, mismatched := res.Metrics["template_checked_turns"], res.Metrics["template_mismatch_turns"]
			if checked == 0 || (templateEnd && mismatched != 0) || (!templateEnd && mismatched == 0) {
				t.Fatalf("%s: template metrics %v (turns ended with the template's token: %v)", res.ID, res.Metrics, templateEnd)
			}
		}
	}
	if multi == 0 {
		t.Fatal("no rollout took more than one turn: the test proved nothing about splicing")
	}
	if calls != turns {
		t.Fatalf("%d %s calls for %d turns", calls, path, turns)
	}
	t.Logf("%s: %d rollouts, %d turns (%d multi-turn), all tokens and logprobs exactly the engine's", protocol, len(results), turns, multi)
	return results
}

func postJSON(t *testing.T, url string, body, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	res, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("POST %s: %d", url, res.StatusCode)
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}
