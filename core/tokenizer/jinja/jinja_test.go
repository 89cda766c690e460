package jinja

import (
	"errors"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	msgs, _ := FromJSON([]byte(`[{"role":"user","content":"a"},{"role":"assistant","content":"<think>r</think>\n\nb"}]`))
	vars := map[string]Value{"messages": msgs, "n": 3, "s": "  Hi There  ", "m": mustJSON(`{"b": 1, "a": [1, 2.5, "x", null, true]}`)}
	cases := []struct{ src, want string }{
		{`{{ 1 + 2 * 3 }}`, "7"},
		{`{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }}`, "3 -4 1 2 3.5 1024"},
		{`{{ "a" ~ 1 ~ none }}`, "a1None"},
		{`{{ none }}|{{ true }}|{{ undefined_name }}|{{ [1, 'a'] }}`, "None|True||[1, 'a']"},
		{`{{ s.strip() }}|{{ s|trim }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ "xxaxx".strip("x") }}`, "Hi There|Hi There|Hi There  |  Hi There|a"},
		{`{{ "a,b,,c".split(",") }} {{ " a  b ".split() }} {{ "a-b-c".split("-", 1) }} {{ " a  b c ".split(none, 1) }}`, "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b-c'] ['a', 'b c ']"},
		{`{% macro f(a=1) %}{{ a }}{% endmacro %}{{ f(a=none) }}`, "None"},
		{`{{ "hello"[1:3] }} {{ "hello"[::-1] }} {{ [1,2,3,4][-2:] }} {{ [1,2,3][::-1] }}`, "el olleh [3, 4] [3, 2, 1]"},
		{`{% for m in messages %}{{ loop.index }}{{ m.role[0] }}{% if not loop.last %},{% endif %}{% endfor %}`, "1u,2a"},
		{`{% for m in messages[::-1] %}{{ loop.revindex0 }}{{ loop.previtem.role if loop.previtem is defined else '-' }}{% endfor %}`, "1-0assistant"},
		{`{% set ns = namespace(x=0) %}{% for i in range(4) %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}`, "6"},
		{`{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}`, "1"},
		{`{{ messages[1].content.split('</think>')[-1].lstrip('\n') }}`, "b"},
		{`{{ m | tojson }}`, `{"b": 1, "a": [1, 2.5, "x", null, true]}`},
		{`{{ m | tojson(indent=2) }}`, "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2.5,\n    \"x\",\n    null,\n    true\n  ]\n}"},
		{`{{ m | tojson(sort_keys=true) }}`, `{"a": [1, 2.5, "x", null, true], "b": 1}`},
		{`{{ "é\n\"<" | tojson }}`, `"é\n\"<"`},
		// A dict's tojson is kept for the next call with the same options;
		// other options, or a namespace under it that changed, write it again.
		{`{{ m|tojson }}|{{ m|tojson(separators=[",", ":"]) }}|{{ m|tojson }}`, `{"b": 1, "a": [1, 2.5, "x", null, true]}|{"b":1,"a":[1,2.5,"x",null,true]}|{"b": 1, "a": [1, 2.5, "x", null, true]}`},
		{`{% set ns = namespace(a=1) %}{% set d = {'x': [ns]} %}{{ d|tojson }}{% set ns.a = 2 %}{{ d|tojson }}`, `{"x": [{"a": 1}]}{"x": [{"a": 2}]}`},
		{`{% for k, v in m|items %}{{ k }}={{ v|length if v is iterable else v }};{% endfor %}`, "b=1;a=5;"},
		{`{{ m.a|select("string")|list }} {{ m.a|reject("none")|length }} {{ [3,1,2]|sort|join(",") }}`, "['x'] 4 1,2,3"},
		{`{{ 'x' in 'axb' }} {{ 'b' in m }} {{ 1 not in [2] }} {{ m is mapping }} {{ 'a' is string }} {{ n is number }} {{ n is divisibleby 3 }}`, "True True True True True True True"},
		{`{% macro f(a, b='d') %}<{{ a }}{{ b }}>{% endmacro %}{{ f(1) }}{{ f(2, b=3) }}`, "<1d><23>"},
		{`{%- if n > 2 -%}  big  {%- elif n > 1 %}mid{% else %}small{% endif -%}`, "big"},
		{"a\n  {% if true %}\n  b\n  {% endif %}\nc", "a\n  b\nc"},
		{`{# comment #}x{{ 'y' if false }}z`, "xz"},
		{`{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}`, "02"},
		{`{% for i in [] %}x{% else %}empty{% endfor %}`, "empty"},
		{`{{ "Hello World"|lower|upper }} {{ "hello world"|title }} {{ "a b"|replace(" ", "_") }} {{ [1,1,2]|unique|list }}`, "HELLO WORLD Hello World a_b [1, 2]"},
		{`{{ {'k': 'v'}['k'] }} {{ {'k': 'v'}.get('z', 'd') }} {{ (1, 2)[0] }}`, "v d 1"},
		{`{% set a, b = 1, 2 %}{{ a + b }}`, "3"},
		{`{% set block %}x{{ n }}{% endset %}{{ block }}`, "x3"},
		{`{{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 3 / 3 }}`, "1.0 0.30000000000000004 1e+20 1.0"},
	}
	for _, c := range cases {
		t.Run(c.src, func(t *testing.T) {
			tmpl, err := Parse(c.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render(vars)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func mustJSON(s string) Value {
	v, err := FromJSON([]byte(s))
	if err != nil {
		panic(err)
	}
	return v
}

func TestErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{`{% if x %}`, "missing {% endif %}"},
		{`{% for %}{% endfor %}`, "bad loop target"},
		{`{{ 1 + }}`, "unexpected end"},
		{`{{ x | nosuch }}`, `unknown filter "nosuch"`},
		{`{{ raise_exception("bad role") }}`, "template raised: bad role"},
		{`{{ 'a' + 1 }}`, "unsupported operand"},
		{`{% endfor %}`, "unexpected {% endfor %}"},
		{`{{ "abc`, "unclosed {{"},
		{`{% frobnicate %}`, `unsupported statement "frobnicate"`},
		{`{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}`, "recursion too deep"},
	}
	for _, c := range cases {
		t.Run(c.src, func(t *testing.T) {
			tmpl, err := Parse(c.src)
			if err == nil {
				_, err = tmpl.Render(nil)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
	tmpl, _ := Parse(`{{ raise_exception("x") }}`)
	_, err := tmpl.Render(nil)
	var re *RaiseError
	if !errors.As(err, &re) || re.Msg != "x" {
		t.Fatalf("want a RaiseError, got %v", err)
	}
}

func FuzzTemplate(f *testing.F) {
	for _, s := range []string{`{% for m in messages %}{{ m.content|trim }}{% endfor %}`, `{{ x[1:-1] ~ y|tojson }}`, `{% set ns = namespace(a=1) %}{% if ns.a %}{% endif %}`} {
		f.Add(s)
	}
	msgs := mustJSON(`[{"role":"user","content":"hi"}]`)
	f.Fuzz(func(t *testing.T, src string) {
		tmpl, err := Parse(src)
		if err != nil {
			return
		}
		_, _ = tmpl.Render(map[string]Value{"messages": msgs, "x": "abc", "y": mustJSON(`{"a":[1]}`)})
	})
}
