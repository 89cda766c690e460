package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/prorl/prorl/sdk"
)

// MaxObservation is how many characters of output a tool shows the model.
const MaxObservation = 16000

// Truncate keeps the head and tail of long output and says what was cut.
func Truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	head, tail := max/2, max/2
	return s[:head] + fmt.Sprintf("\n[... %d characters truncated ...]\n", len(s)-head-tail) + s[len(s)-tail:]
}

func needSandbox(tc sdk.ToolContext) error {
	if tc.SandboxID == "" {
		return sdk.Errorf(sdk.CodeSandboxFailed, "this rollout has no sandbox: the domain must ask for one in Prepare")
	}
	return nil
}

// hostErr turns a host-service failure into a rollout failure: the sandbox,
// not the model, is at fault.
func hostErr(err error) error {
	if _, ok := err.(*sdk.Error); ok {
		return err
	}
	return sdk.Errorf(sdk.CodeSandboxFailed, "%v", err)
}

func render(res *sdk.ExecResult, timeout time.Duration) string {
	var b strings.Builder
	b.Write(res.Stdout)
	if len(res.Stderr) > 0 {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.Write(res.Stderr)
	}
	out := Truncate(b.String(), MaxObservation)
	if out != "" && !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	if res.Truncated {
		out += "[output beyond the sandbox's limit was dropped]\n"
	}
	if res.TimedOut {
		return out + fmt.Sprintf("[Command timed out after %s and was killed]", timeout)
	}
	return out + fmt.Sprintf("[Command finished with exit code %d]", res.ExitCode)
}

const defaultTimeout = 30 * time.Second

func timeoutOf(sec float64) time.Duration {
	if sec <= 0 {
		return defaultTimeout
	}
	return min(time.Duration(sec*float64(time.Second)), 10*time.Minute)
}

// Bash runs commands in the sandbox's persistent shell: the working
// directory and exported variables carry over from call to call.
func Bash() sdk.Tool {
	return sdk.FuncTool{
		S: sdk.ToolSpec{
			Name: "bash",
			Description: "Execute a bash command in the sandbox's persistent shell session. The working directory and environment persist between calls. " +
				"Long outputs are truncated. Commands that do not finish within the timeout are killed.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","description":"The bash command to run."},` +
				`"timeout":{"type":"number","description":"Seconds before the command is killed (default 30)."}},"required":["command"]}`),
		},
		F: func(ctx context.Context, tc sdk.ToolContext, args json.RawMessage) (sdk.ToolResult, error) {
			var a struct {
				Command string  `json:"command"`
				Timeout float64 `json:"timeout"`
			}
			if err := sdk.DecodeArgs(args, &a); err != nil {
				return sdk.ToolResult{}, err
			}
			if strings.TrimSpace(a.Command) == "" {
				return sdk.ToolResult{Output: "Error: empty command", IsError: true}, nil
			}
			if err := needSandbox(tc); err != nil {
				return sdk.ToolResult{}, err
			}
			t := timeoutOf(a.Timeout)
			res, err := tc.Sandboxes.Exec(ctx, tc.SandboxID, sdk.ExecRequest{Session: true, Command: a.Command, Timeout: uint32(t.Milliseconds())})
			if err != nil {
				return sdk.ToolResult{}, hostErr(err)
			}
			return sdk.ToolResult{Output: render(res, t), IsError: res.ExitCode != 0}, nil
		},
	}
}

// Python runs a program with the sandbox's python3 and returns its output.
func Python() sdk.Tool {
	return sdk.FuncTool{
		S: sdk.ToolSpec{
			Name:        "python",
			Description: "Run Python 3 code in the sandbox and return what it prints (stdout and stderr). Each call is a fresh interpreter; use print() to see values.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","description":"The Python program."},` +
				`"timeout":{"type":"number","description":"Seconds before the program is killed (default 30)."}},"required":["code"]}`),
		},
		F: func(ctx context.Context, tc sdk.ToolContext, args json.RawMessage) (sdk.ToolResult, error) {
			var a struct {
				Code    string  `json:"code"`
				Timeout float64 `json:"timeout"`
			}
			if err := sdk.DecodeArgs(args, &a); err != nil {
				return sdk.ToolResult{}, err
			}
			if err := needSandbox(tc); err != nil {
				return sdk.ToolResult{}, err
			}
			t := timeoutOf(a.Timeout)
			// The program arrives on stdin: no quoting, no temp file, any size.
			res, err := tc.Sandboxes.Exec(ctx, tc.SandboxID, sdk.ExecRequest{Argv: []string{"python3", "-"}, Stdin: []byte(a.Code), Timeout: uint32(t.Milliseconds())})
			if err != nil {
				return sdk.ToolResult{}, hostErr(err)
			}
			return sdk.ToolResult{Output: render(res, t), IsError: res.ExitCode != 0}, nil
		},
	}
}
