package toolcall

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/prorl/prorl/internal/testmodels"
	"github.com/prorl/prorl/sdk/sdktest"
)

// refCase is a model message in a format's canonical form (as its chat
// template writes calls back), parsed by us and by mlx-lm's parser.
type refCase struct {
	Format string `json:"format"`
	Text   string `json:"text"`
	Tools  []any  `json:"tools"`
	calls  []refCall
}

type refCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

var refStrings = []string{"ls -la", "é 日本 😀", `say "hi" \ bye`, "two\nlines", "a < b && c > d", "{not json", "  padded  ", "42abc"}

// genArgs draws arguments and the schema that types them.
func genArgs(rng *rand.Rand) (map[string]any, map[string]any) {
	args, props := map[string]any{}, map[string]any{}
	for i := range rng.IntN(4) {
		k := fmt.Sprintf("p%d_%s", i, []string{"path", "count", "flag", "opts", "items"}[rng.IntN(5)])
		switch rng.IntN(5) {
		case 0:
			args[k], props[k] = refStrings[rng.IntN(len(refStrings))], map[string]any{"type": "string"}
		case 1:
			args[k], props[k] = float64(rng.IntN(2000)-1000), map[string]any{"type": "integer"}
		case 2:
			args[k], props[k] = rng.IntN(2) == 0, map[string]any{"type": "boolean"}
		case 3:
			args[k], props[k] = map[string]any{"x": []any{1.0, "y", nil}, "z": map[string]any{}}, map[string]any{"type": "object"}
		case 4:
			args[k], props[k] = []any{"a", 2.5, false}, map[string]any{"type": "array"}
		}
	}
	return args, props
}

func jsonText(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

// render writes calls as the format's chat template does.
func render(format, content string, calls []refCall, rng *rand.Rand) string {
	var b strings.Builder
	b.WriteString(content)
	switch format {
	case "kimi_k2":
		b.WriteString(kimiSectionBegin)
		for i, c := range calls {
			fmt.Fprintf(&b, "%sfunctions.%s:%d%s%s%s", kimiCallBegin, c.Name, i, kimiArgBegin, jsonText(c.Arguments), kimiCallEnd)
		}
		b.WriteString(kimiSectionEnd)
	case "mistral":
		if rng.IntN(2) == 0 { // tokenizer v3: a JSON list
			b.WriteString(mistralCalls + jsonText(calls))
			break
		}
		for _, c := range calls {
			b.WriteString(mistralCalls + c.Name + mistralArgs + jsonText(c.Arguments))
		}
	case "minimax_m2":
		b.WriteString(minimaxOpen + "\n")
		for _, c := range calls {
			fmt.Fprintf(&b, "<invoke name=\"%s\">\n", c.Name)
			for k, v := range c.Arguments {
				s, ok := v.(string)
				if !ok {
					s = jsonText(v)
				}
				fmt.Fprintf(&b, "<parameter name=\"%s\">%s</parameter>\n", k, s)
			}
			b.WriteString("</invoke>\n")
		}
		b.WriteString(minimaxClose)
	case "glm45":
		for _, c := range calls {
			b.WriteString("<tool_call>" + c.Name + "\n")
			for k, v := range c.Arguments {
				s, ok := v.(string)
				if !ok {
					s = jsonText(v)
				}
				fmt.Fprintf(&b, "<arg_key>%s</arg_key>\n<arg_value>%s</arg_value>\n", k, s)
			}
			b.WriteString("</tool_call>")
		}
	}
	return b.String()
}

// TestFormatsAgainstMLX: on messages in each format's canonical form, our
// parsers find the calls mlx-lm's parsers (vLLM's, ported) find.
func TestFormatsAgainstMLX(t *testing.T) {
	py := sdktest.Reference(t, "../../scripts/ref.py", "transformers")
	rng := rand.New(rand.NewPCG(20, 26))
	var cases []refCase
	for _, format := range []string{"kimi_k2", "mistral", "glm45", "minimax_m2"} {
		for range 200 {
			var calls []refCall
			var tools []any
			for i := range 1 + rng.IntN(3) {
				name := []string{"bash", "str_replace_editor", "get-weather", "finish"}[rng.IntN(4)] + fmt.Sprint(i)
				args, props := genArgs(rng)
				if strings.Contains(name, "-") && format != "kimi_k2" && format != "mistral" && rng.IntN(2) == 0 {
					name = fmt.Sprint("search", i)
				}
				calls = append(calls, refCall{Name: name, Arguments: args})
				tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": name, "parameters": map[string]any{"type": "object", "properties": props}}})
			}
			content := []string{"", "Let me check.\n", "I will run two tools. "}[rng.IntN(3)]
			cases = append(cases, refCase{Format: format, Text: render(format, content, calls, rng), Tools: tools, calls: calls})
		}
	}
	out, err := sdktest.RunJSONLines(py, "../../scripts/transformers/toolcalls.py", cases, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		var ref struct {
			Calls []refCall `json:"calls"`
			Error string    `json:"error"`
		}
		if err := json.Unmarshal(out[i], &ref); err != nil {
			t.Fatal(err)
		}
		if ref.Error != "" {
			t.Fatalf("%s: the reference fails on a canonical message %q: %s", c.Format, c.Text, ref.Error)
		}
		p, _ := New(c.Format)
		var schemas []ToolSchema
		for _, tl := range c.Tools {
			fn := tl.(map[string]any)["function"].(map[string]any)
			schemas = append(schemas, ToolSchema{Name: fn["name"].(string), Parameters: []byte(jsonText(fn["parameters"]))})
		}
		got := ForTools(p, schemas).Parse(c.Text)
		if len(got.Errors) > 0 {
			t.Fatalf("%s: %q: errors %v", c.Format, c.Text, got.Errors)
		}
		var ours []refCall
		for _, call := range got.Calls {
			var a map[string]any
			if err := json.Unmarshal(call.Arguments, &a); err != nil {
				t.Fatalf("%s: arguments %s: %v", c.Format, call.Arguments, err)
			}
			ours = append(ours, refCall{Name: call.Name, Arguments: a})
		}
		norm := func(cs []refCall) []refCall {
			for i := range cs {
				if cs[i].Arguments == nil {
					cs[i].Arguments = map[string]any{}
				}
			}
			return cs
		}
		written := norm(c.calls)
		if c.Format == "glm45" || c.Format == "minimax_m2" { // the format cannot carry space around a value: both parsers trim it
			for _, w := range written {
				for k, v := range w.Arguments {
					if s, ok := v.(string); ok {
						w.Arguments[k] = strings.TrimSpace(s)
					}
				}
			}
		}
		if !reflect.DeepEqual(norm(ours), norm(ref.Calls)) || !reflect.DeepEqual(norm(ours), written) {
			t.Fatalf("%s: %q\nours      %#v\nreference %#v\nwritten   %#v", c.Format, c.Text, ours, ref.Calls, written)
		}
	}
	t.Logf("%d canonical messages in 4 formats: the same calls as mlx-lm's parsers", len(cases))
}

// TestHarmonyAgainstOpenAI: GPT-OSS completions in harmony form, split
// into messages by openai-harmony (OpenAI's parser); ours gives the same
// reasoning (analysis), content (final, preambles) and calls.
func TestHarmonyAgainstOpenAI(t *testing.T) {
	py := sdktest.Reference(t, "../../scripts/ref.py", "transformers")
	rng := rand.New(rand.NewPCG(21, 2))
	type in struct {
		Text      string `json:"text"`
		ModelsDir string `json:"models_dir"`
	}
	texts := []string{"Thinking about it.", "é 日本 😀 tabs\tand\nlines", `quotes " and \ slashes`, "a < b > c & d", "42"}
	var cases []in
	for range 300 {
		var b strings.Builder
		first := true
		msg := func(header, body, end string) {
			if !first {
				b.WriteString("<|start|>assistant")
			}
			first = false
			b.WriteString(header + "<|message|>" + body + end)
		}
		if rng.IntN(3) > 0 {
			msg("<|channel|>analysis", texts[rng.IntN(len(texts))], "<|end|>")
		}
		if rng.IntN(3) == 0 {
			msg("<|channel|>commentary", texts[rng.IntN(len(texts))], "<|end|>")
		}
		switch rng.IntN(3) {
		case 0:
			msg("<|channel|>final", texts[rng.IntN(len(texts))], "<|return|>")
		default:
			for range 1 + rng.IntN(2) {
				args, _ := genArgs(rng)
				name := []string{"get_weather", "bash", "str_replace_editor"}[rng.IntN(3)]
				header := "<|channel|>commentary to=functions." + name + " <|constrain|>json"
				if rng.IntN(3) == 0 {
					header = " to=functions." + name + "<|channel|>commentary json"
				}
				msg(header, jsonText(args), "<|call|>")
			}
		}
		cases = append(cases, in{Text: b.String(), ModelsDir: testmodels.Dir(t)})
	}
	out, err := sdktest.RunJSONLines(py, "../../scripts/transformers/harmony.py", cases, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		var ref struct {
			Messages []struct{ Channel, Recipient, Text string } `json:"messages"`
			Error    string                                      `json:"error"`
		}
		if err := json.Unmarshal(out[i], &ref); err != nil {
			t.Fatal(err)
		}
		if ref.Error != "" {
			t.Fatalf("openai-harmony fails on %q: %s", c.Text, ref.Error)
		}
		var reasoning, content []string
		var calls []refCall
		for _, m := range ref.Messages {
			switch {
			case m.Recipient != "":
				var a map[string]any
				if err := json.Unmarshal([]byte(m.Text), &a); err != nil {
					t.Fatalf("reference call arguments %q: %v", m.Text, err)
				}
				calls = append(calls, refCall{Name: strings.TrimPrefix(m.Recipient, "functions."), Arguments: a})
			case m.Channel == "analysis":
				reasoning = append(reasoning, m.Text)
			default:
				content = append(content, m.Text)
			}
		}
		got := Harmony{}.Parse(c.Text)
		var ours []refCall
		for _, call := range got.Calls {
			var a map[string]any
			_ = json.Unmarshal(call.Arguments, &a)
			ours = append(ours, refCall{Name: call.Name, Arguments: a})
		}
		wantR, wantC := strings.TrimSpace(strings.Join(reasoning, "\n")), strings.TrimSpace(strings.Join(content, "\n"))
		if len(got.Errors) > 0 || got.Reasoning != wantR || got.Content != wantC || !reflect.DeepEqual(ours, calls) {
			t.Fatalf("%q:\nours      reasoning %q content %q calls %v errors %v\nreference reasoning %q content %q calls %v", c.Text, got.Reasoning, got.Content, ours, got.Errors, wantR, wantC, calls)
		}
	}
	t.Logf("%d GPT-OSS completions: the same messages as openai-harmony", len(cases))
}
