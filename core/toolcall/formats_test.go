package toolcall

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestLlama3JSON(t *testing.T) {
	cases := []struct {
		name, in string
		calls    []string // name + " " + arguments
		content  string
		errs     int
	}{
		{"plain content", "The answer is 4.<|eot_id|>", nil, "The answer is 4.", 0},
		{"one call", `{"name": "bash", "parameters": {"command": "ls"}}<|eot_id|>`, []string{`bash {"command": "ls"}`}, "", 0},
		{"arguments key", `{"name": "python", "arguments": {"code": "print(1)"}}`, []string{`python {"code": "print(1)"}`}, "", 0},
		{"python tag", `<|python_tag|>{"name": "bash", "parameters": {"command": "date"}}<|eom_id|>`, []string{`bash {"command": "date"}`}, "", 0},
		{"two calls", `{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": 1}}`, []string{`a {}`, `b {"x": 1}`}, "", 0},
		{"think then call", "<think>\nhmm\n</think>\n\n{\"name\": \"finish\", \"parameters\": {\"message\": \"done\"}}", []string{`finish {"message": "done"}`}, "", 0},
		{"broken json", `{"name": "bash", "parameters": {"command": "ls"`, nil, "", 1},
		{"no name", `{"parameters": {"x": 1}}`, nil, "", 1},
		{"trailing text", `{"name": "a", "parameters": {}} and more`, []string{`a {}`}, "", 1},
		{"tag without call", `<|python_tag|>print(1)`, nil, "<|python_tag|>print(1)", 1},
		{"array arguments", `{"name": "a", "parameters": [1]}`, nil, "", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check(t, Llama3JSON{}.Parse(c.in), c.calls, c.content, c.errs)
		})
	}
}

func TestQwen3Coder(t *testing.T) {
	q := ForTools(Qwen3Coder{}, []ToolSchema{{Name: "bash", Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"integer"},"opts":{"type":"object"},"dry":{"type":"boolean"}}}`)}})
	call := func(body string) string { return "<tool_call>\n" + body + "\n</tool_call>" }
	cases := []struct {
		name, in string
		calls    []string
		content  string
		errs     int
	}{
		{"one call", call("<function=bash>\n<parameter=command>\nls -la\n</parameter>\n</function>"), []string{`bash {"command":"ls -la"}`}, "", 0},
		{"typed values", call("<function=bash>\n<parameter=command>\n42\n</parameter>\n<parameter=timeout>\n30\n</parameter>\n<parameter=dry>\nTrue\n</parameter>\n<parameter=opts>\n{\"a\": [1]}\n</parameter>\n</function>"),
			[]string{`bash {"command":"42","timeout":30,"dry":true,"opts":{"a": [1]}}`}, "", 0},
		{"multi-line value kept", call("<function=bash>\n<parameter=command>\ncat <<EOF\n  x\n\nEOF\n</parameter>\n</function>"), []string{`bash {"command":"cat <<EOF\n  x\n\nEOF"}`}, "", 0},
		{"content and reasoning", "<think>\nplan\n</think>\n\nLet me look.\n" + call("<function=bash>\n<parameter=command>\npwd\n</parameter>\n</function>") + "<|im_end|>", []string{`bash {"command":"pwd"}`}, "Let me look.", 0},
		{"two calls", call("<function=bash>\n<parameter=command>\na\n</parameter>\n</function>") + "\n" + call("<function=finish>\n<parameter=message>\nok\n</parameter>\n</function>"), []string{`bash {"command":"a"}`, `finish {"message":"ok"}`}, "", 0},
		{"no parameters", call("<function=finish>\n</function>"), []string{`finish {}`}, "", 0},
		{"unclosed tool_call", "<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n</function>", nil, "", 1},
		{"unclosed parameter", call("<function=bash>\n<parameter=command>\nls\n</function>"), nil, "", 1},
		{"no function tag", call("{\"name\": \"bash\"}"), nil, "", 1},
		{"bad integer", call("<function=bash>\n<parameter=timeout>\nsoon\n</parameter>\n</function>"), nil, "", 1},
		{"duplicate parameter", call("<function=bash>\n<parameter=command>\na\n</parameter>\n<parameter=command>\nb\n</parameter>\n</function>"), nil, "", 1},
		{"stray text", call("<function=bash>\nhello\n<parameter=command>\na\n</parameter>\n</function>"), nil, "", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check(t, q.Parse(c.in), c.calls, c.content, c.errs)
		})
	}
}

func check(t *testing.T, p Parsed, calls []string, content string, errs int) {
	t.Helper()
	var got []string
	for _, c := range p.Calls {
		if !json.Valid(c.Arguments) {
			t.Fatalf("invalid arguments JSON %s", c.Arguments)
		}
		got = append(got, c.Name+" "+string(c.Arguments))
	}
	if strings.Join(got, "|") != strings.Join(calls, "|") {
		t.Errorf("calls %q, want %q", got, calls)
	}
	if p.Content != content {
		t.Errorf("content %q, want %q", p.Content, content)
	}
	if len(p.Errors) != errs {
		t.Errorf("%d errors (%v), want %d", len(p.Errors), p.Errors, errs)
	}
}

func FuzzFormats(f *testing.F) {
	for _, s := range []string{`{"name": "a", "parameters": {}}`, "<tool_call>\n<function=a>\n<parameter=b>\nc\n</parameter>\n</function>\n</tool_call>", "<think>x</think>y",
		"<|tool_calls_section_begin|><|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
		"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>a<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		`[TOOL_CALLS]a[ARGS]{"b": 1}`, `[TOOL_CALLS][{"name": "a", "arguments": {}}]`,
		"<tool_call>a\n<arg_key>b</arg_key>\n<arg_value>1</arg_value>\n</tool_call>",
		"<minimax:tool_call>\n<invoke name=\"a\">\n<parameter name=\"b\">1</parameter>\n</invoke>\n</minimax:tool_call>",
		"<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>commentary to=functions.a <|constrain|>json<|message|>{}<|call|>"} {
		f.Add(s)
	}
	q := ForTools(Qwen3Coder{}, []ToolSchema{{Name: "a", Parameters: json.RawMessage(`{"properties":{"b":{"type":"integer"}}}`)}})
	f.Fuzz(func(t *testing.T, s string) {
		glm := ForTools(GLM45{}, []ToolSchema{{Name: "a", Parameters: json.RawMessage(`{"properties":{"b":{"type":"string"}}}`)}})
		mm := ForTools(MiniMaxM2{}, []ToolSchema{{Name: "a", Parameters: json.RawMessage(`{"properties":{"b":{"type":"number"},"c":{"type":"object"}}}`)}})
		for _, p := range []Parser{Llama3JSON{}, q, Hermes{}, KimiK2{}, DeepSeekV31{}, Mistral{}, glm, mm, Harmony{}} {
			for _, c := range p.Parse(s).Calls {
				if c.Name == "" || !json.Valid(c.Arguments) || c.Arguments[0] != '{' {
					t.Fatalf("%T: bad call %q %s", p, c.Name, c.Arguments)
				}
			}
		}
	})
}
