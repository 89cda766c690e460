package toolcall

import (
	"strings"
	"testing"
)

func TestHermes(t *testing.T) {
	tests := []struct {
		name, in      string
		content       string
		reasoning     string
		calls         []string // name + args
		errs          int
		errSubstrings string
	}{
		{"plain", "hello", "hello", "", nil, 0, ""},
		{"end marker", "hello<|im_end|>", "hello", "", nil, 0, ""},
		{"end markers", "hi\n<|eot_id|><|end_of_text|>", "hi", "", nil, 0, ""},
		{"one call", "ok <tool_call>\n{\"name\": \"finish\", \"arguments\": {\"message\": \"\\\\boxed{2}\"}}\n</tool_call>", "ok", "", []string{`finish{"message": "\\boxed{2}"}`}, 0, ""},
		{"two calls", `<tool_call>{"name":"a","arguments":{}}</tool_call><tool_call>{"name":"b","arguments":{"x":1}}</tool_call>`, "", "", []string{"a{}", `b{"x":1}`}, 0, ""},
		{"think", "<think>hmm</think>answer", "answer", "hmm", nil, 0, ""},
		{"think without open", "hmm</think>answer", "answer", "hmm", nil, 0, ""},
		{"string args", `<tool_call>{"name":"a","arguments":"{\"x\":1}"}</tool_call>`, "", "", []string{`a{"x":1}`}, 0, ""},
		{"parameters alias", `<tool_call>{"name":"a","parameters":{"y":2}}</tool_call>`, "", "", []string{`a{"y":2}`}, 0, ""},
		{"null args", `<tool_call>{"name":"a","arguments":null}</tool_call>`, "", "", []string{`a{}`}, 0, ""},
		{"unclosed", `text <tool_call>{"name":"a"}`, "text", "", nil, 1, "unclosed"},
		{"stray close", `x </tool_call> y`, "x  y", "", nil, 1, "without a matching"},
		{"bad json", `<tool_call>{name: a}</tool_call>`, "", "", nil, 1, "not valid JSON"},
		{"no name", `<tool_call>{"arguments":{}}</tool_call>`, "", "", nil, 1, "no \"name\""},
		{"array args", `<tool_call>{"name":"a","arguments":[1]}</tool_call>`, "", "", nil, 1, "JSON object"},
		{"nested", `<tool_call><tool_call>{"name":"a"}</tool_call>`, "", "", nil, 1, "nested"},
		{"good then bad", `<tool_call>{"name":"a","arguments":{}}</tool_call><tool_call>oops</tool_call>`, "", "", []string{"a{}"}, 1, "JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Hermes{}.Parse(tt.in)
			if p.Content != tt.content || p.Reasoning != tt.reasoning {
				t.Errorf("content %q reasoning %q", p.Content, p.Reasoning)
			}
			var got []string
			for _, c := range p.Calls {
				got = append(got, c.Name+string(c.Arguments))
			}
			if strings.Join(got, "|") != strings.Join(tt.calls, "|") {
				t.Errorf("calls %v, want %v", got, tt.calls)
			}
			if len(p.Errors) != tt.errs {
				t.Fatalf("errors %v, want %d", p.Errors, tt.errs)
			}
			if tt.errs > 0 && !strings.Contains(p.Errors[0].Error(), tt.errSubstrings) {
				t.Errorf("error %v lacks %q", p.Errors[0], tt.errSubstrings)
			}
		})
	}
}

func FuzzHermes(f *testing.F) {
	for _, s := range []string{`<tool_call>{"name":"a","arguments":{}}</tool_call>`, "<think>x</think>y", "</tool_call><tool_call>", `<tool_call>{"name":"a","arguments":"{}"}</tool_call>`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := Hermes{}.Parse(s)
		for _, c := range p.Calls {
			if c.Name == "" || len(c.Arguments) == 0 || c.Arguments[0] != '{' {
				t.Fatalf("bad call %+v", c)
			}
		}
	})
}
