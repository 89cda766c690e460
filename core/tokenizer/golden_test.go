package tokenizer

import (
	"encoding/json"
	"github.com/prorl/prorl/internal/testmodels"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prorl/prorl/core/tokenizer/jinja"
	"github.com/prorl/prorl/core/trajectory"
)

type chatCase struct {
	Template            string          `json:"template"`
	Conversation        string          `json:"conversation"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	Kwargs              map[string]any  `json:"kwargs"`
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	Text                string          `json:"text"`
	IDs                 []int           `json:"ids"`
}

// TestChatTemplatesMatchReference renders every golden conversation with
// the Go template engine and tokenizer and compares text and ids with
// transformers and the Rust tokenizers (make golden).
func TestChatTemplatesMatchReference(t *testing.T) {
	dir := testmodels.Dir(t)
	for _, model := range []string{"qwen3", "llama3_1", "deepseek_v3"} {
		var cases []chatCase
		b, err := os.ReadFile(filepath.Join("testdata", "golden", model, "chat.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &cases); err != nil {
			t.Fatal(err)
		}
		locals := map[string]*Local{}
		for _, c := range cases {
			name := model + "/" + c.Template + "/" + c.Conversation
			if c.AddGenerationPrompt {
				name += "/gen"
			}
			if len(c.Kwargs) > 0 {
				kb, _ := json.Marshal(c.Kwargs)
				name += "/" + string(kb)
			}
			t.Run(name, func(t *testing.T) {
				l := locals[c.Template]
				if l == nil {
					var opts LocalOptions
					if c.Template != "model" {
						src, err := os.ReadFile(filepath.Join("testdata", "templates", c.Template+".jinja"))
						if err != nil {
							t.Fatal(err)
						}
						opts.ChatTemplate = string(src)
					}
					if l, err = LoadDir(filepath.Join(dir, model), opts); err != nil {
						t.Fatal(err)
					}
					locals[c.Template] = l
				}
				msgs, err := jinja.FromJSON(c.Messages)
				if err != nil {
					t.Fatal(err)
				}
				tools, err := jinja.FromJSON(c.Tools)
				if err != nil {
					t.Fatal(err)
				}
				text, err := l.RenderValues(msgs.([]jinja.Value), tools, RenderOptions{AddGenerationPrompt: c.AddGenerationPrompt, Kwargs: c.Kwargs})
				if err != nil {
					t.Fatal(err)
				}
				if text != c.Text {
					t.Fatalf("text differs at byte %d\ngot:\n%s\nwant:\n%s", firstDiff(text, c.Text), text, c.Text)
				}
				if ids := l.tok.Encode(text); !slices.Equal(ids, c.IDs) {
					t.Fatalf("ids differ\ngot  %v\nwant %v", ids, c.IDs)
				}
				// The host's path for tools: trajectory.Tool through
				// ToolsValue, parsed the first time and cached after.
				var tt []trajectory.Tool
				if err := json.Unmarshal(c.Tools, &tt); err != nil || len(tt) == 0 {
					return
				}
				for range 2 {
					tv, err := ToolsValue(tt)
					if err != nil {
						t.Fatal(err)
					}
					got, err := l.RenderValues(msgs.([]jinja.Value), tv, RenderOptions{AddGenerationPrompt: c.AddGenerationPrompt, Kwargs: c.Kwargs})
					if err != nil {
						t.Fatal(err)
					}
					if got != c.Text {
						t.Fatalf("with ToolsValue, text differs at byte %d", firstDiff(got, c.Text))
					}
				}
			})
		}
	}
}

func firstDiff(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
