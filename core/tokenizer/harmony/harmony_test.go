package harmony

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prorl/prorl/core/tokenizer/bpe"
	"github.com/prorl/prorl/core/trajectory"
	"github.com/prorl/prorl/internal/testmodels"
	"github.com/prorl/prorl/sdk/sdktest"
)

type refCase struct {
	Messages            []trajectory.Message `json:"messages"`
	Tools               []trajectory.Tool    `json:"tools,omitempty"`
	ReasoningEffort     string               `json:"reasoning_effort,omitempty"`
	Date                string               `json:"date,omitempty"`
	AddGenerationPrompt bool                 `json:"add_generation_prompt"`
	ModelsDir           string               `json:"models_dir"`
}

func tool(name, desc, params string) trajectory.Tool {
	if params == "" {
		return trajectory.Tool{Type: "function", Function: trajectory.ToolFunction{Name: name, Description: desc}}
	}
	return trajectory.Tool{Type: "function", Function: trajectory.ToolFunction{Name: name, Description: desc, Parameters: json.RawMessage(params)}}
}

// fixedCases are the shapes an agent loop renders: a task, tool calls and
// results, reasoning, finished turns whose reasoning harmony drops.
func fixedCases() []refCase {
	weather := tool("get_weather", "Get weather for a city", `{"type":"object","properties":{"city":{"type":"string","description":"The city"},"unit":{"type":"string","enum":["celsius","fahrenheit"],"default":"celsius"}},"required":["city"]}`)
	bash := tool("bash", "Run a command.\nOutput is truncated.", `{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":["integer","null"],"default":30}},"required":["command"],"additionalProperties":false}`)
	noargs := tool("finish", "", `{"type":"object","properties":{}}`)
	nil_ := tool("ping", "no parameters", ``)
	call := func(id, name, args string) trajectory.ToolCall {
		return trajectory.ToolCall{ID: id, Type: "function", Function: trajectory.FunctionCall{Name: name, Arguments: args}}
	}
	return []refCase{
		{Messages: []trajectory.Message{{Role: "user", Content: "What is 2+2?"}}, AddGenerationPrompt: true},
		{Messages: []trajectory.Message{{Role: "system", Content: "Be terse.\nAnswer in French."}, {Role: "user", Content: "Hi"}}, ReasoningEffort: "high", Date: "2025-06-28", AddGenerationPrompt: true},
		{Messages: []trajectory.Message{
			{Role: "system", Content: "You fix bugs."}, {Role: "user", Content: "Fix the test."},
			{Role: "assistant", ReasoningContent: "Look first.", ToolCalls: []trajectory.ToolCall{call("c1", "bash", `{"command":"ls"}`)}},
			{Role: "tool", ToolCallID: "c1", Content: "a.py\nb.py"},
			{Role: "assistant", ReasoningContent: "Run it.", Content: "Running the tests.", ToolCalls: []trajectory.ToolCall{call("c2", "bash", `{"command":"pytest -q"}`), call("c3", "get_weather", `{"city":"Zürich"}`)}},
			{Role: "tool", ToolCallID: "c2", Content: "1 failed"}, {Role: "tool", Name: "get_weather", Content: `{"t": 20}`},
		}, Tools: []trajectory.Tool{bash, weather, noargs, nil_}, ReasoningEffort: "low", AddGenerationPrompt: true},
		{Messages: []trajectory.Message{
			{Role: "user", Content: "q1"}, {Role: "assistant", ReasoningContent: "t1", Content: "a1"},
			{Role: "user", Content: "q2"}, {Role: "assistant", ReasoningContent: "t2", Content: "a2"}, {Role: "user", Content: "q3"},
		}, AddGenerationPrompt: true},
		{Messages: []trajectory.Message{
			{Role: "user", Content: "q1"}, {Role: "assistant", ReasoningContent: "t1", Content: "a1"},
			{Role: "user", Content: "q2"}, {Role: "assistant", ReasoningContent: "t2", ToolCalls: []trajectory.ToolCall{call("x", "finish", "")}},
			{Role: "tool", ToolCallID: "x", Content: "done"},
		}, Tools: []trajectory.Tool{noargs}, AddGenerationPrompt: true},
		{Messages: []trajectory.Message{{Role: "user", Content: "no prompt"}, {Role: "assistant", Content: "<|tag|> text 日本"}}},
	}
}

// TestAgainstOpenAIHarmony renders the fixed conversations and 3,000 with
// random tool schemas with our renderer and with openai-harmony (PyPI):
// the same text, and the same ids through GPT-OSS's tokenizer.
func TestAgainstOpenAIHarmony(t *testing.T) {
	py := sdktest.Reference(t, "../../../scripts/ref.py", "transformers")
	models := testmodels.Dir(t)
	tok, err := bpe.Load(filepath.Join(models, "gptoss", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := fixedCases()
	rng := rand.New(rand.NewSource(7))
	for range 3000 {
		cases = append(cases, randomCase(rng))
	}
	for i := range cases {
		cases[i].ModelsDir = models
	}
	out, err := sdktest.RunJSONLines(py, "../../../scripts/transformers/harmony.py", cases, 2)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i, c := range cases {
		var ref struct {
			Text  string `json:"text"`
			IDs   []int  `json:"ids"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(out[i], &ref); err != nil {
			t.Fatal(err)
		}
		got, err := Render(c.Messages, c.Tools, Options{ReasoningEffort: c.ReasoningEffort, Date: c.Date, AddGenerationPrompt: c.AddGenerationPrompt})
		if ref.Error != "" || err != nil {
			t.Fatalf("case %d: ours %v, openai-harmony %s", i, err, ref.Error)
		}
		if got != ref.Text {
			if bad++; bad <= 3 {
				tools, _ := json.Marshal(c.Tools)
				t.Errorf("case %d (tools %s):\n%s", i, tools, diff(got, ref.Text))
			}
			continue
		}
		if ids := tok.Encode(got); !slices.Equal(ids, ref.IDs) {
			if bad++; bad <= 3 {
				t.Errorf("case %d: ids differ\nours %v\nref  %v", i, ids, ref.IDs)
			}
		}
	}
	t.Logf("%d of %d conversations render as openai-harmony does", len(cases)-bad, len(cases))
}

func diff(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, i-120)
	return fmt.Sprintf("ours: %q\nref:  %q", a[from:min(len(a), i+120)], b[from:min(len(b), i+120)])
}

// Random tool schemas from the keywords tools use: types (single, lists,
// nullable), enums, arrays, nested objects, oneOf/anyOf, descriptions
// (multi-line, empty), titles, examples and defaults of every JSON kind
// (written as literals: 1e20 and 0.1 and -0.0 are floats to Python).
type gen struct{ r *rand.Rand }

func (g gen) pick(xs ...string) string { return xs[g.r.Intn(len(xs))] }

var texts = []string{"The city", "multi\nline", "", "ünï \"q\" <&>", "trailing\n", "// x", "a\tb"}

func (g gen) str() string { return g.pick(texts...) }

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func (g gen) literal(depth int) string {
	switch g.r.Intn(9) {
	case 0:
		return quote(g.str())
	case 1:
		return g.pick("0", "3", "-7", "12345678901234567890")
	case 2:
		return g.pick("1.5", "0.1", "1e20", "-0.0", "2.0", "1e-7", "123456.789e3", "5e15", "1e16")
	case 3:
		return g.pick("true", "false")
	case 4:
		return "null"
	case 5:
		if depth > 1 {
			return "[]"
		}
		return "[" + g.literal(depth+1) + "," + g.literal(depth+1) + "]"
	case 6:
		if depth > 1 {
			return "{}"
		}
		return `{"k":` + g.literal(depth+1) + `,"ä":` + g.literal(depth+1) + "}"
	}
	return quote(g.pick("celsius", "x\"y", "ü"))
}

func (g gen) schema(depth int) string {
	var f []string
	add := func(k, v string) { f = append(f, quote(k)+":"+v) }
	kind := g.r.Intn(10)
	if depth > 2 {
		kind = g.r.Intn(4)
	}
	switch kind {
	case 0:
		add("type", `"string"`)
		if g.r.Intn(2) == 0 {
			add("enum", g.pick(`["a","b"]`, `["x\"q"]`, `[]`, `["a",1]`, `[1,2]`))
		}
	case 1:
		add("type", quote(g.pick("integer", "number")))
		if g.r.Intn(4) == 0 {
			add("enum", `[1,2]`)
		}
	case 2:
		add("type", quote(g.pick("boolean", "null")))
	case 3:
		add("type", g.pick(`["string","null"]`, `["integer","boolean"]`, `["null","object"]`, `["array","string"]`))
	case 4, 5:
		add("type", `"array"`)
		switch g.r.Intn(4) {
		case 0:
		case 1:
			add("items", `[{"type":"string"}]`)
		default:
			add("items", g.schema(depth+1))
		}
	case 6, 7:
		add("type", `"object"`)
		f = append(f, g.props(depth+1)...)
	case 8:
		add(g.pick("oneOf", "oneOf", "anyOf"), "["+g.variant(depth+1)+","+g.variant(depth+1)+"]")
	case 9:
		switch g.r.Intn(3) {
		case 0:
			add("enum", `["a","b"]`)
		case 1:
			add("const", `"k"`)
		}
	}
	if g.r.Intn(3) == 0 {
		add("description", quote(g.str()))
	}
	if g.r.Intn(6) == 0 {
		add("title", quote(g.pick("Title", "T t")))
	}
	if g.r.Intn(6) == 0 {
		add("examples", g.pick(`["e1"]`, `[1,"a",{"b":1}]`, `[]`, `"notalist"`, `[2]`))
	}
	if g.r.Intn(5) == 0 {
		add("nullable", g.pick("true", "false"))
	}
	if g.r.Intn(4) == 0 {
		add("default", g.literal(0))
	}
	g.r.Shuffle(len(f), func(i, j int) { f[i], f[j] = f[j], f[i] })
	return "{" + strings.Join(f, ",") + "}"
}

// variant is a oneOf variant, without a description: where harmony shows
// a variant's description (after the variant, above the property, both or
// neither) depends on the schema in ways we have not pinned down, so
// those are not claimed to match (see the package comment).
func (g gen) variant(depth int) string {
	for {
		s := g.schema(depth)
		v, err := parse([]byte(s))
		if err != nil {
			panic(err)
		}
		if _, hasDesc := v.text("description"); !hasDesc {
			return s
		}
	}
}

func (g gen) props(depth int) []string {
	n := g.r.Intn(4)
	var props, req []string
	names := []string{"city", "unit", "a_b-c", "日本", "with space", "x", "count"}
	g.r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	for _, name := range names[:n] {
		props = append(props, quote(name)+":"+g.schema(depth))
		if g.r.Intn(2) == 0 {
			req = append(req, quote(name))
		}
	}
	out := []string{`"properties":{` + strings.Join(props, ",") + "}"}
	if len(req) > 0 || g.r.Intn(3) == 0 {
		out = append(out, `"required":[`+strings.Join(req, ",")+"]")
	}
	if g.r.Intn(3) == 0 {
		out = append(out, `"additionalProperties":false`)
	}
	return out
}

func randomCase(r *rand.Rand) refCase {
	g := gen{r}
	var tools []trajectory.Tool
	for i := range 1 + r.Intn(3) {
		params := `{"type":"object",` + strings.Join(g.props(1), ",")
		if r.Intn(4) == 0 {
			params += `,"description":` + quote(g.str())
		}
		params += "}"
		switch r.Intn(8) {
		case 0:
			params = ""
		case 1:
			params = g.schema(0)
		}
		tools = append(tools, tool(fmt.Sprintf("tool_%d", i), g.pick("Does a thing.", "", "two\nlines"), params))
	}
	msgs := []trajectory.Message{{Role: "user", Content: "Use the tools."}}
	if r.Intn(2) == 0 {
		msgs = append([]trajectory.Message{{Role: "system", Content: "Be careful."}}, msgs...)
	}
	return refCase{Messages: msgs, Tools: tools, ReasoningEffort: g.pick("", "low", "high"), AddGenerationPrompt: true}
}

// FuzzRenderSchema: any parameters render or fail with an error, never
// panic; depth is bounded.
func FuzzRenderSchema(f *testing.F) {
	for _, c := range fixedCases() {
		for _, t := range c.Tools {
			f.Add(string(t.Function.Parameters))
		}
	}
	f.Add(`{"type":"object","properties":{"a":{"oneOf":[{"type":"array","items":{"oneOf":[{}]}}]}}}`)
	f.Add(strings.Repeat(`{"type":"array","items":`, 100) + "{}" + strings.Repeat("}", 100))
	f.Fuzz(func(t *testing.T, params string) {
		tools := []trajectory.Tool{{Type: "function", Function: trajectory.ToolFunction{Name: "f", Parameters: json.RawMessage(params)}}}
		_, _ = Render([]trajectory.Message{{Role: "user", Content: "x"}}, tools, Options{})
	})
}

// TestO200kWrittenWhole: the reference script builds o200k_base.tiktoken on
// first use, and several test processes build it at once on a fresh
// machine (this package's workers and core/toolcall's). A file written in
// place was seen empty or part written by another, which openai-harmony
// refused (a fresh-clone CI failure); written under another name and
// renamed, a reader finds it whole or not at all.
func TestO200kWrittenWhole(t *testing.T) {
	py := sdktest.Reference(t, "../../../scripts/ref.py", "transformers")
	models := testmodels.Dir(t)
	const size = 3_613_922 // the published file's
	dir := t.TempDir()
	t.Setenv("PRORL_TIKTOKEN_CACHE", dir)
	path := filepath.Join(dir, "o200k_base.tiktoken")
	done := make(chan struct{})
	seen := make(chan []int64, 1)
	go func() {
		var torn []int64
		for {
			select {
			case <-done:
				seen <- torn
				return
			default:
			}
			if fi, err := os.Stat(path); err == nil && fi.Size() != size && len(torn) < 10 {
				torn = append(torn, fi.Size())
			}
		}
	}()
	type parseCase struct {
		Text      string `json:"text"`
		ModelsDir string `json:"models_dir"`
	}
	out, err := sdktest.RunJSONLines(py, "../../../scripts/transformers/harmony.py",
		[]parseCase{{Text: "<|channel|>final<|message|>hi<|return|>", ModelsDir: models}}, 1)
	close(done)
	torn := <-seen
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out[0]), `"error"`) {
		t.Fatalf("openai-harmony: %s", out[0])
	}
	if len(torn) > 0 {
		t.Errorf("o200k_base.tiktoken was seen at %v bytes of %d while it was written", torn, size)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != size {
		t.Errorf("o200k_base.tiktoken after: %v, %v", fi, err)
	}
}
