package bpe

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// MixedCorpus is about 1 MB of English (the GPL text shipped with Debian)
// and code (Go's own sources), the mix the throughput figure is for.
func MixedCorpus(tb testing.TB) string {
	var out []byte
	for _, p := range []string{"/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/Apache-2.0"} {
		if b, err := os.ReadFile(p); err == nil {
			out = append(out, b...)
		}
	}
	goroot, _ := exec.Command("go", "env", "GOROOT").Output()
	files, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(goroot)), "src", "net", "http", "*.go"))
	for _, f := range files {
		if len(out) > 1<<20 {
			break
		}
		b, _ := os.ReadFile(f)
		out = append(out, b...)
	}
	if len(out) < 1<<19 {
		tb.Skip("no corpus")
	}
	return string(out)
}

func BenchmarkEncode(b *testing.B) {
	dir := modelsDir(b)
	text := MixedCorpus(b)
	for _, m := range goldenModels {
		tok, err := Load(filepath.Join(dir, m, "tokenizer.json"))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(m, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				tok.Encode(text)
			}
		})
		b.Run(m+"-cold", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				tok.cache = newCache(1 << 16)
				tok.Encode(text)
			}
		})
	}
}
