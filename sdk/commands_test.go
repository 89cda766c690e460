package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
)

// TestCommands: a plugin binary's own subcommands run with the config the
// host hands over (sdk.ConfigEnv); usage lists them; a command's usage
// error exits 2.
func TestCommands(t *testing.T) {
	var got json.RawMessage
	d := &Env[struct{}, struct{}, struct{}]{Name: "x", Version: "1", Commands: []Command{{Name: "check", Usage: "--all",
		Run: func(_ context.Context, args []string, cfg json.RawMessage, _ io.Reader, stdout, _ io.Writer) error {
			got = cfg
			if len(args) == 0 {
				return UsageError("an argument is needed")
			}
			fmt.Fprint(stdout, strings.Join(args, ","))
			return nil
		}}}}
	t.Setenv(ConfigEnv, `{"k":1}`)
	var out, errb bytes.Buffer
	if code := runCommand(d, []string{"check", "a", "b"}, &out, &errb); code != 0 || out.String() != "a,b" || string(got) != `{"k":1}` {
		t.Fatalf("check: %d %q %q config %s", code, out.String(), errb.String(), got)
	}
	if code := runCommand(d, []string{"check"}, &out, &errb); code != 2 {
		t.Fatalf("usage error: %d", code)
	}
	errb.Reset()
	if code := runCommand(d, []string{"nope"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "check --all") {
		t.Fatalf("unknown: %d %s", code, errb.String())
	}
}
