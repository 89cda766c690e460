package jinja

import (
	"encoding/json"
	"testing"

	"github.com/prorl/prorl/sdk/sdktest"
)

// jinja2Case is one template rendered with a context, by us and by
// transformers' own Jinja2 environment (scripts/transformers/render.py).
type jinja2Case struct {
	Template string          `json:"template"`
	Context  json.RawMessage `json:"context"`
}

// The cases are the places chat templates meet Jinja2's semantics: None
// and undefined values, truthiness and equality across types, filters with
// options, loops, string methods, namespaces. Where Jinja2 raises, we must
// fail too (a silent wrong prompt is worse than an error).
var jinja2Cases = []jinja2Case{
	{`{% for t in tools %}[{{ t }}]{% endfor %}`, json.RawMessage(`{"tools": null}`)},
	{`{% for t in tools %}[{{ t }}]{% else %}none{% endfor %}`, json.RawMessage(`{}`)},
	{`{% for t in tools %}[{{ t }}]{% endfor %}`, json.RawMessage(`{"tools": [1, "a", null]}`)},
	{`{{ tools | length }}`, json.RawMessage(`{"tools": null}`)},
	{`{{ tools | length }}`, json.RawMessage(`{"tools": [1, 2]}`)},
	{`{{ x | join(", ") }}`, json.RawMessage(`{"x": null}`)},
	{`{{ "a" in x }}`, json.RawMessage(`{"x": null}`)},
	{`{{ "a" in x }}`, json.RawMessage(`{"x": "cat"}`)},
	{`{{ m.content }}`, json.RawMessage(`{"m": null}`)},
	{`{{ m.content }}|{{ m.missing }}|`, json.RawMessage(`{"m": {"content": "hi"}}`)},
	{`{{ m.missing.deeper }}`, json.RawMessage(`{"m": {}}`)},
	{`{{ '' != false }} {{ '' == false }} {{ 0 == false }} {{ 1 == true }} {{ none == false }}`, json.RawMessage(`{}`)},
	{`{% if x %}yes{% else %}no{% endif %}`, json.RawMessage(`{"x": []}`)},
	{`{% if x %}yes{% else %}no{% endif %}`, json.RawMessage(`{"x": {}}`)},
	{`{% if x is none %}none{% elif x is defined %}def{% else %}undef{% endif %}`, json.RawMessage(`{"x": null}`)},
	{`{% if x is none %}none{% elif x is defined %}def{% else %}undef{% endif %}`, json.RawMessage(`{}`)},
	{`{{ ms | selectattr("tool_calls", "undefined") | list | length }}`, json.RawMessage(`{"ms": [{"role": "a"}, {"role": "b", "tool_calls": []}]}`)},
	{`{{ ms | selectattr("role", "equalto", "user") | map(attribute="content") | join("|") }}`, json.RawMessage(`{"ms": [{"role": "user", "content": "a"}, {"role": "x", "content": "b"}, {"role": "user", "content": "c"}]}`)},
	{`{{ ms | rejectattr("tool_calls") | list | length }}`, json.RawMessage(`{"ms": [{"role": "a"}, {"role": "b", "tool_calls": [1]}]}`)},
	{"{{ 'a\\\nb' }}", json.RawMessage(`{}`)},
	{`{{ "tab\there" }}|{{ 'q\'s' }}|{{ "u\u00e9" }}`, json.RawMessage(`{}`)},
	{`{{ x | tojson }}`, json.RawMessage(`{"x": {"b": 1, "a": [true, null, "é<&>"]}}`)},
	{`{{ x | tojson(indent=2) }}`, json.RawMessage(`{"x": {"b": 1, "a": [1.5, "s"]}}`)},
	{`{{ x | tojson(sort_keys=true) }}`, json.RawMessage(`{"x": {"b": 1, "a": 2}}`)},
	{`{{ x | tojson(separators=(",", ":")) }}`, json.RawMessage(`{"x": {"b": [1, 2], "a": "c"}}`)},
	{`{{ x | tojson(ensure_ascii=true) }}`, json.RawMessage(`{"x": "é😀"}`)},
	{`{{ raise_exception("bad role " ~ r) }}`, json.RawMessage(`{"r": "tool"}`)},
	{`{% for m in ms %}{{ loop.index }}/{{ loop.length }}{{ "," if not loop.last }}{% endfor %}`, json.RawMessage(`{"ms": [1, 2, 3]}`)},
	{`{% for m in ms if m > 1 %}{{ loop.index0 }}{{ m }}{% endfor %}`, json.RawMessage(`{"ms": [1, 2, 3]}`)},
	{`{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}`, json.RawMessage(`{"d": {"z": 1, "a": 2}}`)},
	{`{% set ns = namespace(n=0) %}{% for m in ms %}{% set ns.n = ns.n + m %}{% endfor %}{{ ns.n }}`, json.RawMessage(`{"ms": [1, 2, 3]}`)},
	{`{{ s.strip() }}|{{ s.split(",") }}|{{ s.startswith(" a") }}|{{ s.upper() }}|{{ s.replace("b", "x") }}`, json.RawMessage(`{"s": " a,b "}`)},
	{`{{ s[1:] }}|{{ s[-2:] }}|{{ s[::-1] }}`, json.RawMessage(`{"s": "hello"}`)},
	{`{{ x | default("d") }}|{{ y | default("d") }}|{{ z | default("d", true) }}`, json.RawMessage(`{"y": null, "z": ""}`)},
	{`{{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 3 }} {{ 7 / 2 }} {{ "a" ~ 1 }} {{ "ab" * 2 }}`, json.RawMessage(`{}`)},
	{`{{ 1 + none }}`, json.RawMessage(`{}`)},
	{`{{ "a" + 1 }}`, json.RawMessage(`{}`)},
	{`{{ ms[5] }}|{{ ms[-1] }}`, json.RawMessage(`{"ms": [1, 2]}`)},
	{`{{ d["k"] }}|{{ d.k }}|{{ d.get("q", "dflt") }}`, json.RawMessage(`{"d": {"k": "v"}}`)},
	{`{{ x.y }}`, json.RawMessage(`{}`)},
	{`{{ x | trim }}|{{ x | capitalize }}|{{ x | title }}`, json.RawMessage(`{"x": "  hello world "}`)},
	{"{% if true %}\n  a\n{% endif %}\n  b\n{%- if true %} c {% endif -%}\n d", json.RawMessage(`{}`)},
	{`{% macro f(a, b="x") %}{{ a }}-{{ b }}{% endmacro %}{{ f(1) }} {{ f(2, b=3) }}`, json.RawMessage(`{}`)},
	{`{{ [3, 1, 2] | sort | list }}|{{ ["b", "A", "a"] | sort }}|{{ [1, 2, 3] | reverse | list }}`, json.RawMessage(`{}`)},
	{`{{ x | string }}|{{ x | int }}|{{ "3.5" | float }}|{{ 3 | string }}`, json.RawMessage(`{"x": "12"}`)},
	{`{{ none }}|{{ true }}|{{ 1.0 }}|{{ 1e3 }}|{{ [none, true] }}|{{ {"a": none} }}`, json.RawMessage(`{}`)},
	{`{{ x }}`, json.RawMessage(`{"x": 1.5e-7}`)},
	{`{% for x in 5 %}{% endfor %}`, json.RawMessage(`{}`)},
	{`{{ s.items() }}`, json.RawMessage(`{"s": "str"}`)},
	{`{{ strftime_now("%Y") }}|{{ strftime_now("%d %B") | length > 3 }}`, json.RawMessage(`{}`)},
	{`{% if true %}{{ raise_exception("stop here") }}{% endif %}`, json.RawMessage(`{}`)},
	{`{{ x | tojson(indent=2, sort_keys=true) }}`, json.RawMessage(`{"x": [{"b": null, "a": {"d": 1, "c": [2, 3]}}]}`)},
}

// TestAgainstJinja2 renders every case with our engine and with
// transformers' Jinja2 environment: the same text, or both fail.
func TestAgainstJinja2(t *testing.T) {
	py := sdktest.Reference(t, "../../../scripts/ref.py", "transformers")
	out, err := sdktest.RunJSONLines(py, "../../../scripts/transformers/render.py", jinja2Cases, 1)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i, c := range jinja2Cases {
		var ref struct {
			Text  *string `json:"text"`
			Error string  `json:"error"`
		}
		if err := json.Unmarshal(out[i], &ref); err != nil {
			t.Fatal(err)
		}
		got, gerr := renderCase(c)
		switch {
		case ref.Text == nil && gerr == nil:
			t.Errorf("case %d %q: Jinja2 raises %s; we render %q", i, c.Template, ref.Error, got)
		case ref.Text != nil && gerr != nil:
			t.Errorf("case %d %q: Jinja2 renders %q; we fail: %v", i, c.Template, *ref.Text, gerr)
		case ref.Text != nil && got != *ref.Text:
			t.Errorf("case %d %q:\nours   %q\njinja2 %q", i, c.Template, got, *ref.Text)
		default:
			continue
		}
		bad++
	}
	t.Logf("%d of %d cases agree with Jinja2", len(jinja2Cases)-bad, len(jinja2Cases))
}

func renderCase(c jinja2Case) (string, error) {
	tmpl, err := Parse(c.Template)
	if err != nil {
		return "", err
	}
	ctx, err := FromJSON(c.Context)
	if err != nil {
		return "", err
	}
	vars := map[string]Value{}
	if m, ok := ctx.(*Map); ok {
		for _, k := range m.Keys() {
			vars[k], _ = m.Get(k)
		}
	}
	return tmpl.Render(vars)
}
