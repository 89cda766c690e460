package bpe

import (
	"math/rand"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prorl/prorl/internal/testmodels"
)

// TestDigitsCJKAsSplits: DeepSeek V3's first two splits cut in one pass
// (splitDigitsCJK) encode as the two splits run one after the other do,
// on text dense in digits of every kind, CJK runs with the punctuation
// and marks inside their ranges, and what borders them.
func TestDigitsCJKAsSplits(t *testing.T) {
	one, err := Load(filepath.Join(testmodels.Dir(t), "deepseek_v3", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !one.digitsCJK {
		t.Fatal("DeepSeek V3's splits not recognised")
	}
	two, err := Load(filepath.Join(testmodels.Dir(t), "deepseek_v3", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	two.digitsCJK = false
	one.WithoutSegmentCache()
	two.WithoutSegmentCache()
	alphabet := []string{"1", "23", "4567", "٣", "²", "Ⅻ", "½", "中", "文字", "ひら", "カタ", "・", "ー", "゛", "\u3099", "〇",
		"a", "Zb", " ", "\n", "\t", "'", "!", ".", "-", "é", "\u0301", "\xff", "\xe3\x80", "😀"}
	r := rand.New(rand.NewSource(34))
	for range 20000 {
		var b strings.Builder
		for range r.Intn(10) {
			b.WriteString(alphabet[r.Intn(len(alphabet))])
		}
		in := b.String()
		if got, want := one.Encode(in), two.Encode(in); !slices.Equal(got, want) {
			t.Fatalf("%q: one pass %v, two splits %v", in, got, want)
		}
	}
}
