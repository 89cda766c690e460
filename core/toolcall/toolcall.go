// Package toolcall parses tool calls out of generated text. Parsing never
// rewrites the tokens: it only reads the text to decide what to execute.
package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Call is one parsed tool call.
type Call struct {
	Name      string
	Arguments json.RawMessage
}

// Parsed is a generated message split into its parts.
type Parsed struct {
	Content   string
	Reasoning string
	Calls     []Call
	// Errors are malformed calls; the model is shown them as observations.
	Errors []error
}

// Parser is a tool-call format.
type Parser interface {
	Parse(text string) Parsed
}

// Formats are the tool-call formats by name (vLLM's --tool-call-parser
// names where it has one).
var Formats = []string{"hermes", "llama3_json", "qwen3_coder", "kimi_k2", "deepseek_v31", "deepseek_v3", "mistral", "glm45", "minimax_m2", "harmony"}

// New returns the parser of a named format: hermes (Hermes, Qwen2.5,
// Qwen3), llama3_json (Llama 3.x), qwen3_coder (Qwen3-Coder's XML),
// kimi_k2, deepseek_v31 (also reads V3's), mistral, glm45 (GLM-4.5–4.7),
// minimax_m2, harmony (GPT-OSS).
func New(format string) (Parser, error) {
	switch format {
	case "hermes", "":
		return Hermes{}, nil
	case "llama3_json":
		return Llama3JSON{}, nil
	case "qwen3_coder":
		return Qwen3Coder{}, nil
	case "kimi_k2":
		return KimiK2{}, nil
	case "deepseek_v31", "deepseek_v3":
		return DeepSeekV31{}, nil
	case "mistral":
		return Mistral{}, nil
	case "glm45":
		return GLM45{}, nil
	case "minimax_m2":
		return MiniMaxM2{}, nil
	case "harmony":
		return Harmony{}, nil
	}
	return nil, fmt.Errorf("unknown tool call format %q (one of %s)", format, strings.Join(Formats, ", "))
}

// splitReasoning takes a leading <think>...</think> block off the text.
func splitReasoning(text string) (reasoning, rest string) {
	rest = text
	if i := strings.Index(rest, thinkClose); i >= 0 {
		r := rest[:i]
		if j := strings.Index(r, thinkOpen); j >= 0 {
			r = r[j+len(thinkOpen):]
		}
		return strings.TrimSpace(r), rest[i+len(thinkClose):]
	}
	return "", rest
}

// Hermes parses <tool_call>{"name":..., "arguments":{...}}</tool_call>, as
// Hermes, Qwen2.5 and Qwen3 emit them; <think>...</think> is reasoning.
type Hermes struct{}

const (
	openTag    = "<tool_call>"
	closeTag   = "</tool_call>"
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// endMarkers are end-of-turn tokens that appear in generated text when
// special tokens are not skipped (they must not be, or tool tags vanish).
var endMarkers = []string{"<|im_end|>", "<|user|>", "<|observation|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "</s>", "<｜end▁of▁sentence｜>", "<|return|>", "<|end|>"}

// TrimEnd removes trailing end-of-turn markers from generated text.
func TrimEnd(text string) string {
	for {
		t := strings.TrimRight(text, " \n")
		trimmed := false
		for _, m := range endMarkers {
			if strings.HasSuffix(t, m) {
				text, trimmed = strings.TrimSuffix(t, m), true
			}
		}
		if !trimmed {
			return text
		}
	}
}

// Parse implements Parser.
func (Hermes) Parse(text string) Parsed {
	var p Parsed
	var rest string
	p.Reasoning, rest = splitReasoning(TrimEnd(text))
	return tagged(p, rest, parseBody)
}

// tagged parses <tool_call>...</tool_call> blocks with body, keeping the
// text around them as content.
func tagged(p Parsed, rest string, body func(string) (Call, error)) Parsed {
	return taggedWith(p, rest, openTag, closeTag, body)
}

// taggedWith is tagged for another pair of tags.
func taggedWith(p Parsed, rest, openTag, closeTag string, body func(string) (Call, error)) Parsed {
	var content strings.Builder
	for {
		i := strings.Index(rest, openTag)
		j := strings.Index(rest, closeTag)
		if i < 0 {
			if j >= 0 {
				p.Errors = append(p.Errors, fmt.Errorf("found %s without a matching %s", closeTag, openTag))
				rest = strings.Replace(rest, closeTag, "", 1)
				continue
			}
			content.WriteString(rest)
			break
		}
		if j >= 0 && j < i {
			p.Errors = append(p.Errors, fmt.Errorf("found %s without a matching %s", closeTag, openTag))
			content.WriteString(rest[:j])
			rest = rest[j+len(closeTag):]
			continue
		}
		content.WriteString(rest[:i])
		inner := rest[i+len(openTag):]
		end := strings.Index(inner, closeTag)
		if end < 0 {
			p.Errors = append(p.Errors, fmt.Errorf("unclosed %s: expected %s", openTag, closeTag))
			break
		}
		if nested := strings.Index(inner[:end], openTag); nested >= 0 {
			p.Errors = append(p.Errors, fmt.Errorf("nested %s inside a tool call", openTag))
			rest = inner[end+len(closeTag):]
			continue
		}
		c, err := body(inner[:end])
		if err != nil {
			p.Errors = append(p.Errors, err)
		} else {
			p.Calls = append(p.Calls, c)
		}
		rest = inner[end+len(closeTag):]
	}
	p.Content = strings.TrimSpace(content.String())
	return p
}

func parseBody(s string) (Call, error) {
	var raw struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		// Some models write "parameters" for "arguments".
		Parameters json.RawMessage `json:"parameters"`
	}
	s = strings.TrimSpace(s)
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return Call{}, fmt.Errorf("tool call is not valid JSON: %v", err)
	}
	if raw.Name == "" {
		return Call{}, errors.New(`tool call has no "name"`)
	}
	args := raw.Arguments
	if len(args) == 0 {
		args = raw.Parameters
	}
	args = bytes.TrimSpace(args)
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	// Arguments given as a JSON string holding an object.
	if args[0] == '"' {
		var inner string
		if err := json.Unmarshal(args, &inner); err == nil && json.Valid([]byte(inner)) {
			args = json.RawMessage(inner)
		}
	}
	if args[0] != '{' {
		return Call{}, fmt.Errorf("tool call %q: arguments must be a JSON object", raw.Name)
	}
	return Call{Name: raw.Name, Arguments: args}, nil
}
