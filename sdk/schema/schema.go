// Package schema makes JSON Schemas from Go types and checks JSON against
// them: a tool's parameters and a domain's config are declared once, as the
// struct they decode into, and the schema the model and the host see is
// generated from it.
//
// Field tags: `json` names a field ("-" skips it; omitempty makes it
// optional in a tool's arguments), `desc` describes it, and `schema` holds
// comma-separated constraints: required, optional, min=N, max=N,
// minlen=N, maxlen=N, enum=a|b|c.
package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Schema is the JSON Schema subset this package makes and checks.
type Schema struct {
	Type                 string             `json:"type,omitempty"`
	Description          string             `json:"description,omitempty"`
	Properties           map[string]*Schema `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	AdditionalProperties any                `json:"additionalProperties,omitempty"` // false or a *Schema
	Items                *Schema            `json:"items,omitempty"`
	Enum                 []any              `json:"enum,omitempty"`
	Minimum              *float64           `json:"minimum,omitempty"`
	Maximum              *float64           `json:"maximum,omitempty"`
	MinLength            *int               `json:"minLength,omitempty"`
	MaxLength            *int               `json:"maxLength,omitempty"`
	// order keeps properties in field order when marshalled.
	order []string
}

// Mode says which fields are required by default.
type Mode int

const (
	// Args: a tool's arguments; a field is required unless it is a pointer,
	// has omitempty, or is tagged optional.
	Args Mode = iota
	// Config: a configuration overlaid on defaults; a field is optional
	// unless tagged required.
	Config
)

var rawMessage = reflect.TypeFor[json.RawMessage]()

// For returns the schema of T's JSON form.
func For[T any](mode Mode) (*Schema, error) { return Of(reflect.TypeFor[T](), mode) }

// Of returns the schema of t's JSON form.
func Of(t reflect.Type, mode Mode) (*Schema, error) {
	return of(t, mode, map[reflect.Type]bool{})
}

func of(t reflect.Type, mode Mode, seen map[reflect.Type]bool) (*Schema, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessage || t.Kind() == reflect.Interface {
		return &Schema{}, nil
	}
	switch t.Kind() {
	case reflect.String:
		return &Schema{Type: "string"}, nil
	case reflect.Bool:
		return &Schema{Type: "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s := &Schema{Type: "integer"}
		if t.Kind() >= reflect.Uint {
			zero := 0.0
			s.Minimum = &zero
		}
		return s, nil
	case reflect.Float32, reflect.Float64:
		return &Schema{Type: "number"}, nil
	case reflect.Slice, reflect.Array:
		items, err := of(t.Elem(), mode, seen)
		if err != nil {
			return nil, err
		}
		return &Schema{Type: "array", Items: items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("schema: %s: map keys must be strings", t)
		}
		v, err := of(t.Elem(), mode, seen)
		if err != nil {
			return nil, err
		}
		return &Schema{Type: "object", AdditionalProperties: v}, nil
	case reflect.Struct:
		if seen[t] {
			return nil, fmt.Errorf("schema: %s refers to itself", t)
		}
		seen[t] = true
		defer delete(seen, t)
		s := &Schema{Type: "object", Properties: map[string]*Schema{}, AdditionalProperties: false}
		if err := fields(s, t, mode, seen); err != nil {
			return nil, err
		}
		return s, nil
	}
	return nil, fmt.Errorf("schema: %s has no JSON Schema here", t)
}

func fields(s *Schema, t reflect.Type, mode Mode, seen map[reflect.Type]bool) error {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && opts == "" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && name == "" {
			et := f.Type
			for et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				if err := fields(s, et, mode, seen); err != nil {
					return err
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		p, err := of(f.Type, mode, seen)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		p.Description = f.Tag.Get("desc")
		required := mode == Args && f.Type.Kind() != reflect.Pointer && !strings.Contains(","+opts+",", ",omitempty,")
		for c := range strings.SplitSeq(f.Tag.Get("schema"), ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(c), "=")
			switch k {
			case "":
			case "required":
				required = true
			case "optional":
				required = false
			case "min", "max":
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return fmt.Errorf("%s.%s: schema %s=%q: %w", t.Name(), f.Name, k, v, err)
				}
				if k == "min" {
					p.Minimum = &x
				} else {
					p.Maximum = &x
				}
			case "minlen", "maxlen":
				n, err := strconv.Atoi(v)
				if err != nil {
					return fmt.Errorf("%s.%s: schema %s=%q: %w", t.Name(), f.Name, k, v, err)
				}
				if k == "minlen" {
					p.MinLength = &n
				} else {
					p.MaxLength = &n
				}
			case "enum":
				for e := range strings.SplitSeq(v, "|") {
					p.Enum = append(p.Enum, e)
				}
			default:
				return fmt.Errorf("%s.%s: unknown schema constraint %q", t.Name(), f.Name, k)
			}
		}
		if _, dup := s.Properties[name]; !dup {
			s.order = append(s.order, name)
		}
		s.Properties[name] = p
		if required {
			s.Required = append(s.Required, name)
		}
	}
	return nil
}

// MarshalJSON writes properties in field order, so a schema shown to a
// model reads like the struct it came from.
func (s *Schema) MarshalJSON() ([]byte, error) {
	type plain Schema
	b, err := json.Marshal((*plain)(s))
	if err != nil || len(s.Properties) == 0 || len(s.order) != len(s.Properties) {
		return b, err
	}
	var props strings.Builder
	props.WriteByte('{')
	for i, k := range s.order {
		if i > 0 {
			props.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(s.Properties[k])
		if err != nil {
			return nil, err
		}
		props.Write(kb)
		props.WriteByte(':')
		props.Write(vb)
	}
	props.WriteByte('}')
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["properties"] = json.RawMessage(props.String())
	// Keys in a fixed order: type, description, properties, required, then the rest.
	var out strings.Builder
	out.WriteByte('{')
	first := true
	emit := func(k string) {
		v, ok := m[k]
		if !ok {
			return
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(k)
		out.Write(kb)
		out.WriteByte(':')
		out.Write(v)
		delete(m, k)
	}
	for _, k := range []string{"type", "description", "properties", "required", "additionalProperties"} {
		emit(k)
	}
	for _, k := range []string{"items", "enum", "minimum", "maximum", "minLength", "maxLength"} {
		emit(k)
	}
	out.WriteByte('}')
	return []byte(out.String()), nil
}

// Raw returns the schema as JSON.
func (s *Schema) Raw() json.RawMessage {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a Schema is always marshalable
	}
	return b
}
