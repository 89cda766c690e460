package simllm

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs from the golden file; run go test -update if the change is intended\n--- got\n%s", name, got)
	}
}

func str(s string) *string { return &s }

// The simulator's chat template is documented by this golden rendering.
func TestChatTemplateGolden(t *testing.T) {
	var calls []ToolCall
	_ = json.Unmarshal([]byte(`[{"id":"c1","type":"function","function":{"name":"think","arguments":"{\"thought\":\"add\"}"}}]`), &calls)
	msgs := []Message{
		{Role: "system", Content: str("Be brief.")},
		{Role: "user", Content: str("What is 17 + 25?")},
		{Role: "assistant", Content: str("Let me think."), ToolCalls: calls},
		{Role: "tool", Content: str("logged"), ToolCallID: "c1"},
		{Role: "tool", Content: str("second result"), ToolCallID: "c2"},
	}
	tools := []Tool{{Type: "function", Function: json.RawMessage(`{"name":"think","description":"Think.","parameters":{"type":"object","properties":{"thought":{"type":"string"}}}}`)}}
	text := RenderChat(msgs, tools, true)
	golden(t, "chat_template.golden", []byte(text))
	tok := NewTokenizer()
	ids, _ := json.Marshal(tok.Encode(text))
	golden(t, "chat_template_ids.golden", append(ids, '\n'))
}
