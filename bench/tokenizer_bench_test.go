package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/tokenizer/bpe"
	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/testmodels"
)

// npmDir holds the reference implementation (make models).
func npmDir() string {
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "prorl", "npm")
}

// BenchmarkGoTokenizer prints the tokenizer figures: encode throughput on
// one core beside the reference implementation's on the same text, and
// the cost of building turn 50's prompt in a 32k-token conversation.
func BenchmarkGoTokenizer(b *testing.B) {
	modelsDir := testmodels.Dir(b)
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	text := testmodels.MixedCorpus(b)
	corpusFile := filepath.Join(b.TempDir(), "corpus.txt")
	if err := os.WriteFile(corpusFile, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	var rows []row
	for _, m := range []string{"qwen3", "llama3_1", "deepseek_v3"} {
		tok, err := bpe.Load(filepath.Join(modelsDir, m, "tokenizer.json"))
		if err != nil {
			b.Fatal(err)
		}
		tok.WithoutSegmentCache() // the same text every run: measure encoding, not a lookup
		tok.Encode(text)          // warm the pre-token cache, as a long-running host is
		runs := 0
		t0 := time.Now()
		for runs < 3 || time.Since(t0) < 2*time.Second {
			tok.Encode(text)
			runs++
		}
		mbs := float64(len(text)) * float64(runs) / time.Since(t0).Seconds() / 1e6
		ref := "n/a (run make models)"
		if out, err := referenceEncode(npmDir(), modelsDir, m, corpusFile); err == nil {
			ref = fmt.Sprintf("%.1f MB/s (Go %.1fx)", out, mbs/out)
		} else {
			ref = "n/a: " + err.Error()
		}
		rows = append(rows, row{name: fmt.Sprintf("encode %s, %.1f MB mixed English+code, 1 core", m, float64(len(text))/1e6),
			measured: fmt.Sprintf("%.1f MB/s", mbs), target: ">= 20 MB/s", ok: mbs >= 20})
		rows = append(rows, row{name: "  reference transformers.js, same text, same machine", measured: ref})
	}
	d, check := turn50(b, modelsDir)
	rows = append(rows, row{name: "turn-50 prompt delta, 32k-token conversation, p50", measured: fmt.Sprintf("%.3f ms (p99 %.3f)", d[0], d[1]), target: "<= 1 ms", ok: d[0] <= 1})
	rows = append(rows, row{name: "  + whole-conversation template check (tokenizer.check)", measured: fmt.Sprintf("%.3f ms (p99 %.3f)", check[0], check[1])})
	printTable("Go tokenizer", rows)
}

func referenceEncode(npmDir, modelsDir, model, file string) (float64, error) {
	if _, err := os.Stat(filepath.Join(npmDir, "node_modules", "@huggingface", "transformers")); err != nil {
		return 0, fmt.Errorf("transformers.js not installed")
	}
	src, err := os.ReadFile(filepath.Join("..", "scripts", "golden", "bench.mjs"))
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(npmDir, "bench.mjs"), src, 0o644); err != nil {
		return 0, err
	}
	cmd := exec.Command("node", "bench.mjs", modelsDir, model, file)
	cmd.Dir = npmDir
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("node: %w", err)
	}
	var r struct {
		MBPerS float64 `json:"mb_per_s"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return 0, err
	}
	return r.MBPerS, nil
}

// turn50 builds a 50-turn tool-using Qwen3 conversation of about 32k
// tokens and measures the delta for turn 50 (what the agent does per
// turn) and the optional whole-conversation check; p50 and p99 in ms.
func turn50(b *testing.B, modelsDir string) (delta, check [2]float64) {
	l, err := tokenizer.LoadDir(filepath.Join(modelsDir, "qwen3"), tokenizer.LocalOptions{})
	if err != nil {
		b.Fatal(err)
	}
	tools := []trajectory.Tool{{Type: "function", Function: trajectory.ToolFunction{Name: "bash", Description: "Run a command.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}}}
	ctx := context.Background()
	msgs := []trajectory.Message{{Role: "system", Content: "You are an agent."}, {Role: "user", Content: "Fix the bug."}}
	ids, _ := l.Render(ctx, msgs, tools, tokenizer.RenderOptions{AddGenerationPrompt: true})
	stop, _ := l.BPE().TokenID("<|im_end|>")
	sp := tokenizer.NewSplicer()
	v := tokenizer.NewVerifier(l)
	para := strings.Repeat("The function parses the header and returns an error when the value is malformed. ", 19)
	var obs []trajectory.Message
	for k := 0; k < 50; k++ {
		reason := fmt.Sprintf("Turn %d. %s", k, para)
		call := fmt.Sprintf(`{"command": "grep -n parse file_%d.go"}`, k)
		gen := l.EncodeText("<think>\n" + reason + "\n</think>\n\n<tool_call>\n{\"name\": \"bash\", \"arguments\": " + call + "}\n</tool_call>")
		gen = append(gen, stop)
		msgs = append(msgs, trajectory.Message{Role: "assistant", ReasoningContent: reason,
			ToolCalls: []trajectory.ToolCall{{ID: "c", Type: "function", Function: trajectory.FunctionCall{Name: "bash", Arguments: call}}}})
		obs = []trajectory.Message{{Role: "tool", Content: fmt.Sprintf("file_%d.go:%d: %s", k, k*7, para), ToolCallID: "c", Name: "bash"}}
		d, err := sp.Delta(ctx, l, stop, obs, tools, nil)
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, obs...)
		ids = append(append(ids, gen...), d...)
		if off, err := v.Check(ids, msgs, tools, nil); err != nil || off >= 0 {
			b.Fatalf("turn %d: check offset %d, %v", k, off, err)
		}
	}
	if len(ids) < 30000 {
		b.Fatalf("conversation has only %d tokens", len(ids))
	}
	var ds, cs []float64
	for range 200 {
		t0 := time.Now()
		if _, err := sp.Delta(ctx, l, stop, obs, tools, nil); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, float64(time.Since(t0).Microseconds())/1000)
		t1 := time.Now()
		off, err := v.Check(ids, msgs, tools, nil)
		if err != nil || off >= 0 {
			b.Fatalf("check: offset %d, %v", off, err)
		}
		cs = append(cs, float64(time.Since(t1).Microseconds())/1000)
	}
	return [2]float64{pct(ds, 0.5), pct(ds, 0.99)}, [2]float64{pct(cs, 0.5), pct(cs, 0.99)}
}
