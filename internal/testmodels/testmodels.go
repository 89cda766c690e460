// Package testmodels finds the reference tokenizer model directories that
// `make models` installs, for tests and benchmarks.
package testmodels

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prorl/prorl/sdk/sdktest"
)

// Dir is $PRORL_MODELS or ~/.cache/prorl/models. When the models are
// missing the caller skips, unless PRORL_REQUIRE_REFS=1 (make test),
// where it fails.
func Dir(tb testing.TB) string {
	dir := os.Getenv("PRORL_MODELS")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "prorl", "models")
	}
	if _, err := os.Stat(filepath.Join(dir, "qwen3", "tokenizer.json")); err != nil {
		sdktest.Missing(tb, "reference models in "+dir+" (make models)", err)
	}
	return dir
}

// MixedCorpus is about 1 MB of English (licence texts shipped with
// Debian) and code (Go's own sources): the text the encode-throughput
// figure is measured on.
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
		tb.Skip("no corpus: Debian's licence texts or Go's sources are missing")
	}
	return string(out)
}
