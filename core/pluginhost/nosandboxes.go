package pluginhost

import (
	"context"
	"fmt"

	pb "github.com/prorl/prorl/sdk/proto"
)

// NoSandboxes serves HostServices for a host with no sandbox driver: every
// call names the problem instead of pretending to run anything.
type NoSandboxes struct {
	pb.UnimplementedHostServicesServer
}

func noDriver(id string) string {
	return fmt.Sprintf("sandbox %q: this host has no sandbox driver configured", id)
}

func (NoSandboxes) Exec(req *pb.ExecRequest, s pb.HostServices_ExecServer) error {
	return s.Send(&pb.ExecChunk{Error: noDriver(req.SandboxId)})
}

func (NoSandboxes) ReadFile(_ context.Context, req *pb.ReadFileRequest) (*pb.ReadFileResponse, error) {
	return &pb.ReadFileResponse{Error: noDriver(req.SandboxId)}, nil
}

func (NoSandboxes) WriteFile(_ context.Context, req *pb.WriteFileRequest) (*pb.WriteFileResponse, error) {
	return &pb.WriteFileResponse{Error: noDriver(req.SandboxId)}, nil
}

func (NoSandboxes) ListDir(_ context.Context, req *pb.ListDirRequest) (*pb.ListDirResponse, error) {
	return &pb.ListDirResponse{Error: noDriver(req.SandboxId)}, nil
}
