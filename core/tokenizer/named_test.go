package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/testmodels"
	"github.com/prorl/prorl/sdk/sdktest"
)

// Templates shaped like those of models that ship several (Hermes 2 Pro/3,
// Command-R, Aya): the tool_use one iterates tools, so it fails on None as
// Command-R's does.
const (
	namedDefault = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
	namedToolUse = "<|im_start|>system\nTools:{% for t in tools %} {{ t.function.name }}({{ t.function.parameters | tojson }}){% endfor %}<|im_end|>\n" + namedDefault
	namedRAG     = "RAG {{ messages | length }}\n" + namedDefault
)

type namedCase struct {
	ModelDir            string            `json:"model_dir"`
	Messages            []map[string]any  `json:"messages"`
	Tools               []trajectory.Tool `json:"tools"`
	ChatTemplate        *string           `json:"chat_template"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	msgs                []trajectory.Message
}

// TestNamedTemplatesAgainstTransformers: which of a model's templates
// renders, with and without tools and with a name asked for, is what
// transformers' apply_chat_template chooses (and fails where it fails).
func TestNamedTemplatesAgainstTransformers(t *testing.T) {
	py := sdktest.Reference(t, "../../scripts/ref.py", "transformers")
	src := filepath.Join(testmodels.Dir(t), "qwen3")
	dirs := map[string]func(dir string, cfg map[string]any){
		"list with default": func(_ string, cfg map[string]any) {
			cfg["chat_template"] = []map[string]string{{"name": "default", "template": namedDefault}, {"name": "tool_use", "template": namedToolUse}}
		},
		"list without default": func(_ string, cfg map[string]any) {
			cfg["chat_template"] = []map[string]string{{"name": "tool_use", "template": namedToolUse}, {"name": "rag", "template": namedRAG}}
		},
		"files": func(dir string, cfg map[string]any) {
			delete(cfg, "chat_template")
			must(t, os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte(namedDefault), 0o644))
			must(t, os.MkdirAll(filepath.Join(dir, "additional_chat_templates"), 0o755))
			must(t, os.WriteFile(filepath.Join(dir, "additional_chat_templates", "tool_use.jinja"), []byte(namedToolUse), 0o644))
			must(t, os.WriteFile(filepath.Join(dir, "additional_chat_templates", "rag.jinja"), []byte(namedRAG), 0o644))
		},
	}
	tools := []trajectory.Tool{{Type: "function", Function: trajectory.ToolFunction{Name: "python", Description: "run", Parameters: json.RawMessage(`{"type": "object", "properties": {"code": {"type": "string"}}}`)}}}
	msgs := []trajectory.Message{{Role: "user", Content: "What is 2+2?"}, {Role: "assistant", Content: "4"}, {Role: "user", Content: "And 3+3?"}}
	var cases []namedCase
	for _, setup := range dirs {
		dir := filepath.Join(t.TempDir(), "model")
		must(t, os.MkdirAll(dir, 0o755))
		b, err := os.ReadFile(filepath.Join(src, "tokenizer.json"))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dir, "tokenizer.json"), b, 0o644))
		var cfg map[string]any
		b, err = os.ReadFile(filepath.Join(src, "tokenizer_config.json"))
		must(t, err)
		must(t, json.Unmarshal(b, &cfg))
		setup(dir, cfg)
		b, _ = json.Marshal(cfg)
		must(t, os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), b, 0o644))
		for _, tl := range [][]trajectory.Tool{nil, tools} {
			// Names the model has (transformers takes any other string as
			// the template's source; we refuse it: TestUnknownTemplateName).
			for _, tmpl := range []*string{nil, ptr("default"), ptr("tool_use"), ptr("rag")} {
				if tmpl != nil && !hasTemplate(dir, *tmpl) {
					continue
				}
				c := namedCase{ModelDir: dir, Tools: tl, ChatTemplate: tmpl, AddGenerationPrompt: true, msgs: msgs}
				for _, m := range msgs {
					c.Messages = append(c.Messages, map[string]any{"role": m.Role, "content": m.Content})
				}
				cases = append(cases, c)
			}
		}
	}
	out, err := sdktest.RunJSONLines(py, "../../scripts/transformers/render.py", cases, 1)
	if err != nil {
		t.Fatal(err)
	}
	agree := 0
	for i, c := range cases {
		var ref struct {
			Text  *string `json:"text"`
			Error string  `json:"error"`
		}
		must(t, json.Unmarshal(out[i], &ref))
		name := ""
		if c.ChatTemplate != nil {
			name = *c.ChatTemplate
		}
		var got string
		l, err := LoadDir(c.ModelDir, LocalOptions{TemplateName: name})
		if err == nil {
			got, err = l.RenderText(c.msgs, c.Tools, RenderOptions{AddGenerationPrompt: true})
		}
		what := filepath.Base(filepath.Dir(c.ModelDir)) + " name=" + name + " tools=" + map[bool]string{true: "yes", false: "none"}[c.Tools != nil]
		switch {
		case ref.Text == nil && err == nil:
			t.Errorf("%s: transformers fails (%s); we render %q", what, ref.Error, got)
		case ref.Text != nil && err != nil:
			t.Errorf("%s: transformers renders %q; we fail: %v", what, *ref.Text, err)
		case ref.Text != nil && got != *ref.Text:
			t.Errorf("%s:\nours         %q\ntransformers %q", what, got, *ref.Text)
		default:
			agree++
		}
	}
	t.Logf("%d of %d renders agree with transformers", agree, len(cases))
}

func ptr(s string) *string { return &s }

// hasTemplate: the test models' named templates.
func hasTemplate(dir, name string) bool {
	b, _ := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	var cfg struct {
		ChatTemplate []struct{ Name string } `json:"chat_template"`
	}
	if json.Unmarshal(b, &cfg) == nil && len(cfg.ChatTemplate) > 0 {
		for _, n := range cfg.ChatTemplate {
			if n.Name == name {
				return true
			}
		}
		return false
	}
	if name == "default" {
		return true
	}
	_, err := os.Stat(filepath.Join(dir, "additional_chat_templates", name+".jinja"))
	return err == nil
}

// TestUnknownTemplateName: naming a template the model does not have is a
// load error that lists the ones it has.
func TestUnknownTemplateName(t *testing.T) {
	_, err := LoadDir(filepath.Join(testmodels.Dir(t), "qwen3"), LocalOptions{TemplateName: "rag"})
	if err == nil || !strings.Contains(err.Error(), `no chat template named "rag" (the model has: default)`) {
		t.Fatalf("err = %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
