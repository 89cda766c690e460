// Package sdktest runs a domain over the real go-plugin gRPC path in-process,
// with a fake host, and holds the conformance suite every domain must pass.
package sdktest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/prorl/prorl/sdk"
	pb "github.com/prorl/prorl/sdk/proto"
	"github.com/prorl/prorl/sdk/wire"
)

// Harness is a domain served over gRPC with host services on the broker.
type Harness struct {
	Client pb.TaskDomainClient
	Host   *FakeHost // the host services, when they are a FakeHost
	broker uint32
	// hostUp and hostDone: the host services' server listening, stopped.
	hostUp, hostDone <-chan struct{}
}

// Start serves d in-process and returns a connected, unconfigured harness.
func Start(t testing.TB, d sdk.Domain) *Harness {
	t.Helper()
	return StartWithHost(t, d, NewFakeHost(t))
}

// StartWithHost serves d with the given host services (a real sandbox
// manager, for instance) on the broker.
func StartWithHost(t testing.TB, d sdk.Domain, hs pb.HostServicesServer) *Harness {
	t.Helper()
	// One plugin value serves both ends of the in-process connection.
	p := sdk.Plugin(d, nil)
	p.HostServices = hs
	client, server := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{wire.PluginName: p})
	h := dispense(t, client)
	h.Host, _ = hs.(*FakeHost)
	// Close asks the server's controller to stop it; stopping it here as
	// well raced with that inside go-plugin (seen under -race). The
	// sockets the two servers listen on in the temporary directory are
	// removed when they stop, which is after Close returns; and the host
	// services' only if they were listening before it (wire.Remote).
	// Waiting for both keeps a test that ends at once from leaving them.
	t.Cleanup(func() {
		wait(h.hostUp, h.hostDone)
		if client.Close() != nil {
			server.Stop()
		}
		wait(server.DoneCh, nil)
		wait(h.hostDone, nil)
	})
	return h
}

// wait waits for a or b to close (a nil one never does; both nil: no
// wait), or 10 s.
func wait(a, b <-chan struct{}) {
	if a == nil && b == nil {
		return
	}
	select {
	case <-a:
	case <-b:
	case <-time.After(10 * time.Second):
	}
}

func dispense(t testing.TB, c plugin.ClientProtocol) *Harness {
	t.Helper()
	rd, err := wire.Dispense(c)
	if err != nil {
		t.Fatalf("dispense: %v", err)
	}
	return &Harness{Client: rd.Client, broker: rd.HostServicesID, hostUp: rd.HostServicesUp, hostDone: rd.HostServicesDone}
}

// StartCommand runs a plugin (argv: a Go binary, a Python interpreter and
// its script: anything that speaks the plugin protocol) as its own process
// the way the host starts it (wire.ClientConfig: gRPC, mutual TLS, an
// empty environment but PATH), with hs on the broker; nil hs offers no
// host services.
func StartCommand(t testing.TB, argv []string, hs pb.HostServicesServer) *Harness {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	// The plugin's socket in a directory removed after the test: a plugin
	// killed at the end (its graceful stop timed out) leaves it (in /tmp:
	// the environment has no TMPDIR). A short path, for a socket's.
	sockDir, err := os.MkdirTemp("", "sdkt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	cmd.Env = append(append([]string{}, wire.BaseEnv...), plugin.EnvUnixSocketDir+"="+sockDir)
	cc, err := wire.ClientConfig(cmd, hs, hclog.New(&hclog.LoggerOptions{Name: "plugin", Output: testWriter{t}, Level: hclog.Info}))
	if err != nil {
		t.Fatal(err)
	}
	cc.StartTimeout = 2 * time.Minute // an interpreter's first start on a loaded machine
	client := plugin.NewClient(cc)
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	h := dispense(t, rpc)
	h.Host, _ = hs.(*FakeHost)
	return h
}

// testWriter sends the plugin's log lines to the test's log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// Configure sends the config table (JSON) with the host services broker id.
func (h *Harness) Configure(ctx context.Context, cfg json.RawMessage) (*pb.ConfigureResponse, error) {
	return h.Client.Configure(ctx, &pb.ConfigureRequest{ConfigJson: cfg, HostServicesBrokerId: h.broker, HostInstance: "sdktest"})
}
