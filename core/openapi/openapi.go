// Package openapi builds an OpenAPI 3.1 document from Go values: the
// schemas of request and response bodies are reflected from the structs the
// server decodes and encodes (their json tags), so the document cannot
// drift from them; what reflection cannot see (a map built in a handler, a
// field with its own decoder) is written as a Schema.
package openapi

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"sort"
	"strings"
	"time"
)

// Schema is a JSON Schema (2020-12, as OpenAPI 3.1 takes it).
type Schema map[string]any

// Common schemas.
var (
	String  = Schema{"type": "string"}
	Integer = Schema{"type": "integer"}
	Number  = Schema{"type": "number"}
	Boolean = Schema{"type": "boolean"}
	Any     = Schema{}
)

// Object is an object schema with exactly these properties; required
// names those always present.
func Object(props map[string]Schema, required ...string) Schema {
	s := Schema{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// ArrayOf is an array of items.
func ArrayOf(items Schema) Schema { return Schema{"type": "array", "items": items} }

// MapOf is an object whose values are all of one schema.
func MapOf(v Schema) Schema { return Schema{"type": "object", "additionalProperties": v} }

// Enum is a string that is one of values.
func Enum(values ...string) Schema { return Schema{"type": "string", "enum": values} }

// OneOf is a value matching exactly one of the schemas.
func OneOf(s ...Schema) Schema { return Schema{"oneOf": s} }

// Nullable is s or null.
func Nullable(s Schema) Schema { return Schema{"oneOf": []Schema{s, {"type": "null"}}} }

// Describe returns s with a description.
func Describe(s Schema, text string) Schema {
	out := maps.Clone(s)
	out["description"] = text
	return out
}

// goValue marks, inside a written Schema, a Go value whose schema Of
// reflects in its place: a hand-written body can hold a reflected type.
const goValue = "x-go-value"

// Ref is the schema of v's type, reflected when the enclosing Schema is
// given to Of.
func Ref(v any) Schema { return Schema{goValue: v} }

// Mode says which way a body travels: a request's schema refuses unknown
// fields (the server decodes strictly) and requires nothing reflection can
// see; a response's requires every field encoding/json always writes.
type Mode int

// The two modes.
const (
	Response Mode = iota
	Request
)

// Schemas reflects Go types into named components.
type Schemas struct {
	components map[string]Schema
	byType     map[typeKey]string
	// overrides are types whose JSON is not their fields' (own decoders).
	overrides map[reflect.Type]Schema
}

type typeKey struct {
	t    reflect.Type
	mode Mode
}

// NewSchemas returns an empty registry.
func NewSchemas() *Schemas {
	return &Schemas{components: map[string]Schema{}, byType: map[typeKey]string{}, overrides: map[reflect.Type]Schema{
		reflect.TypeFor[time.Time]():       {"type": "string", "format": "date-time"},
		reflect.TypeFor[json.RawMessage](): Any,
	}}
}

// Override gives the schema of the type of v (a value or a pointer to one).
func (s *Schemas) Override(v any, sc Schema) {
	s.overrides[indirect(reflect.TypeOf(v))] = sc
}

// Components are the named schemas reflected so far.
func (s *Schemas) Components() map[string]Schema { return s.components }

// Of is the schema of v's type in mode m: a named struct becomes a
// reference to its component; a Schema is returned with the Refs in it
// reflected.
func (s *Schemas) Of(v any, m Mode) Schema {
	if sc, ok := v.(Schema); ok {
		return s.resolve(sc, m)
	}
	return s.typ(reflect.TypeOf(v), m)
}

func (s *Schemas) resolve(sc Schema, m Mode) Schema {
	if v, ok := sc[goValue]; ok {
		return s.Of(v, m)
	}
	out := make(Schema, len(sc))
	for k, v := range sc {
		switch t := v.(type) {
		case Schema:
			out[k] = s.resolve(t, m)
		case []Schema:
			l := make([]Schema, len(t))
			for i, e := range t {
				l[i] = s.resolve(e, m)
			}
			out[k] = l
		case map[string]Schema:
			p := make(map[string]Schema, len(t))
			for n, e := range t {
				p[n] = s.resolve(e, m)
			}
			out[k] = p
		default:
			out[k] = v
		}
	}
	return out
}

func indirect(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func (s *Schemas) typ(t reflect.Type, m Mode) Schema {
	if sc, ok := s.overrides[t]; ok {
		return sc
	}
	switch t.Kind() {
	case reflect.Pointer:
		return s.typ(t.Elem(), m)
	case reflect.String:
		return Schema{"type": "string"}
	case reflect.Bool:
		return Schema{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return Schema{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return Schema{"type": "number"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return Schema{"type": "string", "contentEncoding": "base64"}
		}
		// encoding/json writes a nil slice as null.
		return Schema{"type": []string{"array", "null"}, "items": s.typ(t.Elem(), m)}
	case reflect.Array:
		return Schema{"type": "array", "items": s.typ(t.Elem(), m), "minItems": t.Len(), "maxItems": t.Len()}
	case reflect.Map:
		return Schema{"type": []string{"object", "null"}, "additionalProperties": s.typ(t.Elem(), m)}
	case reflect.Interface:
		return Any
	case reflect.Struct:
		if t.Name() == "" {
			return s.object(t, m)
		}
		return s.named(t, m)
	}
	panic(fmt.Sprintf("openapi: no schema for %s", t))
}

func (s *Schemas) named(t reflect.Type, m Mode) Schema {
	k := typeKey{t, m}
	name, ok := s.byType[k]
	if !ok {
		name = capital(t.Name())
		if m == Request && !strings.HasSuffix(name, "Request") {
			name += "Input"
		}
		if s.taken(name) { // two packages' types of one name
			pkg := t.PkgPath()
			name = capital(pkg[strings.LastIndex(pkg, "/")+1:]) + name
		}
		for i := 2; s.taken(name); i++ {
			name = fmt.Sprintf("%s%d", strings.TrimRight(name, "0123456789"), i)
		}
		s.byType[k] = name
		s.components[name] = nil // reserve: a type may refer to itself
		s.components[name] = s.object(t, m)
	}
	return Schema{"$ref": "#/components/schemas/" + name}
}

func (s *Schemas) taken(name string) bool {
	_, ok := s.components[name]
	return ok
}

// object reflects a struct's fields as encoding/json writes them:
// embedded structs flattened, "-" skipped, omitempty optional.
func (s *Schemas) object(t reflect.Type, m Mode) Schema {
	props := map[string]Schema{}
	var required []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" || (!f.IsExported() && !f.Anonymous) {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" && indirect(f.Type).Kind() == reflect.Struct {
				walk(indirect(f.Type))
				continue
			}
			if name == "" {
				name = f.Name
			}
			sc := s.typ(f.Type, m)
			omit := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
			if f.Type.Kind() == reflect.Pointer && !omit {
				sc = Nullable(sc)
			}
			props[name] = sc
			if m == Response && !omit {
				required = append(required, name)
			}
		}
	}
	walk(t)
	sort.Strings(required)
	return Object(props, required...)
}

func capital(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
