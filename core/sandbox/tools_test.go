package sandbox

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prorl/prorl/core/pluginhost"

	"github.com/prorl/prorl/sdk"
	pb "github.com/prorl/prorl/sdk/proto"
	"github.com/prorl/prorl/sdk/sdktest"
	"github.com/prorl/prorl/sdk/tools"
)

var update = flag.Bool("update", false, "rewrite golden files")

type toolDomain struct{ t []sdk.Tool }

func (d toolDomain) Info() sdk.Info {
	return sdk.Info{Name: "tools", Version: "0", Tools: d.t}
}
func (toolDomain) Configure(context.Context, json.RawMessage, sdk.Sandboxes) error { return nil }
func (toolDomain) Prepare(context.Context, sdk.PrepareRequest) (*sdk.Episode, error) {
	return &sdk.Episode{Messages: []sdk.Message{{Role: "user", Content: "x"}}, Sandbox: &sdk.SandboxSpec{}}, nil
}
func (toolDomain) Evaluate(context.Context, sdk.EvaluateRequest) (*sdk.Score, error) {
	return &sdk.Score{}, nil
}

// The standard tools, through the real plugin gRPC path and host services,
// in a real bubblewrap sandbox, against a golden transcript.
func TestStandardToolsGolden(t *testing.T) {
	m := newManager(t, "bwrap", workRoot(t))
	defer m.Close()
	all, err := tools.Standard("bash", "python", "str_replace_editor", "think", "finish")
	if err != nil {
		t.Fatal(err)
	}
	h := sdktest.StartWithHost(t, toolDomain{all}, pluginhost.HostServices(&PluginServices{M: m, DefaultTimeout: 10 * time.Second}))
	ctx := context.Background()
	if r, err := h.Configure(ctx, nil); err != nil || len(r.Diagnostics) > 0 {
		t.Fatal(err, r)
	}
	res := m.Reserve("golden", Spec{})
	defer res.Release()
	steps := []struct{ tool, args string }{
		{"bash", `{"command":"echo hello; pwd"}`},
		{"bash", `{"command":"mkdir -p /work/pkg && cd /work/pkg && export GREETING=hi"}`},
		{"bash", `{"command":"pwd; echo $GREETING"}`},
		{"bash", `{"command":"echo oops >&2; false"}`},
		{"bash", `{"command":"sleep 30","timeout":0.5}`},
		{"bash", `{"command":"pwd; echo still $GREETING"}`},
		{"bash", `{"command":"seq 1 5000"}`},
		{"bash", `{"command":""}`},
		{"bash", `{"cmd":"ls"}`},
		{"str_replace_editor", `{"command":"create","path":"/work/pkg/calc.py","file_text":"def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"}`},
		{"str_replace_editor", `{"command":"create","path":"/work/pkg/calc.py","file_text":"x"}`},
		{"str_replace_editor", `{"command":"view","path":"/work/pkg/calc.py"}`},
		{"str_replace_editor", `{"command":"view","path":"/work/pkg/calc.py","view_range":[4,5]}`},
		{"str_replace_editor", `{"command":"str_replace","path":"/work/pkg/calc.py","old_str":"return a - b","new_str":"return a + b"}`},
		{"str_replace_editor", `{"command":"str_replace","path":"/work/pkg/calc.py","old_str":"def add(a, b):\n    return a - b","new_str":"def add(a, b):\n    return a + b"}`},
		{"str_replace_editor", `{"command":"str_replace","path":"/work/pkg/calc.py","old_str":"no such text","new_str":"y"}`},
		{"str_replace_editor", `{"command":"insert","path":"/work/pkg/calc.py","insert_line":0,"new_str":"\"\"\"Arithmetic.\"\"\""}`},
		{"str_replace_editor", `{"command":"insert","path":"/work/pkg/calc.py","insert_line":99,"new_str":"x"}`},
		{"str_replace_editor", `{"command":"undo_edit","path":"/work/pkg/calc.py"}`},
		{"str_replace_editor", `{"command":"view","path":"/work/pkg"}`},
		{"str_replace_editor", `{"command":"view","path":"/work/pkg/missing.py"}`},
		{"str_replace_editor", `{"command":"view","path":"pkg/calc.py"}`},
		{"str_replace_editor", `{"command":"delete","path":"/work/pkg/calc.py"}`},
		{"python", `{"code":"import sys\nsys.path.insert(0, '/work/pkg')\nfrom calc import add\nprint(add(40, 2))"}`},
		{"python", `{"code":"print(1/0)"}`},
		{"python", `{"code":"while True: pass","timeout":0.5}`},
		{"think", `{"thought":"the tests pass"}`},
		{"finish", `{"message":"done"}`},
	}
	var b strings.Builder
	for i, st := range steps {
		r, err := h.Client.CallTool(ctx, &pb.CallToolRequest{RolloutId: "golden", SandboxId: res.ID, Call: &pb.ToolCall{Name: st.tool, ArgumentsJson: []byte(st.args)}})
		if err != nil || len(r.Diagnostics) > 0 {
			t.Fatalf("step %d: %v %v", i, err, r.GetDiagnostics())
		}
		fmt.Fprintf(&b, "### %d %s %s\n--- is_error=%v done=%v final=%q\n%s\n\n", i, st.tool, st.args, r.IsError, r.Done, r.FinalResponse, r.Output)
	}
	got := b.String()
	p := filepath.Join("testdata", "tools_transcript.golden")
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if string(want) != got {
		t.Errorf("transcript differs from %s (go test -update if intended):\n%s", p, got)
	}
	// Without a sandbox the tools fail the rollout, not the model.
	r, err := h.Client.CallTool(ctx, &pb.CallToolRequest{RolloutId: "x", Call: &pb.ToolCall{Name: "bash", ArgumentsJson: []byte(`{"command":"ls"}`)}})
	if err != nil || len(r.Diagnostics) == 0 || r.Diagnostics[0].Code != sdk.CodeSandboxFailed {
		t.Fatalf("bash without a sandbox: %v %v", err, r)
	}
}

// A session's command runs in the session's shell: fields that cannot
// apply to it are refused, not dropped.
func TestExecSessionFields(t *testing.T) {
	m := newManager(t, "none", workRoot(t))
	defer m.Close()
	s, err := m.Start(context.Background(), "r", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	h := pluginhost.HostServices(&PluginServices{M: m, DefaultTimeout: 10 * time.Second})
	for _, c := range []struct {
		req  *pb.ExecRequest
		want string // in the error; "" for none
	}{
		{&pb.ExecRequest{Session: true, Command: "echo ok"}, ""},
		{&pb.ExecRequest{Session: true, Command: "echo $X", Env: map[string]string{"X": "1"}}, "env does not apply"},
		{&pb.ExecRequest{Session: true, Command: "pwd", Workdir: "/"}, "workdir does not apply"},
		{&pb.ExecRequest{Session: true, Command: "cat", Stdin: []byte("x")}, "stdin does not apply"},
		{&pb.ExecRequest{Session: true, Argv: []string{"true"}}, "argv does not apply"},
		{&pb.ExecRequest{Argv: []string{"sh", "-c", "echo $X"}, Env: map[string]string{"X": "1"}}, ""},
	} {
		c.req.SandboxId = s.ID
		st := &sdktest.ExecStream{}
		if err := h.Exec(c.req, st); err != nil || len(st.Chunks) == 0 {
			t.Fatalf("%+v: %v %v", c.req, err, st.Chunks)
		}
		last := st.Chunks[len(st.Chunks)-1]
		if c.want == "" && (last.Error != "" || !last.Exited || last.ExitCode != 0) || c.want != "" && !strings.Contains(last.Error, c.want) {
			t.Errorf("%+v: %+v, want error %q", c.req, last, c.want)
		}
	}
}
