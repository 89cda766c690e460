// Package harmony renders chat conversations in OpenAI's harmony format,
// the prompt format of GPT-OSS, as the openai-harmony library's
// render_conversation_for_completion does (vLLM renders GPT-OSS prompts
// with that library, not with a chat template). The tests compare every
// render with openai-harmony's, for conversations and for tool schemas
// drawn at random from the keywords tools use (types, type lists,
// nullable, enums, arrays, nested objects, oneOf and anyOf, titles,
// descriptions, examples, defaults of every JSON kind).
//
// Not pinned down, so not claimed to match: where a oneOf variant's own
// description shows (after the variant, above the property, both or
// neither depends on the schema in ways the tests have not resolved).
// Chat messages map to harmony messages as vLLM's GPT-OSS path does: the
// first system (or developer) message becomes the developer message's
// instructions; an assistant turn's reasoning_content the analysis
// channel, its content the final channel (commentary beside tool calls),
// each tool call a commentary message to functions.NAME with content type
// "<|constrain|>json"; a tool result a message from functions.NAME.
package harmony

import (
	"errors"
	"fmt"
	"strings"

	"github.com/prorl/prorl/core/trajectory"
)

// Options are the system message's settings.
type Options struct {
	// ReasoningEffort is "low", "medium" (the default) or "high".
	ReasoningEffort string
	// Date, when set, is the system message's "Current date" (YYYY-MM-DD).
	// Fixed rather than today's, so a run's prompts do not change at
	// midnight (and keep their prefix cache).
	Date string
	// AddGenerationPrompt ends the prompt with the assistant's header.
	AddGenerationPrompt bool
}

const (
	identity = "You are ChatGPT, a large language model trained by OpenAI."
	cutoff   = "2024-06"
)

// message is one harmony message: its header fields and text.
type message struct {
	role, author, recipient, channel, contentType, text string
	end                                                 string // <|end|> or <|call|>
}

// Validate checks the options.
func (o Options) Validate() error {
	switch o.ReasoningEffort {
	case "", "low", "medium", "high":
	default:
		return fmt.Errorf("harmony reasoning effort %q: want low, medium or high", o.ReasoningEffort)
	}
	if o.Date != "" && (len(o.Date) != 10 || o.Date[4] != '-' || o.Date[7] != '-') {
		return fmt.Errorf("harmony date %q: want YYYY-MM-DD", o.Date)
	}
	return nil
}

// Render renders a conversation (OpenAI chat messages, with the reasoning
// of assistant turns in ReasoningContent) and its function tools: the
// system message, a developer message with the first system message's
// content as instructions and the tools, then the turns.
func Render(msgs []trajectory.Message, tools []trajectory.Tool, opts Options) (string, error) {
	if err := opts.Validate(); err != nil {
		return "", err
	}
	var b strings.Builder
	effort := opts.ReasoningEffort
	if effort == "" {
		effort = "medium"
	}
	b.WriteString("<|start|>system<|message|>" + identity + "\nKnowledge cutoff: " + cutoff)
	if opts.Date != "" {
		b.WriteString("\nCurrent date: " + opts.Date)
	}
	b.WriteString("\n\nReasoning: " + effort + "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.")
	if len(tools) > 0 {
		b.WriteString("\nCalls to these tools must go to the commentary channel: 'functions'.")
	}
	b.WriteString("<|end|>")

	instructions, hasInstructions := "", false
	if len(msgs) > 0 && (msgs[0].Role == "system" || msgs[0].Role == "developer") {
		instructions, hasInstructions = msgs[0].Content, true
		msgs = msgs[1:]
	}
	if hasInstructions || len(tools) > 0 {
		var sections []string
		if hasInstructions {
			sections = append(sections, "# Instructions\n\n"+instructions)
		}
		if len(tools) > 0 {
			ns, err := namespace(tools)
			if err != nil {
				return "", err
			}
			sections = append(sections, ns)
		}
		b.WriteString("<|start|>developer<|message|>" + strings.Join(sections, "\n\n") + "<|end|>")
	}

	hm, err := convert(msgs)
	if err != nil {
		return "", err
	}
	for _, m := range dropAnalysis(hm) {
		b.WriteString("<|start|>" + m.author)
		if m.recipient != "" {
			b.WriteString(" to=" + m.recipient)
		}
		if m.channel != "" {
			b.WriteString("<|channel|>" + m.channel)
		}
		if m.contentType != "" {
			b.WriteString(" " + m.contentType)
		}
		b.WriteString("<|message|>" + m.text + m.end)
	}
	if opts.AddGenerationPrompt {
		b.WriteString("<|start|>assistant")
	}
	return b.String(), nil
}

// convert maps chat messages to harmony messages: an assistant turn's
// reasoning to the analysis channel, its content to final (or, beside
// tool calls, commentary), each tool call to a commentary message to
// functions.NAME, a tool result to a message from functions.NAME.
func convert(msgs []trajectory.Message) ([]message, error) {
	var out []message
	callNames := map[string]string{}
	lastCall := ""
	for i, m := range msgs {
		switch m.Role {
		case "user":
			out = append(out, message{role: "user", author: "user", text: m.Content, end: "<|end|>"})
		case "assistant":
			if m.ReasoningContent != "" {
				out = append(out, message{role: "assistant", author: "assistant", channel: "analysis", text: m.ReasoningContent, end: "<|end|>"})
			}
			if m.Content != "" {
				ch := "final"
				if len(m.ToolCalls) > 0 {
					ch = "commentary"
				}
				out = append(out, message{role: "assistant", author: "assistant", channel: ch, text: m.Content, end: "<|end|>"})
			}
			for _, c := range m.ToolCalls {
				if c.Function.Name == "" {
					return nil, fmt.Errorf("message %d: a tool call without a name", i)
				}
				args := c.Function.Arguments
				if args == "" {
					args = "{}"
				}
				out = append(out, message{role: "assistant", author: "assistant", recipient: "functions." + c.Function.Name,
					channel: "commentary", contentType: "<|constrain|>json", text: args, end: "<|call|>"})
				if c.ID != "" {
					callNames[c.ID] = c.Function.Name
				}
				lastCall = c.Function.Name
			}
		case "tool":
			name := m.Name
			if name == "" {
				name = callNames[m.ToolCallID]
			}
			if name == "" {
				name = lastCall
			}
			if name == "" {
				return nil, fmt.Errorf("message %d: a tool result with no tool call before it", i)
			}
			out = append(out, message{role: "tool", author: "functions." + name, recipient: "assistant", channel: "commentary", text: m.Content, end: "<|end|>"})
		case "system", "developer":
			return nil, fmt.Errorf("message %d: a %s message after the first message (harmony has one developer message)", i, m.Role)
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	return out, nil
}

// dropAnalysis drops the reasoning of finished turns as harmony does:
// when the last assistant message is a final answer, analysis messages
// before the first final answer go.
func dropAnalysis(ms []message) []message {
	lastFinal := false
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].role == "assistant" {
			lastFinal = ms[i].channel == "final"
			break
		}
	}
	if !lastFinal {
		return ms
	}
	first := -1
	for i, m := range ms {
		if m.channel == "final" {
			first = i
			break
		}
	}
	out := make([]message, 0, len(ms))
	for i, m := range ms {
		if i < first && m.channel == "analysis" {
			continue
		}
		out = append(out, m)
	}
	return out
}

// namespace renders the tools as harmony's functions namespace.
func namespace(tools []trajectory.Tool) (string, error) {
	var b strings.Builder
	b.WriteString("# Tools\n\n## functions\n\nnamespace functions {\n\n")
	for i, t := range tools {
		if t.Function.Name == "" {
			return "", fmt.Errorf("tools[%d]: no function name", i)
		}
		if t.Function.Description != "" {
			for _, line := range strings.Split(t.Function.Description, "\n") {
				b.WriteString("// " + line + "\n")
			}
		}
		b.WriteString("type " + t.Function.Name + " = ")
		params := strings.TrimSpace(string(t.Function.Parameters))
		if params == "" || params == "null" {
			b.WriteString("()")
		} else {
			schema, err := parse([]byte(params))
			if err != nil {
				return "", fmt.Errorf("tools[%d].function.parameters: %w", i, err)
			}
			b.WriteString("(_: " + typeOf(schema, "") + ")")
		}
		b.WriteString(" => any;\n\n")
	}
	b.WriteString("} // namespace functions")
	return b.String(), nil
}

var errDepth = errors.New("nested deeper than 64 levels")
