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
	"slices"
	"strconv"
	"strings"
)

// Schema is the JSON Schema subset this package makes and checks.
type Schema struct {
	Type                 string   `json:"type,omitempty"`
	Description          string   `json:"description,omitempty"`
	Properties           Props    `json:"properties,omitempty"`
	Required             []string `json:"required,omitempty"`
	AdditionalProperties any      `json:"additionalProperties,omitempty"` // false or a *Schema
	Items                *Schema  `json:"items,omitempty"`
	Enum                 []any    `json:"enum,omitempty"`
	Minimum              *float64 `json:"minimum,omitempty"`
	Maximum              *float64 `json:"maximum,omitempty"`
	MinLength            *int     `json:"minLength,omitempty"`
	MaxLength            *int     `json:"maxLength,omitempty"`
}

// Props are an object's properties in field order, so a schema shown to a
// model reads like the struct it came from.
type Props []Prop

// Prop is one property.
type Prop struct {
	Name   string
	Schema *Schema
}

func (ps Props) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, p := range ps {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(p.Name)
		v, err := json.Marshal(p.Schema)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
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
		s := &Schema{Type: "object", Properties: Props{}, AdditionalProperties: false}
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
		// A field of the outer struct replaces an embedded one of its name.
		if i := slices.IndexFunc(s.Properties, func(q Prop) bool { return q.Name == name }); i >= 0 {
			s.Properties[i].Schema = p
		} else {
			s.Properties = append(s.Properties, Prop{name, p})
		}
		if required {
			s.Required = append(s.Required, name)
		}
	}
	return nil
}

// Raw returns the schema as JSON.
func (s *Schema) Raw() json.RawMessage {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a Schema is always marshalable
	}
	return b
}
