package sdktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pb "github.com/prorl/prorl/sdk/proto"
	"github.com/prorl/prorl/sdk/wire"
	"google.golang.org/grpc"
)

// FakeHost serves HostServices from one temporary directory per sandbox id.
// It is a test fake: commands run unisolated with bash in that directory,
// with the test's environment, the request's variables and, as the host's
// driver "none" gives them, a TMPDIR of the sandbox's own (TempDir); a
// request's workdir and file paths are inside that directory.
type FakeHost struct {
	pb.UnimplementedHostServicesServer
	root string
	mu   sync.Mutex
	// Execs records every command, for assertions.
	Execs []*pb.ExecRequest
}

// NewFakeHost makes a fake host rooted in a test temp dir.
func NewFakeHost(t testing.TB) *FakeHost { return &FakeHost{root: t.TempDir()} }

// Dir returns (and creates) the directory behind a sandbox id.
func (f *FakeHost) Dir(sandboxID string) (string, error) {
	if sandboxID == "" || strings.ContainsAny(sandboxID, "/\\") || sandboxID == ".." {
		return "", fmt.Errorf("bad sandbox id %q", sandboxID)
	}
	d := filepath.Join(f.root, sandboxID)
	return d, os.MkdirAll(d, 0o755)
}

// TempDir returns (and creates) a sandbox's TMPDIR: what its commands
// leave there, even killed, goes with the test's directory.
func (f *FakeHost) TempDir(sandboxID string) (string, error) {
	d, err := f.Dir(sandboxID)
	if err != nil {
		return "", err
	}
	tmp := filepath.Join(d, ".tmp")
	return tmp, os.MkdirAll(tmp, 0o700)
}

func (f *FakeHost) path(sandboxID, p string) (string, error) {
	d, err := f.Dir(sandboxID)
	if err != nil {
		return "", err
	}
	full := filepath.Join(d, filepath.Clean("/"+p))
	return full, nil
}

func (f *FakeHost) Exec(req *pb.ExecRequest, stream pb.HostServices_ExecServer) error {
	f.mu.Lock()
	f.Execs = append(f.Execs, req)
	f.mu.Unlock()
	if err := wire.CheckExec(req); err != nil {
		return stream.Send(&pb.ExecChunk{Error: err.Error()})
	}
	tmp, err := f.TempDir(req.SandboxId) // made with the sandbox's directory
	if err != nil {
		return stream.Send(&pb.ExecChunk{Error: err.Error()})
	}
	d := filepath.Dir(tmp)
	ctx := stream.Context()
	if req.TimeoutMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMs)*time.Millisecond)
		defer cancel()
	}
	argv := req.Argv
	if req.Session || len(argv) == 0 {
		argv = []string{"bash", "-c", req.Command}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = d
	if req.Workdir != "" {
		// As ReadFile's paths: inside the sandbox's directory.
		if cmd.Dir, err = f.path(req.SandboxId, req.Workdir); err != nil {
			return stream.Send(&pb.ExecChunk{Error: err.Error()})
		}
	}
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	for k, v := range req.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Stdin = bytes.NewReader(req.Stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	runErr := cmd.Run()
	chunk := &pb.ExecChunk{Stdout: out.Bytes(), Stderr: errb.Bytes(), Exited: true}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		chunk.TimedOut, chunk.ExitCode = true, -1
	case errors.As(runErr, &ee):
		chunk.ExitCode = int32(ee.ExitCode())
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			chunk.ExitCode = int32(128 + ws.Signal()) // as the host's sandboxes report it
		}
	case runErr != nil:
		chunk.Error = runErr.Error()
	}
	return stream.Send(chunk)
}

func (f *FakeHost) ReadFile(_ context.Context, req *pb.ReadFileRequest) (*pb.ReadFileResponse, error) {
	p, err := f.path(req.SandboxId, req.Path)
	if err != nil {
		return &pb.ReadFileResponse{Error: err.Error()}, nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return &pb.ReadFileResponse{Error: err.Error()}, nil
	}
	return &pb.ReadFileResponse{Data: b}, nil
}

func (f *FakeHost) WriteFile(_ context.Context, req *pb.WriteFileRequest) (*pb.WriteFileResponse, error) {
	p, err := f.path(req.SandboxId, req.Path)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(p), 0o755)
	}
	if err == nil {
		mode := os.FileMode(req.Mode)
		if mode == 0 {
			mode = 0o644
		}
		err = os.WriteFile(p, req.Data, mode)
	}
	if err != nil {
		return &pb.WriteFileResponse{Error: err.Error()}, nil
	}
	return &pb.WriteFileResponse{}, nil
}

func (f *FakeHost) ListDir(_ context.Context, req *pb.ListDirRequest) (*pb.ListDirResponse, error) {
	p, err := f.path(req.SandboxId, req.Path)
	if err != nil {
		return &pb.ListDirResponse{Error: err.Error()}, nil
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return &pb.ListDirResponse{Error: err.Error()}, nil
	}
	out := &pb.ListDirResponse{}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			continue
		}
		out.Entries = append(out.Entries, &pb.DirEntry{Name: e.Name(), Dir: e.IsDir(), Size: uint64(info.Size()), Mode: uint32(info.Mode())})
	}
	return out, nil
}

// ExecStream collects what a HostServices Exec sends, for tests that call
// an Exec server directly (the host's, or FakeHost).
type ExecStream struct {
	grpc.ServerStream
	Chunks []*pb.ExecChunk
}

func (s *ExecStream) Context() context.Context   { return context.Background() }
func (s *ExecStream) Send(c *pb.ExecChunk) error { s.Chunks = append(s.Chunks, c); return nil }
