package schema

import (
	"encoding/json"
	"os"
	"testing"
)

type inner struct {
	Path string `json:"path" desc:"Where."`
}

type sample struct {
	Name    string            `json:"name" desc:"A name." schema:"minlen=1,maxlen=8"`
	Count   int               `json:"count,omitempty" schema:"min=1,max=10"`
	Ratio   float64           `json:"ratio" schema:"optional"`
	Mode    string            `json:"mode" schema:"enum=fast|slow"`
	Flag    *bool             `json:"flag"`
	Tags    []string          `json:"tags,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Inner   inner             `json:"inner,omitempty"`
	Any     json.RawMessage   `json:"any,omitempty"`
	Skipped string            `json:"-"`
	hidden  int
}

var _ = sample{}.hidden

func TestOf(t *testing.T) {
	for _, c := range []struct {
		mode Mode
		want string
	}{
		{Args, `{"type":"object","properties":{"name":{"type":"string","description":"A name.","minLength":1,"maxLength":8},"count":{"type":"integer","minimum":1,"maximum":10},"ratio":{"type":"number"},"mode":{"type":"string","enum":["fast","slow"]},"flag":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string"}},"env":{"type":"object","additionalProperties":{"type":"string"}},"inner":{"type":"object","properties":{"path":{"type":"string","description":"Where."}},"required":["path"],"additionalProperties":false},"any":{}},"required":["name","mode"],"additionalProperties":false}`},
		{Config, `{"type":"object","properties":{"name":{"type":"string","description":"A name.","minLength":1,"maxLength":8},"count":{"type":"integer","minimum":1,"maximum":10},"ratio":{"type":"number"},"mode":{"type":"string","enum":["fast","slow"]},"flag":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string"}},"env":{"type":"object","additionalProperties":{"type":"string"}},"inner":{"type":"object","properties":{"path":{"type":"string","description":"Where."}},"additionalProperties":false},"any":{}},"additionalProperties":false}`},
	} {
		s, err := For[sample](c.mode)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(s.Raw()); got != c.want {
			t.Errorf("mode %d:\n got %s\nwant %s", c.mode, got, c.want)
		}
	}
}

func TestOfRefuses(t *testing.T) {
	type loop struct {
		Next *loop `json:"next"`
	}
	type badTag struct {
		N int `json:"n" schema:"min=x"`
	}
	type unknownTag struct {
		N int `json:"n" schema:"pattern=x"`
	}
	type intKeys struct {
		M map[int]string `json:"m"`
	}
	type fn struct {
		F func() `json:"f"`
	}
	for name, f := range map[string]func() error{
		"loop":       func() error { _, err := For[loop](Args); return err },
		"badTag":     func() error { _, err := For[badTag](Args); return err },
		"unknownTag": func() error { _, err := For[unknownTag](Args); return err },
		"intKeys":    func() error { _, err := For[intKeys](Args); return err },
		"func":       func() error { _, err := For[fn](Args); return err },
	} {
		if f() == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestValidateGolden checks Validate against the verdicts of the reference
// validator (Python's jsonschema, Draft 2020-12) on testdata/validate.json;
// regenerate with scripts/schema/golden.sh.
func TestValidateGolden(t *testing.T) {
	b, err := os.ReadFile("testdata/validate.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Doc    json.RawMessage `json:"doc"`
		Valid  bool            `json:"valid"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		err := Validate(c.Schema, c.Doc)
		if (err == nil) != c.Valid {
			t.Errorf("%s: reference says valid=%v, we say %v", c.Name, c.Valid, err)
		}
	}
}

func TestValidatePath(t *testing.T) {
	s, _ := For[sample](Config)
	for doc, want := range map[string]string{
		`{"inner":{"path":1}}`: "inner.path: must be a string, got integer",
		`{"tags":["a",2]}`:     "tags[1]: must be a string, got integer",
		`{"count":0}`:          "count: must be at least 1, got 0",
		`{"bogus":1}`:          "bogus: unknown key (known: any, count, env, flag, inner, mode, name, ratio, tags)",
		`{"mode":"medium"}`:    "mode: must be one of [fast slow]",
		`{"inner":{"x":"y"}}`:  "inner.x: unknown key (known: path)",
		`[]`:                   "must be an object, got array",
		`{"count":1.5}`:        "count: must be an integer, got number",
		`{"count":2.0}`:        "",
		`{"env":{"A":"1"}}`:    "",
		`{"name":"123456789"}`: "name: must have at most 8 characters",
	} {
		err := Validate(s.Raw(), json.RawMessage(doc))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("%s: got %q, want %q", doc, got, want)
		}
	}
}

func FuzzValidate(f *testing.F) {
	s, _ := For[sample](Args)
	f.Add([]byte(`{"name":"a","mode":"fast"}`))
	f.Add([]byte(`{"tags":[1,2,{"a":[]}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		_ = Validate(s.Raw(), doc)
		_ = Validate(doc, []byte(`{"a":1}`))
	})
}
