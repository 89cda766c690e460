package bench

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prorl/prorl/core/tokenizer/bpe"
	"github.com/prorl/prorl/internal/testmodels"
)

// BenchmarkEncodeVsRust compares our encoder with Hugging Face's Rust
// tokenizers (PyPI, make transformers) on one thread, the same text, in the
// same run: the mixed English + code corpus and text of very long words
// (500–5,000 characters: minified code, base64, hashes). Both encode the
// whole text as one string, again and again, without a segment cache.
func BenchmarkEncodeVsRust(b *testing.B) {
	modelsDir := testmodels.Dir(b)
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	tmp := b.TempDir()
	corpus := filepath.Join(tmp, "corpus.txt")
	longWords := filepath.Join(tmp, "long-words.txt")
	if err := os.WriteFile(corpus, []byte(testmodels.MixedCorpus(b)), 0o644); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewSource(20))
	var words []string
	for range 80 {
		w := make([]byte, 500+r.Intn(4500))
		for i := range w {
			w[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[r.Intn(36)]
		}
		words = append(words, string(w))
	}
	if err := os.WriteFile(longWords, []byte(strings.Join(words, " ")), 0o644); err != nil {
		b.Fatal(err)
	}
	py, pyErr := exec.Command("python3", "../scripts/ref.py", "install", "transformers").Output()
	var rows []row
	for _, m := range []string{"qwen3", "llama3_1", "deepseek_v3", "gemma3", "llama2"} {
		tok, err := bpe.Load(filepath.Join(modelsDir, m, "tokenizer.json"))
		if err != nil {
			b.Fatal(err)
		}
		tok.WithoutSegmentCache()
		for _, f := range []string{corpus, longWords} {
			data, _ := os.ReadFile(f)
			text := string(data)
			tok.Encode(text)
			runs, t0 := 0, time.Now()
			for runs < 3 || time.Since(t0) < 2*time.Second {
				tok.Encode(text)
				runs++
			}
			ours := float64(len(text)) * float64(runs) / time.Since(t0).Seconds() / 1e6
			what := map[string]string{corpus: "mixed English+code", longWords: "long words"}[f]
			ref, ratio, ok := "n/a: make transformers", "", true
			if pyErr == nil {
				out, err := exec.Command(strings.TrimSpace(string(py)), "../scripts/transformers/encode_speed.py", filepath.Join(modelsDir, m, "tokenizer.json"), f).Output()
				var rr struct {
					MBPerS float64 `json:"mb_per_s"`
				}
				if err == nil && json.Unmarshal(out, &rr) == nil && rr.MBPerS > 0 {
					ref, ratio, ok = fmt.Sprintf("%.1f MB/s", rr.MBPerS), fmt.Sprintf("%.2fx", ours/rr.MBPerS), ours >= rr.MBPerS
				} else {
					ref = fmt.Sprintf("n/a: %v", err)
				}
			}
			rows = append(rows, row{name: fmt.Sprintf("encode %s, %s (%.1f MB), 1 thread: ours / Rust", m, what, float64(len(text))/1e6),
				measured: fmt.Sprintf("%.1f / %s = %s", ours, ref, ratio), target: ">= 1.0x", ok: ok})
		}
	}
	printTable("Encode speed against Hugging Face's Rust tokenizers (same text, same run)", rows)
}
