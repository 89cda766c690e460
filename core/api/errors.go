package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/prorl/prorl/core/reqbody"
)

// Error is the JSON error body: {"error":{"code","message","field"}}.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func (e *Error) Error() string { return e.Message }

func Errf(status int, code, field, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

func Invalid(field, format string, args ...any) *Error {
	return Errf(http.StatusUnprocessableEntity, "invalid_field", field, format, args...)
}

func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"could not encode the response"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	_, _ = w.Write([]byte("\n"))
}

// Detail writes FastAPI's error body, {"detail": msg}, as the ProRL and
// Polar servers answer.
func Detail(w http.ResponseWriter, code int, msg string) {
	WriteJSON(w, code, map[string]string{"detail": msg})
}

func WriteError(w http.ResponseWriter, e *Error) {
	WriteJSON(w, e.Status, map[string]*Error{"error": e})
}

// decode reads one JSON value strictly: size-limited, unknown fields
// rejected, nothing after the value.
// bodyTimeout bounds reading one request body: a client that drips its
// body a byte at a time cannot hold a connection (and a goroutine) longer.
var bodyTimeout = 30 * time.Second

func Decode(w http.ResponseWriter, r *http.Request, limit int64, v any) *Error {
	data, err := reqbody.Read(w, r, limit, bodyTimeout)
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return Errf(http.StatusRequestEntityTooLarge, "body_too_large", "", "request body exceeds %d bytes", mb.Limit)
		}
		if errors.Is(err, reqbody.ErrTimeout) {
			return Errf(http.StatusRequestTimeout, "body_timeout", "", "the request body took longer than %v to arrive", bodyTimeout)
		}
		return Errf(http.StatusBadRequest, "bad_body", "", "read body: %v", err)
	}
	return decodeBytes(data, v)
}

func decodeBytes(data []byte, v any) *Error {
	if len(bytes.TrimSpace(data)) == 0 {
		return Errf(http.StatusBadRequest, "empty_body", "", "request body is empty; expected a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return Errf(http.StatusBadRequest, "malformed_json", "", "unexpected data after the JSON value")
	}
	return nil
}

func jsonError(err error) *Error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return Errf(http.StatusBadRequest, "malformed_json", "", "malformed JSON at byte %d: %v", se.Offset, err)
	case errors.As(err, &te):
		if te.Field == "" {
			return Errf(http.StatusBadRequest, "invalid_type", "", "the request body must be %s, not %s", jsonKind(te.Type), jsonValue(te.Value))
		}
		return Errf(http.StatusBadRequest, "invalid_type", te.Field, "field %q must be %s, not %s", te.Field, jsonKind(te.Type), jsonValue(te.Value))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Errf(http.StatusBadRequest, "malformed_json", "", "truncated JSON")
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return Errf(http.StatusBadRequest, "unknown_field", name, "unknown field %q", name)
	}
	var ve *Error
	if errors.As(err, &ve) {
		return ve
	}
	return Errf(http.StatusBadRequest, "malformed_json", "", "%v", err)
}

// jsonKind names a Go type in JSON's terms, never Go's.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "a JSON object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return "a base64 string"
		}
		return "a JSON array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a JSON value"
}

// jsonValue is what encoding/json says it found ("number 1.5", "array").
func jsonValue(v string) string {
	switch v {
	case "object", "array", "string", "bool", "null":
		return "a JSON " + v
	}
	return v
}

// FastAPIInvalid is FastAPI's 422 body, as Polar answers: a list naming
// each bad field by its location, e.g. ["query", "limit"].
func FastAPIInvalid(w http.ResponseWriter, typ string, loc []any, msg string) {
	WriteJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": []map[string]any{{"type": typ, "loc": loc, "msg": msg}}})
}
