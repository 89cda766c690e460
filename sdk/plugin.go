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
	"github.com/prorl/prorl/sdk/wire"
	"google.golang.org/grpc"
)

// Plugin is the go-plugin glue that serves d: what Serve runs, and what a
// test harness (sdktest) serves in-process, setting HostServices for the
// host's end of the connection.
func Plugin(d Domain, log hclog.Logger) *wire.Plugin {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &wire.Plugin{Register: func(broker *plugin.GRPCBroker, s *grpc.Server) error {
		pb.RegisterTaskDomainServer(s, newServer(d, broker, log))
		return nil
	}}
}

// describe is the JSON the describe subcommand prints.
type describe struct {
	Info
	APIVersions []int      `json:"api_versions"`
	Tools       []ToolSpec `json:"tools"`
}

func describeOf(d Domain) describe {
	in := d.Info()
	out := describe{Info: in, APIVersions: []int{APIVersion}}
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
		HandshakeConfig: wire.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{
			wire.APIVersion: {wire.PluginName: Plugin(d, log)},
		},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, wire.ServerOptions()...)...)
		},
		Logger: log,
	})
}

func runCommand(d Domain, args []string, stdout, stderr io.Writer) int {
	var cmds []Command
	if c, ok := d.(Commander); ok {
		cmds = c.CommandList()
	}
	if args[0] == "describe" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(describeOf(d)); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	}
	for _, c := range cmds {
		if c.Name != args[0] {
			continue
		}
		cfg := json.RawMessage(os.Getenv(ConfigEnv))
		if len(cfg) == 0 {
			cfg = json.RawMessage("{}")
		}
		if err := c.Run(context.Background(), args[1:], cfg, os.Stdin, stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "%s %s: %v\n", d.Info().Name, c.Name, err)
			if _, ok := err.(UsageError); ok {
				return 2
			}
			return 1
		}
		return 0
	}
	fmt.Fprintf(stderr, "%s is a prorl plugin: the prorl host starts it.\nusage: %s describe\n", d.Info().Name, os.Args[0])
	for _, c := range cmds {
		fmt.Fprintf(stderr, "       %s %s %s\n", os.Args[0], c.Name, c.Usage)
	}
	return 2
}

// Command is an admin's subcommand of a plugin binary besides serving it
// (a dataset check, an image listing): `prorl-host plugins exec NAME
// COMMAND [ARGS...]` runs it as the host would run the plugin — the
// pinned binary, no inherited environment — with the plugin's
// [plugins.NAME.config] table as JSON in config.
type Command struct {
	Name  string
	Usage string // its arguments, for the usage line
	Run   func(ctx context.Context, args []string, config json.RawMessage, stdin io.Reader, stdout, stderr io.Writer) error
}

// Commander is a Domain with commands of its own (Env has a Commands field).
type Commander interface{ CommandList() []Command }

// UsageError is a command's complaint about its arguments (exit status 2).
type UsageError string

func (e UsageError) Error() string { return string(e) }

// ConfigEnv carries the plugin's config table to a command.
const ConfigEnv = wire.ConfigEnv

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
