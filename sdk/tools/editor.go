package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/prorl/prorl/sdk"
)

// maxUndo bounds the undo history kept per file.
const maxUndo = 10

// Editor is str_replace_editor, the file tool of OpenHands and the ProRL
// server: view, create, str_replace, insert, undo_edit.
type Editor struct {
	mu      sync.Mutex
	history map[string]map[string][]string // rollout -> path -> previous contents
}

// StrReplaceEditor returns the editor tool.
func StrReplaceEditor() *Editor { return &Editor{history: map[string]map[string][]string{}} }

// Spec implements sdk.Tool.
func (e *Editor) Spec() sdk.ToolSpec {
	return sdk.ToolSpec{
		Name: "str_replace_editor",
		Description: "View, create and edit files. `view` shows a file with line numbers (or lists a directory); `create` writes a new file; " +
			"`str_replace` replaces old_str, which must occur exactly once, with new_str; `insert` adds new_str after line insert_line; " +
			"`undo_edit` reverts the last edit of a file. Paths must be absolute.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"command":{"type":"string","enum":["view","create","str_replace","insert","undo_edit"]},` +
			`"path":{"type":"string","description":"Absolute path of a file or directory."},` +
			`"file_text":{"type":"string","description":"Content for create."},` +
			`"old_str":{"type":"string","description":"Exact text to replace (str_replace)."},` +
			`"new_str":{"type":"string","description":"Replacement (str_replace) or text to insert (insert)."},` +
			`"insert_line":{"type":"integer","description":"Insert after this line; 0 inserts at the top."},` +
			`"view_range":{"type":"array","items":{"type":"integer"},"description":"[start, end] lines to view; end -1 means to the end."}` +
			`},"required":["command","path"]}`),
	}
}

// Release forgets a rollout's undo history.
func (e *Editor) Release(rolloutID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.history, rolloutID)
}

func (e *Editor) push(rollout, p, content string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.history[rollout]
	if h == nil {
		h = map[string][]string{}
		e.history[rollout] = h
	}
	h[p] = append(h[p], content)
	if len(h[p]) > maxUndo {
		h[p] = h[p][1:]
	}
}

func (e *Editor) pop(rollout, p string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.history[rollout][p]
	if len(st) == 0 {
		return "", false
	}
	prev := st[len(st)-1]
	e.history[rollout][p] = st[:len(st)-1]
	return prev, true
}

type editorArgs struct {
	Command    string  `json:"command"`
	Path       string  `json:"path"`
	FileText   *string `json:"file_text"`
	OldStr     *string `json:"old_str"`
	NewStr     *string `json:"new_str"`
	InsertLine *int    `json:"insert_line"`
	ViewRange  []int   `json:"view_range"`
}

func fail(format string, args ...any) (sdk.ToolResult, error) {
	return sdk.ToolResult{Output: "Error: " + fmt.Sprintf(format, args...), IsError: true}, nil
}

// splitLines splits a file into lines; a final newline ends the last line
// rather than starting an empty one.
func splitLines(content string) (lines []string, finalNewline bool) {
	if content == "" {
		return []string{}, false
	}
	finalNewline = strings.HasSuffix(content, "\n")
	return strings.Split(strings.TrimSuffix(content, "\n"), "\n"), finalNewline
}

func joinLines(lines []string, finalNewline bool) string {
	s := strings.Join(lines, "\n")
	if finalNewline {
		s += "\n"
	}
	return s
}

// numbered renders lines like `cat -n`, starting at line number first.
func numbered(lines []string, first int) string {
	var b strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&b, "%6d\t%s\n", first+i, l)
	}
	return b.String()
}

// Call implements sdk.Tool.
func (e *Editor) Call(ctx context.Context, tc sdk.ToolContext, raw json.RawMessage) (sdk.ToolResult, error) {
	var a editorArgs
	if err := sdk.DecodeArgs(raw, &a); err != nil {
		return sdk.ToolResult{}, err
	}
	if !strings.HasPrefix(a.Path, "/") {
		return fail("The path %q is not an absolute path, it should start with `/`.", a.Path)
	}
	p := path.Clean(a.Path)
	if err := needSandbox(tc); err != nil {
		return sdk.ToolResult{}, err
	}
	read := func() (string, bool, error) {
		ents, err := tc.Sandboxes.ListDir(ctx, tc.SandboxID, p)
		if err == nil {
			_ = ents
			return "", true, nil
		}
		b, err := tc.Sandboxes.ReadFile(ctx, tc.SandboxID, p)
		if err != nil {
			return "", false, err
		}
		return string(b), false, nil
	}
	write := func(content string) error {
		if err := tc.Sandboxes.WriteFile(ctx, tc.SandboxID, p, []byte(content), 0o644); err != nil {
			return hostErr(err)
		}
		return nil
	}
	switch a.Command {
	case "view":
		content, isDir, err := read()
		if err != nil {
			return fail("The path %s does not exist. Please provide a valid path.", p)
		}
		if isDir {
			return e.viewDir(ctx, tc, p)
		}
		lines, _ := splitLines(content)
		first, last := 1, len(lines)
		if len(a.ViewRange) > 0 {
			if len(a.ViewRange) != 2 {
				return fail("view_range must be [start, end]")
			}
			first, last = a.ViewRange[0], a.ViewRange[1]
			if last == -1 {
				last = len(lines)
			}
			if first < 1 || first > max(len(lines), 1) || last < first || last > len(lines) {
				return fail("Invalid view_range %v: the file has %d lines; start must be in [1, %d] and end in [start, %d] or -1.", a.ViewRange, len(lines), len(lines), len(lines))
			}
		}
		out := fmt.Sprintf("Here's the result of running `cat -n` on %s:\n", p) + numbered(lines[max(first, 1)-1:last], first)
		return sdk.ToolResult{Output: Truncate(out, MaxObservation)}, nil
	case "create":
		if a.FileText == nil {
			return fail("Parameter `file_text` is required for command: create.")
		}
		if _, _, err := read(); err == nil {
			return fail("File already exists at: %s. Cannot overwrite files using command `create`.", p)
		}
		if err := write(*a.FileText); err != nil {
			return sdk.ToolResult{}, err
		}
		e.push(tc.RolloutID, p, "\x00absent")
		return sdk.ToolResult{Output: "File created successfully at: " + p}, nil
	case "str_replace":
		if a.OldStr == nil {
			return fail("Parameter `old_str` is required for command: str_replace.")
		}
		content, isDir, err := read()
		if err != nil || isDir {
			return fail("The path %s does not exist or is a directory. Please provide a valid path.", p)
		}
		old, repl := *a.OldStr, ""
		if a.NewStr != nil {
			repl = *a.NewStr
		}
		if old == "" {
			return fail("Parameter `old_str` must not be empty.")
		}
		n := strings.Count(content, old)
		if n == 0 {
			return fail("No replacement was performed, old_str `%s` did not appear verbatim in %s.", old, p)
		}
		if n > 1 {
			var at []int
			for i, off := 0, 0; i < n; i++ {
				j := strings.Index(content[off:], old)
				at = append(at, strings.Count(content[:off+j], "\n")+1)
				off += j + len(old)
			}
			return fail("No replacement was performed. Multiple occurrences of old_str `%s` in lines %v. Please ensure it is unique.", old, at)
		}
		updated := strings.Replace(content, old, repl, 1)
		if err := write(updated); err != nil {
			return sdk.ToolResult{}, err
		}
		e.push(tc.RolloutID, p, content)
		line := strings.Count(content[:strings.Index(content, old)], "\n")
		return sdk.ToolResult{Output: fmt.Sprintf("The file %s has been edited. ", p) + snippet(updated, line, strings.Count(repl, "\n"), p)}, nil
	case "insert":
		if a.InsertLine == nil || a.NewStr == nil {
			return fail("Parameters `insert_line` and `new_str` are required for command: insert.")
		}
		content, isDir, err := read()
		if err != nil || isDir {
			return fail("The path %s does not exist or is a directory. Please provide a valid path.", p)
		}
		lines, nl := splitLines(content)
		at := *a.InsertLine
		if at < 0 || at > len(lines) {
			return fail("Invalid `insert_line` parameter: %d. It should be within the range of lines of the file: [0, %d]", at, len(lines))
		}
		ins := strings.Split(strings.TrimSuffix(*a.NewStr, "\n"), "\n")
		out := append(append(append([]string{}, lines[:at]...), ins...), lines[at:]...)
		updated := joinLines(out, nl || len(lines) == 0)
		if err := write(updated); err != nil {
			return sdk.ToolResult{}, err
		}
		e.push(tc.RolloutID, p, content)
		return sdk.ToolResult{Output: fmt.Sprintf("The file %s has been edited. ", p) + snippet(updated, at, len(ins)-1, p)}, nil
	case "undo_edit":
		prev, ok := e.pop(tc.RolloutID, p)
		if !ok {
			return fail("No edit history found for %s.", p)
		}
		if prev == "\x00absent" {
			if _, err := tc.Sandboxes.Exec(ctx, tc.SandboxID, sdk.ExecRequest{Argv: []string{"rm", "-f", "--", p}}); err != nil {
				return sdk.ToolResult{}, hostErr(err)
			}
			return sdk.ToolResult{Output: fmt.Sprintf("Last edit to %s undone: the file was removed.", p)}, nil
		}
		if err := write(prev); err != nil {
			return sdk.ToolResult{}, err
		}
		return sdk.ToolResult{Output: fmt.Sprintf("Last edit to %s undone successfully. ", p) + snippet(prev, 0, strings.Count(prev, "\n"), p)}, nil
	}
	return fail("Unknown command %q: use view, create, str_replace, insert or undo_edit.", a.Command)
}

// snippet shows the edited region with four lines of context.
func snippet(content string, line, added int, p string) string {
	lines, _ := splitLines(content)
	start := max(0, line-4)
	end := min(len(lines), line+added+5)
	return fmt.Sprintf("Here's the result of running `cat -n` on a snippet of %s:\n", p) + numbered(lines[start:end], start+1) +
		"Review the changes and make sure they are as expected. Edit the file again if necessary."
}

func (e *Editor) viewDir(ctx context.Context, tc sdk.ToolContext, p string) (sdk.ToolResult, error) {
	var lines []string
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		ents, err := tc.Sandboxes.ListDir(ctx, tc.SandboxID, dir)
		if err != nil {
			return err
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
		for _, en := range ents {
			if strings.HasPrefix(en.Name, ".") {
				continue
			}
			child := path.Join(dir, en.Name)
			if en.Dir {
				lines = append(lines, child+"/")
				if depth < 2 {
					if err := walk(child, depth+1); err != nil {
						return err
					}
				}
			} else {
				lines = append(lines, child)
			}
		}
		return nil
	}
	if err := walk(p, 1); err != nil {
		return sdk.ToolResult{}, hostErr(err)
	}
	out := fmt.Sprintf("Here are the files and directories up to 2 levels deep in %s, excluding hidden items:\n%s\n%s", p, p+"/", strings.Join(lines, "\n"))
	return sdk.ToolResult{Output: Truncate(out, MaxObservation)}, nil
}
