package tokenizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prorl/prorl/core/tokenizer/bpe"
	"github.com/prorl/prorl/core/tokenizer/harmony"
	"github.com/prorl/prorl/core/tokenizer/jinja"
	"github.com/prorl/prorl/core/trajectory"
)

// LocalOptions adapt the conversion of messages to what a template
// expects.
type LocalOptions struct {
	// ArgumentsAsString passes tool-call arguments to the template as the
	// JSON string the model wrote (DeepSeek V3's template concatenates
	// them); by default they are parsed into an object, as vLLM does.
	ArgumentsAsString bool
	// NullContentWithToolCalls passes content None for an assistant turn
	// that only calls tools (DeepSeek V3's template tests for it).
	NullContentWithToolCalls bool
	// ChatTemplate overrides the model's template (file contents).
	ChatTemplate string
	// TemplateName picks one of the model's named templates (Hugging
	// Face's apply_chat_template(chat_template=NAME)). Empty: as
	// transformers chooses, "tool_use" when tools are given and the model
	// has one, else "default".
	TemplateName string
	// ChatFormat "harmony" renders with OpenAI's harmony format (GPT-OSS)
	// instead of a chat template, as vLLM does for GPT-OSS; HarmonyOptions
	// are its system message's settings. Empty: the chat template.
	ChatFormat     string
	HarmonyOptions harmony.Options
}

// Local is a Go tokenizer loaded from a model directory: Hugging Face's
// tokenizer.json (or, without one, SentencePiece's tokenizer.model),
// tokenizer_config.json (special tokens and chat
// template), optional chat_template.jinja and generation_config.json.
type Local struct {
	tok     *bpe.Tokenizer
	tmpl    *jinja.Template
	toolUse *jinja.Template // the named "tool_use" template, for renders with tools
	// noDefault: the model has named templates but no "default" one.
	noDefault error
	special   map[string]jinja.Value
	stops     []int
	opts      LocalOptions
}

var _ Tokenizer = (*Local)(nil)

// LoadDir loads a model directory.
func LoadDir(dir string, opts LocalOptions) (*Local, error) {
	tok, err := bpe.Load(filepath.Join(dir, "tokenizer.json"))
	if errors.Is(err, os.ErrNotExist) {
		// Repositories such as InternLM2's ship only SentencePiece's file.
		if _, serr := os.Stat(filepath.Join(dir, "tokenizer.model")); serr == nil {
			tok, err = bpe.LoadSentencePiece(filepath.Join(dir, "tokenizer.model"))
		}
	}
	if err != nil {
		return nil, err
	}
	l := &Local{tok: tok, opts: opts, special: map[string]jinja.Value{}}
	var cfg map[string]json.RawMessage
	if b, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json")); err == nil {
		if err := json.Unmarshal(b, &cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "tokenizer_config.json"), err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	// The special tokens every chat template may use, as Hugging Face
	// passes them (strings, or the content of AddedToken objects).
	for _, name := range []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"} {
		raw, ok := cfg[name]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			var obj struct {
				Content string `json:"content"`
			}
			if json.Unmarshal(raw, &obj) == nil && obj.Content != "" {
				s = obj.Content
			}
		}
		if s != "" {
			l.special[name] = s
		}
	}
	switch opts.ChatFormat {
	case "harmony":
		return l.loadHarmony(dir)
	case "", "template":
	default:
		return nil, fmt.Errorf("chat format %q: want \"template\" or \"harmony\"", opts.ChatFormat)
	}
	src, toolSrc, err := chooseTemplates(dir, cfg, opts)
	if err != nil {
		return nil, err
	}
	if src == "" {
		// Only named templates and none is "default": renders with tools
		// take "tool_use" (if there is one), others fail, as in transformers.
		l.noDefault = fmt.Errorf("%s: the model has several chat templates and none is \"default\": name one (tokenizer.chat_template_name)", dir)
	} else if l.tmpl, err = jinja.Parse(src); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if toolSrc != "" {
		if l.toolUse, err = jinja.Parse(toolSrc); err != nil {
			return nil, fmt.Errorf("%s: tool_use template: %w", dir, err)
		}
	}
	l.stops = stopIDs(dir, tok, l.special)
	return l, nil
}

// chooseTemplates finds the template to render with and, when the model
// has one and no template was named, its "tool_use" template, as
// transformers does: tokenizer_config.json's chat_template is a string or
// a list of {name, template}; chat_template.jinja is the default and
// additional_chat_templates/NAME.jinja the named ones.
func chooseTemplates(dir string, cfg map[string]json.RawMessage, opts LocalOptions) (src, toolUse string, err error) {
	if opts.ChatTemplate != "" {
		return opts.ChatTemplate, "", nil
	}
	named := map[string]string{}
	if raw, ok := cfg["chat_template"]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			named["default"] = s
		} else {
			var list []struct {
				Name     string `json:"name"`
				Template string `json:"template"`
			}
			if err := json.Unmarshal(raw, &list); err != nil {
				return "", "", fmt.Errorf("tokenizer_config.json chat_template: %w", err)
			}
			for _, n := range list {
				named[n.Name] = n.Template
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja")); err == nil {
		named["default"] = string(b)
	}
	extra, _ := filepath.Glob(filepath.Join(dir, "additional_chat_templates", "*.jinja"))
	for _, p := range extra {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", "", err
		}
		named[strings.TrimSuffix(filepath.Base(p), ".jinja")] = string(b)
	}
	names := make([]string, 0, len(named))
	for n := range named {
		names = append(names, n)
	}
	slices.Sort(names)
	if opts.TemplateName != "" {
		t, ok := named[opts.TemplateName]
		if !ok {
			return "", "", fmt.Errorf("%s: no chat template named %q (the model has: %s)", dir, opts.TemplateName, strings.Join(names, ", "))
		}
		return t, "", nil
	}
	if len(named) == 0 {
		return "", "", fmt.Errorf("%s: no chat template (chat_template.jinja or tokenizer_config.json chat_template)", dir)
	}
	if named["tool_use"] == "" && named["default"] == "" {
		return "", "", fmt.Errorf("%s: the model has several chat templates (%s) and none is \"default\": name one (tokenizer.chat_template_name)", dir, strings.Join(names, ", "))
	}
	return named["default"], named["tool_use"], nil
}

// stopIDs: generation_config.json's eos_token_id (a number or a list),
// else the tokenizer's eos token.
func stopIDs(dir string, tok *bpe.Tokenizer, special map[string]jinja.Value) []int {
	if b, err := os.ReadFile(filepath.Join(dir, "generation_config.json")); err == nil {
		var gc struct {
			EOS json.RawMessage `json:"eos_token_id"`
		}
		if json.Unmarshal(b, &gc) == nil {
			var one int
			var many []int
			if json.Unmarshal(gc.EOS, &one) == nil {
				return []int{one}
			}
			if json.Unmarshal(gc.EOS, &many) == nil {
				return many
			}
		}
	}
	if eos, ok := special["eos_token"].(string); ok {
		if id, ok := tok.TokenID(eos); ok {
			return []int{id}
		}
	}
	return nil
}

// BPE is the underlying tokenizer.
func (l *Local) BPE() *bpe.Tokenizer { return l.tok }

// StopIDs are the model's end-of-generation tokens.
func (l *Local) StopIDs() []int { return l.stops }

// Render applies the chat template and tokenises the text.
func (l *Local) Render(_ context.Context, msgs []trajectory.Message, tools []trajectory.Tool, opts RenderOptions) ([]int, error) {
	text, err := l.RenderText(msgs, tools, opts)
	if err != nil {
		return nil, err
	}
	return l.tok.Encode(text), nil
}

// Decode turns ids into text.
func (l *Local) Decode(_ context.Context, ids []int) (string, error) { return l.tok.Decode(ids), nil }

// RenderText applies the chat template (or the harmony format).
func (l *Local) RenderText(msgs []trajectory.Message, tools []trajectory.Tool, opts RenderOptions) (string, error) {
	if l.opts.ChatFormat == "harmony" {
		return l.renderHarmony(msgs, tools, opts)
	}
	vals := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		v, err := l.MessageValue(m)
		if err != nil {
			return "", fmt.Errorf("message %d: %w", i, err)
		}
		vals[i] = v
	}
	tv, err := ToolsValue(tools)
	if err != nil {
		return "", err
	}
	return l.RenderValues(vals, tv, opts)
}

// RenderValues applies the chat template to messages and tools already in
// template form, as Hugging Face's apply_chat_template passes them.
func (l *Local) RenderValues(msgs []jinja.Value, tools jinja.Value, opts RenderOptions) (string, error) {
	vars := make(map[string]jinja.Value, len(l.special)+len(opts.Kwargs)+3)
	for k, v := range l.special {
		vars[k] = v
	}
	for k, v := range opts.Kwargs {
		cv, err := jinja.FromGo(v)
		if err != nil {
			return "", fmt.Errorf("template kwarg %s: %w", k, err)
		}
		vars[k] = cv
	}
	vars["messages"] = msgs
	vars["tools"] = tools
	vars["add_generation_prompt"] = opts.AddGenerationPrompt
	if tools != nil && l.toolUse != nil {
		return l.toolUse.Render(vars) // transformers: tools given, a "tool_use" template exists
	}
	if l.tmpl == nil {
		return "", l.noDefault
	}
	return l.tmpl.Render(vars)
}

// MessageValue converts a message to the dict a template sees.
func (l *Local) MessageValue(m trajectory.Message) (jinja.Value, error) {
	d := jinja.NewMap()
	d.Set("role", m.Role)
	if m.Role == "assistant" && len(m.ToolCalls) > 0 && m.Content == "" && l.opts.NullContentWithToolCalls {
		d.Set("content", nil)
	} else {
		d.Set("content", m.Content)
	}
	if m.ReasoningContent != "" {
		d.Set("reasoning_content", m.ReasoningContent)
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			fn := jinja.NewMap()
			fn.Set("name", c.Function.Name)
			if l.opts.ArgumentsAsString {
				fn.Set("arguments", c.Function.Arguments)
			} else {
				args, err := jinja.FromJSON([]byte(orEmptyObject(c.Function.Arguments)))
				if err != nil {
					return nil, fmt.Errorf("tool call %d arguments: %w", i, err)
				}
				fn.Set("arguments", args)
			}
			call := jinja.NewMap()
			call.Set("id", c.ID)
			call.Set("type", "function")
			call.Set("function", fn)
			calls[i] = call
		}
		d.Set("tool_calls", calls)
	}
	if m.ToolCallID != "" {
		d.Set("tool_call_id", m.ToolCallID)
	}
	if m.Name != "" {
		d.Set("name", m.Name)
	}
	return d, nil
}

func orEmptyObject(s string) string {
	if strings.TrimSpace(s) == "" {
		return "{}"
	}
	return s
}

// ToolsValue converts tool definitions to template form; nil when there
// are none (Hugging Face passes tools=None).
func ToolsValue(tools []trajectory.Tool) (jinja.Value, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	// A domain offers the same tools to every rollout and every turn:
	// their schemas are parsed once. Templates cannot change the values
	// (only namespace() objects are mutable), so sharing them is safe.
	key := toolsKey(tools)
	if key != "" {
		toolsMu.RLock()
		v, ok := toolsCache[key]
		toolsMu.RUnlock()
		if ok {
			return v, nil
		}
	}
	v, err := toolsValue(tools)
	if err != nil || key == "" {
		return v, err
	}
	toolsMu.Lock()
	if len(toolsCache) >= 256 {
		clear(toolsCache)
	}
	toolsCache[key] = v
	toolsMu.Unlock()
	return v, nil
}

var (
	toolsMu    sync.RWMutex
	toolsCache = map[string]jinja.Value{}
)

// toolsKey is the tools' identity ("" when too large to be worth keeping).
func toolsKey(tools []trajectory.Tool) string {
	var b strings.Builder
	for _, t := range tools {
		for _, f := range []string{t.Type, t.Function.Name, t.Function.Description, string(t.Function.Parameters)} {
			b.WriteString(strconv.Itoa(len(f)))
			b.WriteByte(':')
			b.WriteString(f)
		}
		if b.Len() > 64<<10 {
			return ""
		}
	}
	return b.String()
}

func toolsValue(tools []trajectory.Tool) (jinja.Value, error) {
	out := make([]jinja.Value, len(tools))
	for i, t := range tools {
		fn := jinja.NewMap()
		fn.Set("name", t.Function.Name)
		fn.Set("description", t.Function.Description)
		if len(t.Function.Parameters) > 0 {
			p, err := jinja.FromJSON(t.Function.Parameters)
			if err != nil {
				return nil, fmt.Errorf("tool %s parameters: %w", t.Function.Name, err)
			}
			fn.Set("parameters", p)
		}
		d := jinja.NewMap()
		typ := t.Type
		if typ == "" {
			typ = "function"
		}
		d.Set("type", typ)
		d.Set("function", fn)
		out[i] = d
	}
	return out, nil
}
