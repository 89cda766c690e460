// Package testmodels finds the reference tokenizer model directories that
// `make models` installs, for tests and benchmarks.
package testmodels

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir is $PRORL_MODELS or ~/.cache/prorl/models. When the models are
// missing the caller skips, unless PRORL_REQUIRE_MODELS=1 (make test),
// where it fails.
func Dir(tb testing.TB) string {
	dir := os.Getenv("PRORL_MODELS")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "prorl", "models")
	}
	if _, err := os.Stat(filepath.Join(dir, "qwen3", "tokenizer.json")); err != nil {
		if os.Getenv("PRORL_REQUIRE_MODELS") == "1" {
			tb.Fatalf("reference models missing in %s (run make models): %v", dir, err)
		}
		tb.Skipf("reference models missing in %s (run make models)", dir)
	}
	return dir
}
