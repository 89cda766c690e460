// Package jinja renders Jinja2 chat templates (the chat_template of
// Hugging Face tokenizers) in Go. It implements the language subset that
// chat templates use, with Hugging Face's environment (trim_blocks,
// lstrip_blocks, loop controls) and Python's semantics for values: output
// of None/True, string methods, slicing, tojson like json.dumps.
package jinja

import (
	"fmt"
	"regexp"
	"strings"
)

type tokKind uint8

const (
	tText tokKind = iota
	tOutput
	tBlock
)

// segment is a piece of template source: literal text, or the inside of
// a {{ }} or {% %} tag.
type segment struct {
	kind tokKind
	text string
	line int
}

var (
	lstripRe     = regexp.MustCompile(`(?m)^[ \t]*({[#%-])`)
	trimRe       = regexp.MustCompile(`([#%-]})\n`)
	generationRe = regexp.MustCompile(`(?s)(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)`)
)

// preprocess applies Hugging Face's environment the way its reference
// renderers do: the final newline dropped (keep_trailing_newline=False),
// lstrip_blocks, trim_blocks, and {% generation %} markers removed.
func preprocess(src string) string {
	src = strings.TrimSuffix(src, "\n")
	src = lstripRe.ReplaceAllString(src, "$1")
	src = trimRe.ReplaceAllString(src, "$1")
	return generationRe.ReplaceAllStringFunc(src, func(m string) string {
		g := generationRe.FindStringSubmatch(m)
		out := ""
		if g[2] == "" {
			out += g[1]
		}
		if g[3] == "" {
			out += g[4]
		}
		return out
	})
}

// split cuts the source into text and tags, applying the '-' whitespace
// control markers and dropping comments.
func split(src string) ([]segment, error) {
	src = preprocess(src)
	var segs []segment
	line := 1
	stripNext := false
	for len(src) > 0 {
		i := indexTagStart(src)
		if i < 0 {
			segs = appendText(segs, src, stripNext, line)
			break
		}
		text := src[:i]
		open := src[i : i+2]
		rest := src[i+2:]
		stripPrev := strings.HasPrefix(rest, "-")
		if stripPrev {
			rest = rest[1:]
			text = strings.TrimRight(text, " \t\n\r\v\f")
		}
		segs = appendText(segs, text, stripNext, line)
		line += strings.Count(src[:i], "\n")
		var close string
		switch open {
		case "{{":
			close = "}}"
		case "{%":
			close = "%}"
		default:
			close = "#}"
		}
		end := findClose(rest, close, open == "{{")
		if end < 0 {
			return nil, fmt.Errorf("line %d: unclosed %s", line, open)
		}
		body := rest[:end]
		stripNext = strings.HasSuffix(body, "-")
		if stripNext {
			body = body[:len(body)-1]
		}
		switch open {
		case "{{":
			segs = append(segs, segment{kind: tOutput, text: body, line: line})
		case "{%":
			segs = append(segs, segment{kind: tBlock, text: body, line: line})
		}
		consumed := len(src) - len(rest) + end + 2
		line += strings.Count(src[i:consumed], "\n")
		src = src[consumed:]
	}
	return segs, nil
}

func appendText(segs []segment, text string, stripLeft bool, line int) []segment {
	if stripLeft {
		text = strings.TrimLeft(text, " \t\n\r\v\f")
	}
	if text == "" {
		return segs
	}
	return append(segs, segment{kind: tText, text: text, line: line})
}

func indexTagStart(s string) int {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '{' && (s[i+1] == '{' || s[i+1] == '%' || s[i+1] == '#') {
			return i
		}
	}
	return -1
}

// findClose finds the closing delimiter outside string literals (and, for
// output tags, outside nested braces of dict literals).
func findClose(s, close string, output bool) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if close != "#}" && (c == '"' || c == '\'') {
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			i = j
			continue
		}
		if output {
			if c == '{' {
				depth++
			} else if c == '}' && depth > 0 {
				depth--
				continue
			}
		}
		if depth == 0 && strings.HasPrefix(s[i:], close) {
			return i
		}
	}
	return -1
}

// Expression tokens.
type exprTok struct {
	kind string // "name", "str", "int", "float", "op", "eof"
	s    string
}

func lexExpr(src string) ([]exprTok, error) {
	var toks []exprTok
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			toks = append(toks, exprTok{"name", src[i:j]})
			i = j
		case c >= '0' && c <= '9':
			j := i
			float := false
			for j < len(src) && (src[j] >= '0' && src[j] <= '9' || src[j] == '_' || src[j] == '.' && !float && j+1 < len(src) && src[j+1] >= '0' && src[j+1] <= '9') {
				if src[j] == '.' {
					float = true
				}
				j++
			}
			if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
				k := j + 1
				if k < len(src) && (src[k] == '+' || src[k] == '-') {
					k++
				}
				if k < len(src) && src[k] >= '0' && src[k] <= '9' {
					for k < len(src) && src[k] >= '0' && src[k] <= '9' {
						k++
					}
					j, float = k, true
				}
			}
			kind := "int"
			if float {
				kind = "float"
			}
			toks = append(toks, exprTok{kind, strings.ReplaceAll(src[i:j], "_", "")})
			i = j
		case c == '"' || c == '\'':
			s, n, err := unquote(src[i:])
			if err != nil {
				return nil, err
			}
			toks = append(toks, exprTok{"str", s})
			i += n
		default:
			op := ""
			for _, cand := range []string{"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|"} {
				if strings.HasPrefix(src[i:], cand) {
					op = cand
					break
				}
			}
			if op == "" {
				return nil, fmt.Errorf("unexpected character %q", c)
			}
			toks = append(toks, exprTok{"op", op})
			i += len(op)
		}
	}
	return append(toks, exprTok{kind: "eof"}), nil
}

// unquote reads a string literal with Python's escapes; it returns the
// value and the number of source bytes consumed.
func unquote(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		if c == q {
			return b.String(), i + 1, nil
		}
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case '\\', '\'', '"':
			b.WriteByte(s[i])
		case 'u', 'x':
			n := 4
			if s[i] == 'x' {
				n = 2
			}
			if i+n >= len(s) {
				return "", 0, fmt.Errorf("bad escape in string literal")
			}
			var r rune
			if _, err := fmt.Sscanf(s[i+1:i+1+n], "%x", &r); err != nil {
				return "", 0, fmt.Errorf("bad escape in string literal: %w", err)
			}
			b.WriteRune(r)
			i += n
		case '\n':
		default:
			b.WriteByte('\\')
			b.WriteByte(s[i])
		}
	}
	return "", 0, fmt.Errorf("unterminated string literal")
}
