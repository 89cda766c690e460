package schema

import (
	"encoding/json"

	"github.com/prorl/prorl/sdk/wire"
)

// Error is a document that does not match its schema, at Path (dotted,
// with [i] for array items; "" for the document itself).
type Error = wire.SchemaError

// Validate checks doc against the JSON Schema schema (the subset Of makes:
// type, properties, required, additionalProperties, items, enum, minimum,
// maximum, minLength, maxLength). It returns the first mismatch as *Error.
// The host checks a plugin's config table with the same code (sdk/wire).
func Validate(schema, doc json.RawMessage) error { return wire.ValidateSchema(schema, doc) }
