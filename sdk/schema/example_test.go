package schema

import (
	"encoding/json"
	"os"
	"testing"
)

// Every schema of the golden cases that has an object type gets an example
// it accepts (by this package's validator, itself checked against Python's
// jsonschema).
func TestExampleValidates(t *testing.T) {
	b, err := os.ReadFile("testdata/validate.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Schema json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cases {
		ex := Example(c.Schema)
		if err := Validate(c.Schema, ex); err != nil {
			t.Errorf("schema %s: example %s: %v", c.Schema, ex, err)
		}
		n++
	}
	for _, s := range []string{
		`{"type":"object","properties":{"n":{"type":"integer","minimum":3.5,"maximum":9}},"required":["n"],"additionalProperties":false}`,
		`{"type":"object","properties":{"s":{"type":"string","minLength":6}},"required":["s"]}`,
		`{"type":"object","properties":{"s":{"type":"string","maxLength":2}},"required":["s"]}`,
		`{"type":"object","properties":{"o":{"type":"object","properties":{"k":{"type":"string","enum":["a","b"]}},"required":["k"]}},"required":["o"]}`,
	} {
		if err := Validate(json.RawMessage(s), Example(json.RawMessage(s))); err != nil {
			t.Errorf("%s: %v", s, err)
		}
		n++
	}
	t.Logf("%d schemas", n)
}
