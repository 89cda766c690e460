package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	pb "github.com/prorl/prorl/sdk/proto"
	"google.golang.org/grpc"
)

// MaxMessageBytes bounds every gRPC message between host and plugin; the
// gRPC default of 4 MiB is too small for long trajectories and file reads.
const MaxMessageBytes = 64 << 20

// PluginName is the single plugin kind a prorl plugin binary serves.
const PluginName = "domain"

// Handshake is shared by host and plugins; the cookie only keeps a plugin
// binary from being run by hand by mistake, it is not security.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  APIVersion,
	MagicCookieKey:   "PRORL_PLUGIN",
	MagicCookieValue: "9c1f0e6a-task-domain",
}

// GRPCServerOptions are the server options both sides use.
func GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes)}
}

func callOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes))}
}

// DialOptions are the client options the host uses towards plugins.
func DialOptions() []grpc.DialOption { return callOptions() }

// RemoteDomain is the host's handle on a plugin process.
type RemoteDomain struct {
	Client pb.TaskDomainClient
	// HostBrokerID is where the host serves HostServices to this plugin; 0 if none.
	HostBrokerID uint32
}

// DomainPlugin is the go-plugin glue for both sides: Impl on the plugin
// side, HostServices on the host side.
type DomainPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl         Domain
	HostServices pb.HostServicesServer
	Logger       hclog.Logger
}

// GRPCServer registers the domain (plugin side).
func (p *DomainPlugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	log := p.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	pb.RegisterTaskDomainServer(s, newServer(p.Impl, broker, log))
	return nil
}

// GRPCClient returns a RemoteDomain and starts serving host services once
// over the broker (host side).
func (p *DomainPlugin) GRPCClient(_ context.Context, broker *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	rd := &RemoteDomain{Client: pb.NewTaskDomainClient(c)}
	if p.HostServices != nil {
		rd.HostBrokerID = broker.NextId()
		go broker.AcceptAndServe(rd.HostBrokerID, func(opts []grpc.ServerOption) *grpc.Server {
			s := grpc.NewServer(append(opts, GRPCServerOptions()...)...)
			pb.RegisterHostServicesServer(s, p.HostServices)
			return s
		})
	}
	return rd, nil
}

// PluginSets returns the versioned plugin sets; the host passes its
// HostServices implementation, a plugin passes its Domain.
func PluginSets(d Domain, hs pb.HostServicesServer, log hclog.Logger) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		APIVersion: {PluginName: &DomainPlugin{Impl: d, HostServices: hs, Logger: log}},
	}
}

// Describe is the JSON the describe subcommand prints.
type Describe struct {
	Info
	APIVersions []int      `json:"api_versions"`
	Tools       []ToolSpec `json:"tools"`
}

// DescribeOf builds the describe document of a domain.
func DescribeOf(d Domain) Describe {
	in := d.Info()
	out := Describe{Info: in, APIVersions: []int{APIVersion}}
	for _, t := range in.Tools {
		out.Tools = append(out.Tools, t.Spec())
	}
	return out
}

// Serve runs the plugin. With the argument "describe" it prints the domain's
// info as JSON and exits instead, so admins and CI can inspect a binary.
func Serve(d Domain) {
	if len(os.Args) > 1 {
		os.Exit(runCommand(d, os.Args[1:], os.Stdout, os.Stderr))
	}
	log := hclog.New(&hclog.LoggerOptions{
		Name: d.Info().Name, Output: os.Stderr, JSONFormat: true, Level: hclog.LevelFromString(envOr("PRORL_LOG_LEVEL", "info")),
	})
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: PluginSets(d, nil, log),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, GRPCServerOptions()...)...)
		},
		Logger: log,
	})
}

func runCommand(d Domain, args []string, stdout, stderr io.Writer) int {
	switch args[0] {
	case "describe":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(DescribeOf(d)); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	default:
		fmt.Fprintf(stderr, "%s is a prorl plugin: the prorl host starts it.\nusage: %s describe\n", d.Info().Name, os.Args[0])
		return 2
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
