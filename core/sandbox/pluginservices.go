package sandbox

import (
	"context"
	"time"

	"github.com/prorl/prorl/core/pluginhost"
)

// PluginServices is the sandbox manager as plugins reach it through the
// host services (pluginhost.Sandboxes).
type PluginServices struct {
	M *Manager
	// DefaultTimeout bounds a command that names none.
	DefaultTimeout time.Duration
}

var _ pluginhost.Sandboxes = (*PluginServices)(nil)

// Exec runs a command, streaming its output (a session's command answers
// its output at once).
func (h *PluginServices) Exec(ctx context.Context, req pluginhost.ExecRequest, out func(stdout, stderr []byte)) (pluginhost.ExecResult, error) {
	s, err := h.M.Lookup(ctx, req.SandboxID)
	if err != nil {
		return pluginhost.ExecResult{}, err
	}
	timeout := req.Timeout
	if timeout == 0 {
		timeout = h.DefaultTimeout
	}
	var res *ExecResult
	if req.Session {
		res, err = s.Session(ctx, req.Command, timeout)
		if err == nil {
			out(res.Stdout, res.Stderr)
		}
	} else {
		argv := req.Argv
		if len(argv) == 0 {
			argv = []string{"bash", "-c", req.Command}
		}
		res, err = s.Exec(ctx, argv, req.Stdin, timeout, req.Workdir, req.Env, out)
	}
	if err != nil {
		return pluginhost.ExecResult{}, err
	}
	return pluginhost.ExecResult{ExitCode: res.ExitCode, TimedOut: res.TimedOut, Truncated: res.Truncated}, nil
}

// ReadFile reads a file in the sandbox.
func (h *PluginServices) ReadFile(ctx context.Context, id, path string, maxBytes uint64) ([]byte, bool, error) {
	s, err := h.M.Lookup(ctx, id)
	if err != nil {
		return nil, false, err
	}
	return s.ReadFile(ctx, path, maxBytes)
}

// WriteFile writes a file in the sandbox.
func (h *PluginServices) WriteFile(ctx context.Context, id, path string, data []byte, mode uint32) error {
	s, err := h.M.Lookup(ctx, id)
	if err != nil {
		return err
	}
	return s.WriteFile(ctx, path, data, mode)
}

// ListDir lists a directory in the sandbox.
func (h *PluginServices) ListDir(ctx context.Context, id, path string) ([]pluginhost.DirEntry, error) {
	s, err := h.M.Lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	ents, err := s.ListDir(ctx, path)
	if err != nil {
		return nil, err
	}
	out := make([]pluginhost.DirEntry, 0, len(ents))
	for _, e := range ents {
		out = append(out, pluginhost.DirEntry{Name: e.Name, Dir: e.Dir, Size: e.Size, Mode: e.Mode})
	}
	return out, nil
}
