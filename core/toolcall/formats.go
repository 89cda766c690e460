package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Llama3JSON parses Llama 3.x tool calls: the whole message is a JSON
// object {"name": ..., "parameters": {...}} (or "arguments"), optionally
// after <|python_tag|>, several separated by ";". A message that does not
// start with "{" is plain content.
type Llama3JSON struct{}

const pythonTag = "<|python_tag|>"

// Parse implements Parser.
func (Llama3JSON) Parse(text string) Parsed {
	var p Parsed
	var rest string
	p.Reasoning, rest = splitReasoning(TrimEnd(text))
	body := strings.TrimSpace(rest)
	hasTag := strings.HasPrefix(body, pythonTag)
	body = strings.TrimSpace(strings.TrimPrefix(body, pythonTag))
	if !strings.HasPrefix(body, "{") {
		p.Content = strings.TrimSpace(rest)
		if hasTag {
			p.Errors = append(p.Errors, errors.New("<|python_tag|> must be followed by a JSON tool call"))
		}
		return p
	}
	dec := json.NewDecoder(strings.NewReader(body))
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			p.Errors = append(p.Errors, fmt.Errorf("tool call is not valid JSON: %v", err))
			return p
		}
		c, err := parseBody(string(raw))
		if err != nil {
			p.Errors = append(p.Errors, err)
		} else {
			p.Calls = append(p.Calls, c)
		}
		tail := strings.TrimSpace(body[dec.InputOffset():])
		if tail == "" {
			return p
		}
		if !strings.HasPrefix(tail, ";") {
			p.Errors = append(p.Errors, fmt.Errorf("unexpected text after a tool call: %.40q", tail))
			return p
		}
		body = strings.TrimSpace(tail[1:])
		if body == "" {
			return p
		}
		dec = json.NewDecoder(strings.NewReader(body))
	}
}

// Qwen3Coder parses Qwen3-Coder's XML tool calls:
//
//	<tool_call>
//	<function=NAME>
//	<parameter=KEY>
//	VALUE
//	</parameter>
//	</function>
//	</tool_call>
//
// Parameter values are text; Types (tool -> parameter -> JSON schema type)
// turns them into numbers, booleans, objects or arrays where the tool's
// schema says so, as vLLM's qwen3_coder parser does.
type Qwen3Coder struct {
	Types map[string]map[string]string
}

var (
	functionRe  = regexp.MustCompile(`(?s)^\s*<function=([^>\n]+)>(.*?)</function>\s*$`)
	parameterRe = regexp.MustCompile(`(?s)<parameter=([^>\n]+)>(.*?)</parameter>`)
)

// Parse implements Parser.
func (q Qwen3Coder) Parse(text string) Parsed {
	var p Parsed
	var rest string
	p.Reasoning, rest = splitReasoning(TrimEnd(text))
	return tagged(p, rest, q.parseBody)
}

func (q Qwen3Coder) parseBody(s string) (Call, error) {
	m := functionRe.FindStringSubmatch(s)
	if m == nil {
		return Call{}, errors.New("tool call must be <function=NAME>...</function>")
	}
	name := strings.TrimSpace(m[1])
	inner := m[2]
	var args argsObject
	for _, pm := range parameterRe.FindAllStringSubmatchIndex(inner, -1) {
		key := strings.TrimSpace(inner[pm[2]:pm[3]])
		val := inner[pm[4]:pm[5]]
		// The template writes one newline around the value.
		val = strings.TrimPrefix(val, "\n")
		val = strings.TrimSuffix(val, "\n")
		if args.has(key) {
			return Call{}, fmt.Errorf("tool call %q: parameter %q given twice", name, key)
		}
		enc, err := q.value(name, key, val)
		if err != nil {
			return Call{}, err
		}
		args.add(key, enc)
	}
	left := parameterRe.ReplaceAllString(inner, "")
	if strings.Contains(left, "<parameter=") || strings.Contains(left, "</parameter>") {
		return Call{}, fmt.Errorf("tool call %q: unbalanced <parameter> tags", name)
	}
	if strings.TrimSpace(left) != "" {
		return Call{}, fmt.Errorf("tool call %q: text outside <parameter> tags: %.40q", name, strings.TrimSpace(left))
	}
	return Call{Name: name, Arguments: args.json()}, nil
}

// argsObject builds a call's arguments from key/value pairs, in the order
// the model wrote them (XML-style formats give text pairs, not JSON).
type argsObject struct {
	b    bytes.Buffer
	seen map[string]bool
}

func (o *argsObject) has(key string) bool { return o.seen[key] }

func (o *argsObject) add(key string, val json.RawMessage) {
	if o.seen == nil {
		o.seen = map[string]bool{}
		o.b.WriteByte('{')
	} else {
		o.b.WriteByte(',')
	}
	o.seen[key] = true
	o.b.Write(jsonString(key))
	o.b.WriteByte(':')
	o.b.Write(val)
}

func (o *argsObject) json() json.RawMessage {
	if o.seen == nil {
		return json.RawMessage("{}")
	}
	o.b.WriteByte('}')
	return o.b.Bytes()
}

func (q Qwen3Coder) value(tool, key, val string) (json.RawMessage, error) {
	typ := q.Types[tool][key]
	switch typ {
	case "integer", "number", "boolean", "object", "array", "null":
		v := strings.TrimSpace(val)
		if typ == "boolean" {
			v = strings.ToLower(v)
		}
		if !json.Valid([]byte(v)) {
			return nil, fmt.Errorf("tool call %q: parameter %q must be a JSON %s, got %.40q", tool, key, typ, v)
		}
		return json.RawMessage(v), nil
	}
	return jsonString(val), nil
}

// jsonString encodes s without HTML escaping (the tool sees "<", not "\u003c").
func jsonString(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimRight(b.Bytes(), "\n")
}

// ForTools returns a parser that knows the episode's tool schemas, for
// formats whose values are untyped text.
func ForTools(p Parser, tools []ToolSchema) Parser {
	if len(tools) == 0 {
		return p
	}
	switch q := p.(type) {
	case Qwen3Coder:
		q.Types = schemaTypes(tools)
		return q
	case GLM45:
		q.Types = schemaTypes(tools)
		return q
	case MiniMaxM2:
		q.Types = schemaTypes(tools)
		return q
	}
	return p
}

// schemaTypes maps tool -> parameter -> its JSON-schema type.
func schemaTypes(tools []ToolSchema) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, t := range tools {
		var schema struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
		}
		if json.Unmarshal(t.Parameters, &schema) != nil {
			continue
		}
		types := map[string]string{}
		for k, prop := range schema.Properties {
			if s, ok := prop.Type.(string); ok {
				types[k] = s
			}
		}
		out[t.Name] = types
	}
	return out
}

// ToolSchema is a tool's name and JSON-schema parameters.
type ToolSchema struct {
	Name       string
	Parameters json.RawMessage
}
