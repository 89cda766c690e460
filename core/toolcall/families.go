package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// The tool-call formats of current open agent models, each as its chat
// template writes a call back into the prompt (so parsing what the model
// generates and rendering it again agree). Lenient parsers elsewhere turn
// garbage into calls (a name "unknown" with the raw text); here a
// malformed call is an error the model is shown, never a call.

// jsonObject checks that s is one JSON object and returns it compacted
// only of surrounding space.
func jsonObject(tool, s string) (json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage("{}"), nil
	}
	if s[0] != '{' || !json.Valid([]byte(s)) {
		return nil, fmt.Errorf("tool call %q: arguments must be a JSON object, got %.60q", tool, s)
	}
	return json.RawMessage(s), nil
}

// KimiK2 parses Kimi K2's special-token calls:
//
//	<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{...}<|tool_call_end|><|tool_calls_section_end|>
type KimiK2 struct{}

const (
	kimiSectionBegin = "<|tool_calls_section_begin|>"
	kimiSectionEnd   = "<|tool_calls_section_end|>"
	kimiCallBegin    = "<|tool_call_begin|>"
	kimiCallEnd      = "<|tool_call_end|>"
	kimiArgBegin     = "<|tool_call_argument_begin|>"
)

var kimiIDRe = regexp.MustCompile(`(?s)^\s*(?:functions\.)?(.+?):\d+\s*$`)

// Parse implements Parser.
func (KimiK2) Parse(text string) Parsed {
	var p Parsed
	var rest string
	p.Reasoning, rest = splitReasoning(TrimEnd(text))
	var content strings.Builder
	for {
		i := strings.Index(rest, kimiSectionBegin)
		if i < 0 {
			content.WriteString(rest)
			break
		}
		content.WriteString(rest[:i])
		section := rest[i+len(kimiSectionBegin):]
		end := strings.Index(section, kimiSectionEnd)
		if end < 0 {
			end = len(section) // generation may stop on the section's end token
			rest = ""
		} else {
			rest = section[end+len(kimiSectionEnd):]
		}
		sectionCalls(&p, section[:end], kimiCallBegin, kimiCallEnd, kimiCall)
	}
	p.Content = strings.TrimSpace(content.String())
	return p
}

func kimiCall(s string) (Call, error) {
	id, args, ok := strings.Cut(s, kimiArgBegin)
	if !ok {
		return Call{}, fmt.Errorf("tool call %.40q has no %s", s, kimiArgBegin)
	}
	m := kimiIDRe.FindStringSubmatch(id)
	if m == nil {
		return Call{}, fmt.Errorf("tool call id %.40q: expected functions.NAME:INDEX", strings.TrimSpace(id))
	}
	a, err := jsonObject(m[1], args)
	if err != nil {
		return Call{}, err
	}
	return Call{Name: m[1], Arguments: a}, nil
}

// DeepSeekV31 parses DeepSeek V3.1's calls (and V3's, whose arguments sit
// in a ```json block after "function<｜tool▁sep｜>NAME"):
//
//	<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜><｜tool▁calls▁end｜>
type DeepSeekV31 struct{}

const (
	dsCallsBegin = "<｜tool▁calls▁begin｜>"
	dsCallsEnd   = "<｜tool▁calls▁end｜>"
	dsCallBegin  = "<｜tool▁call▁begin｜>"
	dsCallEnd    = "<｜tool▁call▁end｜>"
	dsSep        = "<｜tool▁sep｜>"
)

var dsV3Re = regexp.MustCompile("(?s)^([^\n]+)\n```json\n(.*)\n```\\s*$")

// Parse implements Parser.
func (DeepSeekV31) Parse(text string) Parsed {
	var p Parsed
	var rest string
	p.Reasoning, rest = splitReasoning(TrimEnd(text))
	i := strings.Index(rest, dsCallsBegin)
	if i < 0 {
		if strings.Contains(rest, dsCallBegin) {
			p.Errors = append(p.Errors, fmt.Errorf("%s outside %s", dsCallBegin, dsCallsBegin))
		}
		p.Content = strings.TrimSpace(rest)
		return p
	}
	content := rest[:i]
	section := rest[i+len(dsCallsBegin):]
	if e := strings.Index(section, dsCallsEnd); e >= 0 {
		content += section[e+len(dsCallsEnd):]
		section = section[:e]
	}
	sectionCalls(&p, section, dsCallBegin, dsCallEnd, dsCall)
	p.Content = strings.TrimSpace(content)
	return p
}

// dsCall reads NAME<｜tool▁sep｜>{...}, or V3's function<｜tool▁sep｜>NAME
// and a ```json block.
func dsCall(body string) (Call, error) {
	name, args, ok := strings.Cut(body, dsSep)
	if !ok {
		return Call{}, fmt.Errorf("tool call %.40q has no %s", body, dsSep)
	}
	name = strings.TrimSpace(name)
	if name == "function" {
		m := dsV3Re.FindStringSubmatch(args)
		if m == nil {
			return Call{}, fmt.Errorf("tool call %.40q: expected NAME and a ```json block", args)
		}
		name, args = strings.TrimSpace(m[1]), m[2]
	}
	if name == "" {
		return Call{}, errors.New("tool call has no name")
	}
	a, err := jsonObject(name, args)
	if err != nil {
		return Call{}, err
	}
	return Call{Name: name, Arguments: a}, nil
}

// sectionCalls reads a tool-calls section made of begin…end calls (Kimi
// K2's and DeepSeek's special tokens), each through call; a malformed one
// is an error, and anything but calls ends the section with one.
func sectionCalls(p *Parsed, section, begin, end string, call func(string) (Call, error)) {
	for {
		section = strings.TrimSpace(section)
		if section == "" {
			return
		}
		if !strings.HasPrefix(section, begin) {
			p.Errors = append(p.Errors, fmt.Errorf("expected %s in the tool calls section, got %.40q", begin, section))
			return
		}
		body := section[len(begin):]
		e := strings.Index(body, end)
		if e < 0 {
			p.Errors = append(p.Errors, fmt.Errorf("unclosed %s: expected %s", begin, end))
			return
		}
		section = body[e+len(end):]
		c, err := call(body[:e])
		if err != nil {
			p.Errors = append(p.Errors, err)
			continue
		}
		p.Calls = append(p.Calls, c)
	}
}

// Mistral parses [TOOL_CALLS] calls: a JSON list of {"name", "arguments"}
// (tokenizer v3) or NAME[ARGS]{...} after each [TOOL_CALLS] (v11 and
// later: Devstral, Magistral, Mistral Small 3.2). [THINK]…[/THINK] is
// reasoning.
type Mistral struct{}

const (
	mistralCalls = "[TOOL_CALLS]"
	mistralArgs  = "[ARGS]"
)

var mistralNameRe = regexp.MustCompile(`^\s*([\w-]+)\s*$`)

// Parse implements Parser.
func (Mistral) Parse(text string) Parsed {
	var p Parsed
	rest := TrimEnd(text)
	if i := strings.Index(rest, "[/THINK]"); i >= 0 {
		p.Reasoning = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest[:i]), "[THINK]"))
		rest = rest[i+len("[/THINK]"):]
	}
	parts := strings.Split(rest, mistralCalls)
	p.Content = strings.TrimSpace(parts[0])
	for _, part := range parts[1:] {
		part = strings.TrimSpace(part)
		if strings.HasPrefix(part, "[") { // v3: a JSON list
			var list []json.RawMessage
			if err := json.Unmarshal([]byte(part), &list); err != nil {
				p.Errors = append(p.Errors, fmt.Errorf("tool calls are not a valid JSON list: %v", err))
				continue
			}
			for _, raw := range list {
				c, err := parseBody(string(raw))
				if err != nil {
					p.Errors = append(p.Errors, err)
					continue
				}
				p.Calls = append(p.Calls, c)
			}
			continue
		}
		for part != "" {
			name, after, ok := strings.Cut(part, mistralArgs)
			if !ok || !mistralNameRe.MatchString(name) {
				p.Errors = append(p.Errors, fmt.Errorf("expected NAME[ARGS]{...} after [TOOL_CALLS], got %.40q", part))
				break
			}
			name = strings.TrimSpace(name)
			dec := json.NewDecoder(strings.NewReader(after))
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				p.Errors = append(p.Errors, fmt.Errorf("tool call %q: arguments are not valid JSON: %v", name, err))
				break
			}
			raw = bytes.TrimSpace(raw)
			if len(raw) == 0 || raw[0] != '{' {
				p.Errors = append(p.Errors, fmt.Errorf("tool call %q: arguments must be a JSON object", name))
				break
			}
			p.Calls = append(p.Calls, Call{Name: name, Arguments: raw})
			part = strings.TrimSpace(after[dec.InputOffset():])
		}
	}
	return p
}

// GLM45 parses GLM-4.5/4.6/4.7's calls: the name, then key/value pairs,
//
//	<tool_call>NAME
//	<arg_key>KEY</arg_key>
//	<arg_value>VALUE</arg_value>
//	</tool_call>
//
// A value is text for parameters the tool's schema types as strings, else
// JSON (true, 3, {...}), else text — as GLM's template writes them (it
// writes non-strings with tojson).
type GLM45 struct {
	Types map[string]map[string]string
}

var (
	glmNameRe = regexp.MustCompile(`(?s)^(.*?)(?:<arg_key>|$)`)
	glmPairRe = regexp.MustCompile(`(?s)<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>`)
)

// Parse implements Parser.
func (g GLM45) Parse(text string) Parsed {
	var p Parsed
	var rest string
	p.Reasoning, rest = splitReasoning(TrimEnd(text))
	return tagged(p, rest, g.parseBody)
}

func (g GLM45) parseBody(s string) (Call, error) {
	name := strings.TrimSpace(glmNameRe.FindStringSubmatch(s)[1])
	if name == "" || strings.ContainsAny(name, "<>{}\n") {
		return Call{}, fmt.Errorf("tool call must start with the tool's name, got %.40q", name)
	}
	inner := s[strings.Index(s, name)+len(name):]
	var args argsObject
	for _, m := range glmPairRe.FindAllStringSubmatch(inner, -1) {
		key, val := strings.TrimSpace(m[1]), strings.TrimSpace(m[2])
		if args.has(key) {
			return Call{}, fmt.Errorf("tool call %q: parameter %q given twice", name, key)
		}
		args.add(key, g.value(name, key, val))
	}
	if left := strings.TrimSpace(glmPairRe.ReplaceAllString(inner, "")); left != "" {
		return Call{}, fmt.Errorf("tool call %q: text outside <arg_key>/<arg_value> pairs: %.40q", name, left)
	}
	return Call{Name: name, Arguments: args.json()}, nil
}

func (g GLM45) value(tool, key, val string) json.RawMessage {
	if g.Types[tool][key] == "string" {
		return jsonString(val)
	}
	if json.Valid([]byte(val)) {
		return json.RawMessage(val)
	}
	switch val { // Python literals, as the model may write them
	case "True":
		return json.RawMessage("true")
	case "False":
		return json.RawMessage("false")
	case "None":
		return json.RawMessage("null")
	}
	return jsonString(val)
}

// MiniMaxM2 parses MiniMax-M2's XML calls:
//
//	<minimax:tool_call>
//	<invoke name="NAME">
//	<parameter name="KEY">VALUE</parameter>
//	</invoke>
//	</minimax:tool_call>
//
// Values are text, converted by the tool's schema type as vLLM's parser
// does (integer, number, boolean, object/array as JSON; "null" is null).
type MiniMaxM2 struct {
	Types map[string]map[string]string
}

const (
	minimaxOpen  = "<minimax:tool_call>"
	minimaxClose = "</minimax:tool_call>"
)

var (
	invokeRe = regexp.MustCompile(`(?s)<invoke name=([^>]*)>(.*?)</invoke>`)
	paramRe  = regexp.MustCompile(`(?s)<parameter name=([^>]*)>(.*?)</parameter>`)
)

// Parse implements Parser.
func (m MiniMaxM2) Parse(text string) Parsed {
	var p Parsed
	var rest string
	p.Reasoning, rest = splitReasoning(TrimEnd(text))
	var content strings.Builder
	for {
		i := strings.Index(rest, minimaxOpen)
		if i < 0 {
			if strings.Contains(rest, minimaxClose) {
				p.Errors = append(p.Errors, fmt.Errorf("found %s without a matching %s", minimaxClose, minimaxOpen))
				rest = strings.Replace(rest, minimaxClose, "", 1)
				continue
			}
			content.WriteString(rest)
			break
		}
		content.WriteString(rest[:i])
		block := rest[i+len(minimaxOpen):]
		end := strings.Index(block, minimaxClose)
		if end < 0 {
			p.Errors = append(p.Errors, fmt.Errorf("unclosed %s: expected %s", minimaxOpen, minimaxClose))
			break
		}
		rest = block[end+len(minimaxClose):]
		calls, err := m.block(block[:end])
		if err != nil {
			p.Errors = append(p.Errors, err)
			continue
		}
		p.Calls = append(p.Calls, calls...)
	}
	p.Content = strings.TrimSpace(content.String())
	return p
}

// block parses the invokes of one tool-call block.
func (m MiniMaxM2) block(s string) ([]Call, error) {
	found := invokeRe.FindAllStringSubmatchIndex(s, -1)
	if len(found) == 0 {
		return nil, errors.New(`tool call block has no <invoke name="...">...</invoke>`)
	}
	var out []Call
	last := 0
	for _, f := range found {
		if t := strings.TrimSpace(s[last:f[0]]); t != "" {
			return nil, fmt.Errorf("text outside <invoke>: %.40q", t)
		}
		c, err := m.invoke(unquote(s[f[2]:f[3]]), s[f[4]:f[5]])
		if err != nil {
			return nil, err
		}
		out = append(out, c)
		last = f[1]
	}
	if t := strings.TrimSpace(s[last:]); t != "" {
		return nil, fmt.Errorf("text outside <invoke>: %.40q", t)
	}
	return out, nil
}

func (m MiniMaxM2) invoke(name, body string) (Call, error) {
	if name == "" {
		return Call{}, errors.New("invoke has no name")
	}
	var args argsObject
	last := 0
	for _, f := range paramRe.FindAllStringSubmatchIndex(body, -1) {
		if strings.TrimSpace(body[last:f[0]]) != "" {
			return Call{}, fmt.Errorf("tool call %q: text outside <parameter>: %.40q", name, strings.TrimSpace(body[last:f[0]]))
		}
		last = f[1]
		key := unquote(body[f[2]:f[3]])
		if args.has(key) {
			return Call{}, fmt.Errorf("tool call %q: parameter %q given twice", name, key)
		}
		args.add(key, m.value(name, key, strings.TrimSpace(body[f[4]:f[5]])))
	}
	if strings.TrimSpace(body[last:]) != "" {
		return Call{}, fmt.Errorf("tool call %q: text outside <parameter>: %.40q", name, strings.TrimSpace(body[last:]))
	}
	return Call{Name: name, Arguments: args.json()}, nil
}

// value converts a parameter's text by its schema type.
func (m MiniMaxM2) value(tool, key, v string) json.RawMessage {
	if strings.EqualFold(v, "null") {
		return json.RawMessage("null")
	}
	switch m.Types[tool][key] {
	case "integer":
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return json.RawMessage(strconv.FormatInt(n, 10))
		}
	case "number":
		if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
				return json.RawMessage(strconv.FormatInt(int64(f), 10))
			}
			return json.RawMessage(strconv.FormatFloat(f, 'g', -1, 64))
		}
	case "boolean":
		switch strings.ToLower(v) {
		case "true", "1", "yes", "on":
			return json.RawMessage("true")
		case "false", "0", "no", "off":
			return json.RawMessage("false")
		}
	case "object", "array":
		if json.Valid([]byte(v)) {
			return json.RawMessage(v)
		}
	default:
		return jsonString(v)
	}
	// The type did not fit: JSON if it is, else text (as vLLM falls back).
	if json.Valid([]byte(v)) {
		return json.RawMessage(v)
	}
	return jsonString(v)
}

func unquote(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
		return s[1 : len(s)-1]
	}
	return s
}

// Harmony parses GPT-OSS's messages (OpenAI's harmony format), as the
// model writes them after "<|start|>assistant":
//
//	<|channel|>analysis<|message|>…<|end|><|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>
//
// The analysis channel is reasoning, final (and commentary without a
// recipient, a preamble) is content, a message to a recipient is a call:
// functions.NAME calls NAME; other recipients (browser.search, python)
// are called by their full name.
type Harmony struct{}

const (
	hStart   = "<|start|>"
	hChannel = "<|channel|>"
	hMessage = "<|message|>"
)

var harmonyEnds = []string{"<|end|>", "<|call|>", "<|return|>"}

// Parse implements Parser.
func (Harmony) Parse(text string) Parsed {
	var p Parsed
	var reasoning, content []string
	s := text
	for {
		s = strings.TrimPrefix(s, hStart)
		if strings.TrimSpace(s) == "" {
			break
		}
		i := strings.Index(s, hMessage)
		if i < 0 {
			p.Errors = append(p.Errors, fmt.Errorf("harmony message without %s: %.40q", hMessage, s))
			break
		}
		header, body := s[:i], s[i+len(hMessage):]
		end, endTok := len(body), ""
		for _, e := range harmonyEnds {
			if j := strings.Index(body, e); j >= 0 && j < end {
				end, endTok = j, e
			}
		}
		s = body[min(end+len(endTok), len(body)):]
		body = body[:end]
		channel, recipient := harmonyHeader(header)
		switch {
		case recipient != "":
			name := strings.TrimPrefix(recipient, "functions.")
			if name == "" {
				p.Errors = append(p.Errors, errors.New("harmony message to an empty recipient"))
				continue
			}
			a, err := jsonObject(name, body)
			if err != nil {
				p.Errors = append(p.Errors, err)
				continue
			}
			p.Calls = append(p.Calls, Call{Name: name, Arguments: a})
		case channel == "analysis":
			reasoning = append(reasoning, body)
		default:
			content = append(content, body)
		}
	}
	p.Reasoning = strings.TrimSpace(strings.Join(reasoning, "\n"))
	p.Content = strings.TrimSpace(strings.Join(content, "\n"))
	return p
}

// harmonyHeader reads a message header: [role][ to=R]<|channel|>NAME[ to=R][ <|constrain|>TYPE | TYPE].
func harmonyHeader(h string) (channel, recipient string) {
	pre, post, _ := strings.Cut(h, hChannel)
	fields := strings.Fields(strings.ReplaceAll(pre+" "+post, "<|constrain|>", " "))
	if f := strings.Fields(post); len(f) > 0 {
		channel = f[0]
	}
	for _, f := range fields {
		if r, ok := strings.CutPrefix(f, "to="); ok {
			recipient = r
		}
	}
	return channel, recipient
}
