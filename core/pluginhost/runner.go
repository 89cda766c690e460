package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"

	"github.com/hashicorp/go-plugin/runner"
)

// procRunner runs a plugin's process for go-plugin as go-plugin's own
// runner does (which is internal to it). go-plugin keeps a plugin's socket,
// and the host's end of its broker, in UnixSocketConfig.TempDir only when
// given a RunnerFunc; otherwise both go to the system's temporary
// directory, where a killed host left them.
type procRunner struct {
	cmd            *exec.Cmd
	stdout, stderr io.ReadCloser
}

var _ runner.Runner = (*procRunner)(nil)

func newProcRunner(cmd *exec.Cmd) (*procRunner, error) {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	return &procRunner{cmd: cmd, stdout: stdout, stderr: stderr}, nil
}

func (r *procRunner) Start(context.Context) error { return r.cmd.Start() }
func (r *procRunner) Wait(context.Context) error  { return r.cmd.Wait() }

func (r *procRunner) Kill(context.Context) error {
	if r.cmd.Process == nil {
		return nil
	}
	if err := r.cmd.Process.Kill(); !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

func (r *procRunner) Stdout() io.ReadCloser { return r.stdout }
func (r *procRunner) Stderr() io.ReadCloser { return r.stderr }
func (r *procRunner) Name() string          { return r.cmd.Path }

func (r *procRunner) ID() string {
	if r.cmd.Process == nil {
		return ""
	}
	return strconv.Itoa(r.cmd.Process.Pid)
}

func (r *procRunner) Diagnose(context.Context) string {
	return fmt.Sprintf("(the plugin %s did not complete go-plugin's handshake: a binary for another system, a missing library, or not a prorl plugin)", r.cmd.Path)
}

// The plugin runs on this machine: addresses are the same on both sides.
func (r *procRunner) PluginToHost(n, a string) (string, string, error) { return n, a, nil }
func (r *procRunner) HostToPlugin(n, a string) (string, string, error) { return n, a, nil }
