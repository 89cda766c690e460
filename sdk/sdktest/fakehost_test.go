package sdktest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prorl/prorl/sdk"
	pb "github.com/prorl/prorl/sdk/proto"
)

// The fake host runs a command as the host's driver "none" does: in the
// sandbox's directory or the request's workdir inside it, with the
// request's variables and a TMPDIR of the sandbox's own.
func TestFakeHostExec(t *testing.T) {
	f := NewFakeHost(t)
	d, err := f.Dir("sb")
	if err != nil {
		t.Fatal(err)
	}
	tmp, _ := f.TempDir("sb")
	if err := os.Mkdir(filepath.Join(d, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		req  *pb.ExecRequest
		want string
	}{
		{"directory", &pb.ExecRequest{Command: "pwd", Session: true}, d},
		{"workdir", &pb.ExecRequest{Argv: []string{"pwd"}, Workdir: "/sub"}, filepath.Join(d, "sub")},
		{"env", &pb.ExecRequest{Argv: []string{"sh", "-c", "echo $GREETING"}, Env: map[string]string{"GREETING": "hi"}}, "hi"},
		{"TMPDIR", &pb.ExecRequest{Argv: []string{"sh", "-c", "echo $TMPDIR"}}, tmp},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.req.SandboxId = "sb"
			s := &ExecStream{}
			if err := f.Exec(c.req, s); err != nil || len(s.Chunks) != 1 {
				t.Fatalf("%v %v", err, s.Chunks)
			}
			if got := strings.TrimSpace(string(s.Chunks[0].Stdout)); got != c.want {
				t.Errorf("got %q, want %q (stderr %q)", got, c.want, s.Chunks[0].Stderr)
			}
		})
	}
}

// A test that ends as soon as it has started a harness leaves none of the
// harness's sockets in the temporary directory (go-plugin removes them
// only once its servers have stopped, after the test's cleanup returned).
func TestHarnessLeavesNoSockets(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	d := &sdk.Env[struct{}, struct{}, struct{}]{Name: "t", Version: "0",
		Episode: func(context.Context, *sdk.Rollout[struct{}, struct{}, struct{}]) (*sdk.Episode, error) {
			return &sdk.Episode{Messages: sdk.Chat("s", "u")}, nil
		},
		Score: func(context.Context, *sdk.Rollout[struct{}, struct{}, struct{}], sdk.EvaluateRequest) (*sdk.Score, error) {
			return &sdk.Score{}, nil
		}}
	for i := range 30 {
		t.Run(fmt.Sprint(i), func(t *testing.T) { Start(t, d) })
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in TMPDIR by 30 harnesses: %d entries, the first %s", len(left), left[0].Name())
	}
}
