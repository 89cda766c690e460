package openapi

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

type inner struct {
	A string `json:"a"`
}

type embedded struct {
	E int `json:"e"`
}

type sample struct {
	embedded
	Name  string            `json:"name"`
	Opt   *int              `json:"opt,omitempty"`
	Ptr   *float64          `json:"ptr"`
	List  []inner           `json:"list"`
	Bytes []byte            `json:"bytes,omitempty"`
	Pair  [2]int            `json:"pair"`
	Map   map[string]string `json:"map,omitempty"`
	Raw   json.RawMessage   `json:"raw,omitempty"`
	When  time.Time         `json:"when"`
	Skip  string            `json:"-"`
	NoTag bool
}

func TestReflect(t *testing.T) {
	s := NewSchemas()
	if got := s.Of(sample{}, Response); got["$ref"] != "#/components/schemas/Sample" {
		t.Fatalf("ref %v", got)
	}
	sc := s.Components()["Sample"]
	props := sc["properties"].(map[string]Schema)
	tests := []struct {
		field string
		want  Schema
	}{
		{"e", Integer},
		{"name", String},
		{"opt", Integer},
		{"ptr", Nullable(Number)},
		{"list", Schema{"type": []string{"array", "null"}, "items": Schema{"$ref": "#/components/schemas/Inner"}}},
		{"bytes", Schema{"type": "string", "contentEncoding": "base64"}},
		{"pair", Schema{"type": "array", "items": Integer, "minItems": 2, "maxItems": 2}},
		{"map", Schema{"type": []string{"object", "null"}, "additionalProperties": String}},
		{"raw", Any},
		{"when", Schema{"type": "string", "format": "date-time"}},
		{"NoTag", Boolean},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(props[tt.field], tt.want) {
			t.Errorf("%s: %v, want %v", tt.field, props[tt.field], tt.want)
		}
	}
	if len(props) != len(tests) {
		t.Errorf("%d properties, want %d: %v", len(props), len(tests), props)
	}
	want := []string{"NoTag", "e", "list", "name", "pair", "ptr", "when"}
	if !reflect.DeepEqual(sc["required"], want) {
		t.Errorf("required %v, want %v", sc["required"], want)
	}
	// A request's schema requires nothing and has its own name.
	s.Of(sample{}, Request)
	if r := s.Components()["SampleInput"]; r == nil || r["required"] != nil || r["additionalProperties"] != false {
		t.Errorf("request schema %v", r)
	}
}

func TestPath(t *testing.T) {
	for in, want := range map[string]string{
		"/v1/rollouts/{id}":                 "/v1/rollouts/{id}",
		"/v1/nodes/{id:[^/:]+}:heartbeat":   "/v1/nodes/{id}:heartbeat",
		"/gateway/{session:r-[0-9a-f]+}/v1": "/gateway/{session}/v1",
		"/rollout/task/{task_id:.+}":        "/rollout/task/{task_id}",
		"/x/{a:[0-9]{2}}/{b}":               "/x/{a}/{b}",
	} {
		if got := Path(in); got != want {
			t.Errorf("Path(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRef: a Go value inside a written schema is reflected where it
// stands, at any depth, and its component registered.
func TestRef(t *testing.T) {
	s := NewSchemas()
	got := s.Of(Object(map[string]Schema{"one": Ref(inner{}), "many": ArrayOf(Ref(inner{})), "either": OneOf(Ref(inner{}), String)}, "one"), Response)
	want := Object(map[string]Schema{"one": {"$ref": "#/components/schemas/Inner"}, "many": ArrayOf(Schema{"$ref": "#/components/schemas/Inner"}),
		"either": OneOf(Schema{"$ref": "#/components/schemas/Inner"}, String)}, "one")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if s.Components()["Inner"] == nil {
		t.Error("Inner not registered")
	}
}
