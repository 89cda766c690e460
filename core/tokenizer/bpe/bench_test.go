package bpe

import (
	"path/filepath"
	"testing"

	"github.com/prorl/prorl/internal/testmodels"
)

func BenchmarkEncode(b *testing.B) {
	dir := testmodels.Dir(b)
	text := testmodels.MixedCorpus(b)
	for _, m := range goldenModels {
		tok, err := Load(filepath.Join(dir, m, "tokenizer.json"))
		if err != nil {
			b.Fatal(err)
		}
		tok.WithoutSegmentCache() // the same text every iteration
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
				tok.cache = newCache(len(tok.cache.slots))
				tok.Encode(text)
			}
		})
	}
}
