package openapi

import (
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Operation is one method on one path.
type Operation struct {
	ID, Summary, Description string
	Tags                     []string
	// Query parameters the operation takes, by name.
	Query map[string]Schema
	// Body is the request body (a Go value to reflect, or a Schema); nil: none.
	Body any
	// BodyExample is an example request body.
	BodyExample any
	// Responses by status code ("200", "default"): a Go value to reflect,
	// a Schema, or nil for a body-less response.
	Responses map[string]any
	// ContentType of the successful responses (default application/json).
	ContentType string
	// Security names the schemes any of which admits a caller; nil: public.
	Security []string
}

// Document is an OpenAPI 3.1 document being built.
type Document struct {
	Title, Version, Description string
	Schemas                     *Schemas
	SecuritySchemes             map[string]Schema
	Tags                        []Tag
	paths                       map[string]map[string]Operation
}

// Tag groups operations.
type Tag struct{ Name, Description string }

// NewDocument starts a document.
func NewDocument(title, version, description string) *Document {
	return &Document{Title: title, Version: version, Description: description, Schemas: NewSchemas(),
		SecuritySchemes: map[string]Schema{}, paths: map[string]map[string]Operation{}}
}

// muxVar matches a gorilla/mux path variable with its pattern: {id:[^/:]+}.
var muxVar = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)(:[^{}]*(\{[^{}]*\}[^{}]*)*)?\}`)

// Path is a router's path template as OpenAPI writes it ({id:[^/]+} → {id}).
func Path(template string) string { return muxVar.ReplaceAllString(template, "{$1}") }

// Add documents one operation; template may carry gorilla/mux patterns.
func (d *Document) Add(template, method string, op Operation) {
	p := Path(template)
	if d.paths[p] == nil {
		d.paths[p] = map[string]Operation{}
	}
	d.paths[p][strings.ToLower(method)] = op
}

// JSON is the document as a value encoding/json writes.
func (d *Document) JSON() map[string]any {
	paths := map[string]any{}
	for p, ms := range d.paths {
		item := map[string]any{}
		for m, op := range ms {
			item[m] = d.operation(p, op)
		}
		paths[p] = item
	}
	tags := []map[string]any{}
	for _, t := range d.Tags {
		tags = append(tags, map[string]any{"name": t.Name, "description": t.Description})
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": d.Title, "version": d.Version, "description": d.Description},
		"tags":    tags,
		"paths":   paths,
		"components": map[string]any{
			"schemas":         d.Schemas.Components(),
			"securitySchemes": d.SecuritySchemes,
		},
	}
}

func (d *Document) operation(path string, op Operation) map[string]any {
	out := map[string]any{"operationId": op.ID, "summary": op.Summary}
	if op.Description != "" {
		out["description"] = op.Description
	}
	if len(op.Tags) > 0 {
		out["tags"] = op.Tags
	}
	var params []map[string]any
	for _, name := range muxVar.FindAllStringSubmatch(path, -1) {
		params = append(params, map[string]any{"name": name[1], "in": "path", "required": true, "schema": String})
	}
	for _, name := range slices.Sorted(maps.Keys(op.Query)) {
		params = append(params, map[string]any{"name": name, "in": "query", "schema": op.Query[name]})
	}
	if len(params) > 0 {
		out["parameters"] = params
	}
	if op.Body != nil {
		media := map[string]any{"schema": d.Schemas.Of(op.Body, Request)}
		if op.BodyExample != nil {
			media["example"] = op.BodyExample
		}
		out["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": media}}
	}
	ct := op.ContentType
	if ct == "" {
		ct = "application/json"
	}
	resps := map[string]any{}
	for code, body := range op.Responses {
		r := map[string]any{"description": describeStatus(code)}
		if body != nil {
			c := ct
			if code == "default" || code[0] == '4' || code[0] == '5' {
				c = "application/json"
			}
			r["content"] = map[string]any{c: map[string]any{"schema": d.Schemas.Of(body, Response)}}
		}
		resps[code] = r
	}
	out["responses"] = resps
	if op.Security == nil {
		out["security"] = []any{}
	} else {
		var sec []any
		for _, s := range op.Security {
			sec = append(sec, map[string][]string{s: {}})
		}
		out["security"] = sec
	}
	return out
}

func describeStatus(code string) string {
	switch code {
	case "200":
		return "OK"
	case "201":
		return "Created"
	case "202":
		return "Accepted"
	case "default":
		return "An error"
	}
	return "Status " + code
}
