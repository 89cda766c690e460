package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	pb "github.com/prorl/prorl/sdk/proto"
)

// ExecRequest runs a command in a sandbox. With Session set, Command runs in
// the sandbox's persistent shell, in its current directory and environment
// (Argv, Stdin, Workdir and Env are refused there); otherwise Argv runs as a
// new process (Command under bash -c if Argv is empty).
type ExecRequest struct {
	Argv    []string
	Session bool
	Command string
	Timeout uint32 // milliseconds; 0 takes the host default
	Stdin   []byte
	Workdir string
	Env     map[string]string
}

// ExecResult is a finished command.
type ExecResult struct {
	Stdout    []byte
	Stderr    []byte
	ExitCode  int
	TimedOut  bool
	Truncated bool
}

// DirEntry is one entry of ListDir.
type DirEntry struct {
	Name string
	Dir  bool
	Size uint64
	Mode os.FileMode
}

// Sandboxes are the host's sandbox services as a plugin sees them: commands
// and files in a rollout's sandbox (the plugin protocol's HostServices).
type Sandboxes interface {
	Exec(ctx context.Context, sandboxID string, req ExecRequest) (*ExecResult, error)
	ReadFile(ctx context.Context, sandboxID, path string) ([]byte, error)
	WriteFile(ctx context.Context, sandboxID, path string, data []byte, mode os.FileMode) error
	ListDir(ctx context.Context, sandboxID, path string) ([]DirEntry, error)
}

// ErrNoSandboxes is returned by host services when the host offered none.
var ErrNoSandboxes = errors.New("the host offers no sandbox services")

type noSandboxes struct{}

func (noSandboxes) Exec(context.Context, string, ExecRequest) (*ExecResult, error) {
	return nil, ErrNoSandboxes
}
func (noSandboxes) ReadFile(context.Context, string, string) ([]byte, error) {
	return nil, ErrNoSandboxes
}
func (noSandboxes) WriteFile(context.Context, string, string, []byte, os.FileMode) error {
	return ErrNoSandboxes
}
func (noSandboxes) ListDir(context.Context, string, string) ([]DirEntry, error) {
	return nil, ErrNoSandboxes
}

// sandboxClient is Sandboxes over the HostServices gRPC service.
type sandboxClient struct{ c pb.HostServicesClient }

func (h sandboxClient) Exec(ctx context.Context, sandboxID string, req ExecRequest) (*ExecResult, error) {
	stream, err := h.c.Exec(ctx, &pb.ExecRequest{
		SandboxId: sandboxID, Argv: req.Argv, Session: req.Session, Command: req.Command,
		TimeoutMs: req.Timeout, Stdin: req.Stdin, Workdir: req.Workdir, Env: req.Env,
	})
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	res := &ExecResult{}
	for {
		ch, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return res, nil
		}
		if err != nil {
			return nil, fmt.Errorf("exec: %w", err)
		}
		res.Stdout = append(res.Stdout, ch.Stdout...)
		res.Stderr = append(res.Stderr, ch.Stderr...)
		if ch.Error != "" {
			return nil, Errorf(CodeSandboxFailed, "%s", ch.Error)
		}
		if ch.Exited {
			res.ExitCode = int(ch.ExitCode)
			res.TimedOut = ch.TimedOut
			res.Truncated = ch.Truncated
		}
	}
}

func (h sandboxClient) ReadFile(ctx context.Context, sandboxID, path string) ([]byte, error) {
	r, err := h.c.ReadFile(ctx, &pb.ReadFileRequest{SandboxId: sandboxID, Path: path})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if r.Error != "" {
		return nil, fmt.Errorf("read %s: %s", path, r.Error)
	}
	return r.Data, nil
}

func (h sandboxClient) WriteFile(ctx context.Context, sandboxID, path string, data []byte, mode os.FileMode) error {
	r, err := h.c.WriteFile(ctx, &pb.WriteFileRequest{SandboxId: sandboxID, Path: path, Data: data, Mode: uint32(mode)})
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if r.Error != "" {
		return fmt.Errorf("write %s: %s", path, r.Error)
	}
	return nil
}

func (h sandboxClient) ListDir(ctx context.Context, sandboxID, path string) ([]DirEntry, error) {
	r, err := h.c.ListDir(ctx, &pb.ListDirRequest{SandboxId: sandboxID, Path: path})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", path, err)
	}
	if r.Error != "" {
		return nil, fmt.Errorf("list %s: %s", path, r.Error)
	}
	out := make([]DirEntry, 0, len(r.Entries))
	for _, e := range r.Entries {
		out = append(out, DirEntry{Name: e.Name, Dir: e.Dir, Size: e.Size, Mode: os.FileMode(e.Mode)})
	}
	return out, nil
}
