// Package sdktest runs a domain over the real go-plugin gRPC path in-process,
// with a fake host, and holds the conformance suite every domain must pass.
package sdktest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/hashicorp/go-plugin"
	"github.com/prorl/prorl/sdk"
	pb "github.com/prorl/prorl/sdk/proto"
)

// Harness is a domain served over gRPC with host services on the broker.
type Harness struct {
	Client pb.TaskDomainClient
	Host   *FakeHost
	broker uint32
}

// Start serves d in-process and returns a connected, unconfigured harness.
func Start(t testing.TB, d sdk.Domain) *Harness {
	t.Helper()
	fh := NewFakeHost(t)
	h := StartWithHost(t, d, fh)
	h.Host = fh
	return h
}

// StartWithHost serves d with the given host services (a real sandbox
// manager, for instance) on the broker.
func StartWithHost(t testing.TB, d sdk.Domain, hs pb.HostServicesServer) *Harness {
	t.Helper()
	ps := map[string]plugin.Plugin{sdk.PluginName: &sdk.DomainPlugin{Impl: d, HostServices: hs}}
	client, server := plugin.TestPluginGRPCConn(t, false, ps)
	t.Cleanup(func() { _ = client.Close(); server.Stop() })
	raw, err := client.Dispense(sdk.PluginName)
	if err != nil {
		t.Fatalf("dispense: %v", err)
	}
	rd := raw.(*sdk.RemoteDomain)
	return &Harness{Client: rd.Client, broker: rd.HostBrokerID}
}

// Configure sends the config table (JSON) with the host services broker id.
func (h *Harness) Configure(ctx context.Context, cfg json.RawMessage) (*pb.ConfigureResponse, error) {
	return h.Client.Configure(ctx, &pb.ConfigureRequest{ConfigJson: cfg, HostServicesBrokerId: h.broker, HostInstance: "sdktest"})
}
