package toolcall

import (
	"encoding/json"
	"testing"
)

// The models' own documented examples (their chat templates and model
// cards), with content, reasoning and malformed calls around them.
func TestFamilies(t *testing.T) {
	glm := ForTools(GLM45{}, []ToolSchema{{Name: "get_weather", Parameters: json.RawMessage(`{"properties":{"city":{"type":"string"},"days":{"type":"integer"}}}`)}})
	mm := ForTools(MiniMaxM2{}, []ToolSchema{{Name: "search_web", Parameters: json.RawMessage(`{"properties":{"query_tag":{"type":"array"},"query_list":{"type":"array"},"n":{"type":"integer"},"t":{"type":"number"},"safe":{"type":"boolean"}}}`)}})
	mmCard := "<minimax:tool_call>\n<invoke name=\"search_web\">\n<parameter name=\"query_tag\">[\"technology\", \"events\"]</parameter>\n<parameter name=\"query_list\">[\"\\\"OpenAI\\\" \\\"latest\\\" \\\"release\\\"\"]</parameter>\n</invoke>\n" +
		"<invoke name=\"search_web\">\n<parameter name=\"query_tag\">[\"technology\", \"events\"]</parameter>\n<parameter name=\"query_list\">[\"\\\"Gemini\\\" \\\"latest\\\" \\\"release\\\"\"]</parameter>\n</invoke>\n</minimax:tool_call>"
	cases := []struct {
		name    string
		p       Parser
		in      string
		calls   []string
		content string
		errs    int
	}{
		{"kimi: model card", KimiK2{}, "I'll check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Beijing\"}<|tool_call_end|><|tool_calls_section_end|><|im_end|>",
			[]string{`get_weather {"city": "Beijing"}`}, "I'll check.", 0},
		{"kimi: two calls, thinking", KimiK2{}, "<think>plan</think><|tool_calls_section_begin|> <|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>{}<|tool_call_end|> <|tool_call_begin|>b.c:1 <|tool_call_argument_begin|> {\"x\": 1} <|tool_call_end|><|tool_calls_section_end|>",
			[]string{`a {}`, `b.c {"x": 1}`}, "", 0},
		{"kimi: stopped at the section end", KimiK2{}, "<|tool_calls_section_begin|><|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>{\"k\": 2}<|tool_call_end|>", []string{`a {"k": 2}`}, "", 0},
		{"kimi: no index", KimiK2{}, "<|tool_calls_section_begin|><|tool_call_begin|>functions.a<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>", nil, "", 1},
		{"kimi: arguments not an object", KimiK2{}, "<|tool_calls_section_begin|><|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>[1]<|tool_call_end|><|tool_calls_section_end|>", nil, "", 1},
		{"kimi: unclosed call", KimiK2{}, "<|tool_calls_section_begin|><|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>{}", nil, "", 1},
		{"kimi: plain", KimiK2{}, "Just text.<|im_end|>", nil, "Just text.", 0},

		{"deepseek v3.1: template", DeepSeekV31{}, "Let me look.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"location\": \"Tokyo\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
			[]string{`get_weather {"location": "Tokyo"}`}, "Let me look.", 0},
		{"deepseek v3.1: thinking, two calls", DeepSeekV31{}, "reasoning here</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>a<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁call▁begin｜>b<｜tool▁sep｜>{\"n\": [1]}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
			[]string{`a {}`, `b {"n": [1]}`}, "", 0},
		{"deepseek v3: json block", DeepSeekV31{}, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"location\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
			[]string{`get_weather {"location": "Paris"}`}, "", 0},
		{"deepseek: no separator", DeepSeekV31{}, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather {}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", nil, "", 1},
		{"deepseek: bad json", DeepSeekV31{}, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>a<｜tool▁sep｜>{\"x\": <｜tool▁call▁end｜><｜tool▁calls▁end｜>", nil, "", 1},
		{"deepseek: call outside the section", DeepSeekV31{}, "<｜tool▁call▁begin｜>a<｜tool▁sep｜>{}<｜tool▁call▁end｜>", nil, "<｜tool▁call▁begin｜>a<｜tool▁sep｜>{}<｜tool▁call▁end｜>", 1},

		{"mistral v3: list", Mistral{}, `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "b", "arguments": "{\"x\": 1}"}]</s>`,
			[]string{`get_weather {"city": "Paris"}`, `b {"x": 1}`}, "", 0},
		{"mistral v11: name[ARGS]", Mistral{}, `Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]b[ARGS]{}</s>`,
			[]string{`get_weather {"city": "Paris"}`, `b {}`}, "Sure.", 0},
		{"mistral: thinking", Mistral{}, `[THINK]let me see[/THINK]Answer: 4</s>`, nil, "Answer: 4", 0},
		{"mistral: cut short", Mistral{}, `[TOOL_CALLS]get_weather[ARGS]{"city": "Pa`, nil, "", 1},
		{"mistral: no [ARGS]", Mistral{}, `[TOOL_CALLS]get_weather {"city": "Paris"}`, nil, "", 1},
		{"mistral: list item without name", Mistral{}, `[TOOL_CALLS][{"arguments": {}}]`, nil, "", 1},

		{"glm: template", glm, "<think>need weather</think>Checking.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>42</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call><|user|>",
			[]string{`get_weather {"city":"42","days":3}`}, "Checking.", 0},
		{"glm 4.7: no newline after the name", glm, "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>", []string{`get_weather {"city":"Paris"}`}, "", 0},
		{"glm: no arguments", glm, "<tool_call>finish</tool_call>", []string{`finish {}`}, "", 0},
		{"glm: python literal", glm, "<tool_call>f\n<arg_key>ok</arg_key>\n<arg_value>True</arg_value>\n</tool_call>", []string{`f {"ok":true}`}, "", 0},
		{"glm: stray text", glm, "<tool_call>get_weather\n<arg_key>city</arg_key>\nParis\n</tool_call>", nil, "", 1},
		{"glm: duplicate key", glm, "<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value><arg_key>a</arg_key><arg_value>2</arg_value></tool_call>", nil, "", 1},
		{"minimax: model card, two invokes", mm, "<think>search both</think>\n" + mmCard,
			[]string{`search_web {"query_tag":["technology", "events"],"query_list":["\"OpenAI\" \"latest\" \"release\""]}`, `search_web {"query_tag":["technology", "events"],"query_list":["\"Gemini\" \"latest\" \"release\""]}`}, "", 0},
		{"minimax: typed values", mm, "Looking.\n<minimax:tool_call>\n<invoke name=search_web>\n<parameter name=\"n\">5</parameter>\n<parameter name=\"t\">2.0</parameter>\n<parameter name='safe'>Yes</parameter>\n<parameter name=\"other\">null</parameter>\n</invoke>\n</minimax:tool_call>",
			[]string{`search_web {"n":5,"t":2,"safe":true,"other":null}`}, "Looking.", 0},
		{"minimax: unclosed", mm, "<minimax:tool_call>\n<invoke name=\"a\">\n</invoke>\n", nil, "", 1},
		{"minimax: stray text", mm, "<minimax:tool_call>\nhello\n<invoke name=\"a\"></invoke>\n</minimax:tool_call>", nil, "", 1},
		{"minimax: no invoke", mm, "<minimax:tool_call>{\"name\": \"a\"}</minimax:tool_call>", nil, "", 1},
		{"minimax: duplicate parameter", mm, "<minimax:tool_call><invoke name=\"a\"><parameter name=\"x\">1</parameter><parameter name=\"x\">2</parameter></invoke></minimax:tool_call>", nil, "", 1},
		{"harmony: call", Harmony{}, "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"Tokyo\"}<|call|>",
			[]string{`get_weather {"location":"Tokyo"}`}, "", 0},
		{"harmony: final", Harmony{}, "<|channel|>analysis<|message|>2+2<|end|><|start|>assistant<|channel|>final<|message|>4<|return|>", nil, "4", 0},
		{"harmony: built-in tool", Harmony{}, "<|channel|>analysis to=browser.search<|message|>{\"query\": \"x\"}<|call|>", []string{`browser.search {"query": "x"}`}, "", 0},
		{"harmony: cut short", Harmony{}, "<|channel|>final<|message|>partial ans", nil, "partial ans", 0},
		{"harmony: arguments not JSON", Harmony{}, "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{oops<|call|>", nil, "", 1},
		{"harmony: no message", Harmony{}, "<|channel|>final", nil, "", 1},
		{"glm: no name", glm, "<tool_call><arg_key>a</arg_key><arg_value>1</arg_value></tool_call>", nil, "", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check(t, c.p.Parse(c.in), c.calls, c.content, c.errs)
		})
	}
}

func TestNewFormats(t *testing.T) {
	for _, f := range Formats {
		if _, err := New(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := New("xml"); err == nil {
		t.Fatal("unknown format accepted")
	}
}
