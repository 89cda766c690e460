package simllm

import (
	"strings"
	"testing"

	json "github.com/goccy/go-json"
)

// FuzzScript: any line either fails to parse or yields a script whose
// calls all have a tool and object arguments, and which the book finds by
// its own key.
func FuzzScript(f *testing.F) {
	for _, s := range []string{`{"key": "q", "final": "1"}`, `{"key": "q", "calls": [{"tool": "t", "arguments": {"a": 1}}], "wrong": {"final": "2"}}`, `{"key": ""}`, `[]`, `{"key": "q", "calls": [{"tool": "t", "arguments": null}]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		s, err := ParseScript([]byte(line))
		if err != nil {
			return
		}
		for _, p := range []*Play{&s.Play, s.Wrong} {
			if p == nil {
				continue
			}
			for _, c := range p.Calls {
				var obj map[string]json.RawMessage
				if c.Tool == "" || json.Unmarshal(c.Arguments, &obj) != nil || obj == nil {
					t.Fatalf("%q: call %+v", line, c)
				}
			}
		}
		if got := newScriptBook([]Script{s}).find(strings.TrimSpace(s.Key)); got == nil {
			t.Fatalf("%q: not found by its key", line)
		}
	})
}
