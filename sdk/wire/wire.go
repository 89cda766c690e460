// Package wire is the plugin protocol's plumbing shared by the host and the
// SDK: the go-plugin handshake, the gRPC options both sides use, the host's
// side of the plugin (a TaskDomain client with HostServices served back over
// the broker) and the client configuration a host starts a plugin process
// with. Domain authors never need it; hosts and test harnesses do.
package wire

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os/exec"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	pb "github.com/prorl/prorl/sdk/proto"
	"google.golang.org/grpc"
)

// APIVersion is the plugin protocol version (go-plugin's ProtocolVersion).
const APIVersion = 1

// MaxMessageBytes bounds every gRPC message between host and plugin; the
// gRPC default of 4 MiB is too small for long trajectories and file reads.
const MaxMessageBytes = 64 << 20

// PluginName is the single plugin kind a prorl plugin binary serves.
const PluginName = "domain"

// Handshake is shared by host and plugins (in any language: the Python SDK
// checks the same cookie). The cookie only keeps a plugin binary from being
// run by hand by mistake; it is not security.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  APIVersion,
	MagicCookieKey:   "PRORL_PLUGIN",
	MagicCookieValue: "9c1f0e6a-task-domain",
}

// ServerOptions are the gRPC server options both sides use.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes)}
}

// DialOptions are the gRPC client options both sides use.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes))}
}

// Remote is the host's handle on a plugin process.
type Remote struct {
	Client pb.TaskDomainClient
	// HostServicesID is the broker id where the host serves HostServices
	// to this plugin (ConfigureRequest.host_services_broker_id); 0 if none.
	HostServicesID uint32
	// HostServicesUp is closed once the host services' server listens on
	// the broker (its address sent to the plugin), HostServicesDone when
	// it has stopped and its listener, a socket file, is gone; nil if
	// none. A broker closed before it listens leaves that file behind
	// (go-plugin's Accept drops its listener when it cannot send the
	// address), so a caller that stops at once waits for Up first.
	HostServicesUp, HostServicesDone <-chan struct{}
}

// Plugin is the go-plugin glue. The host sets HostServices (nil offers
// none) and gets a *Remote from Dispense; a plugin sets Register, which
// puts its TaskDomain service on the server.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	HostServices pb.HostServicesServer
	Register     func(broker *plugin.GRPCBroker, s *grpc.Server) error
}

// GRPCServer registers the domain (plugin side).
func (p *Plugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	return p.Register(broker, s)
}

// GRPCClient returns a *Remote and serves the host services once over the
// broker (host side).
func (p *Plugin) GRPCClient(_ context.Context, broker *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	r := &Remote{Client: pb.NewTaskDomainClient(c)}
	if p.HostServices != nil {
		r.HostServicesID = broker.NextId()
		up, done := make(chan struct{}), make(chan struct{})
		r.HostServicesUp, r.HostServicesDone = up, done
		go func() {
			defer close(done)
			broker.AcceptAndServe(r.HostServicesID, func(opts []grpc.ServerOption) *grpc.Server {
				close(up) // called once Accept has listened and sent the address
				s := grpc.NewServer(append(opts, ServerOptions()...)...)
				pb.RegisterHostServicesServer(s, p.HostServices)
				return s
			})
		}()
	}
	return r, nil
}

// ConfigEnv carries a plugin's config table, as JSON, to an admin
// subcommand of its binary (sdk.Command) that the host runs.
const ConfigEnv = "PRORL_PLUGIN_CONFIG"

// BaseEnv is all of its environment a plugin process gets besides what its
// configuration names: no variable of the host's (tokens, cloud
// credentials) reaches it.
var BaseEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}

// Dispense returns the domain a connected client serves.
func Dispense(c plugin.ClientProtocol) (*Remote, error) {
	raw, err := c.Dispense(PluginName)
	if err != nil {
		return nil, err
	}
	r, ok := raw.(*Remote)
	if !ok {
		return nil, fmt.Errorf("unexpected plugin type %T", raw)
	}
	return r, nil
}

// Plugins is the versioned plugin set for p.
func Plugins(p *Plugin) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{APIVersion: {PluginName: p}}
}

// ClientConfig is how a host starts the plugin process cmd: gRPC only,
// mutual TLS with a fresh certificate per process, nothing of the host's
// environment but what cmd carries. Callers add timeouts and output sinks.
//
// The mutual TLS is go-plugin's AutoMTLS protocol (the host's certificate
// in PLUGIN_CLIENT_CERT, the plugin's in the handshake line) with the
// host's key on P-256 instead of go-plugin's P-521: gRPC's C core
// (BoringSSL: Python plugins) does not offer P-521 signatures, so a Go
// client never presents a P-521 certificate to it. A plugin that answers
// without a certificate is refused: there is no plaintext fallback.
func ClientConfig(cmd *exec.Cmd, hs pb.HostServicesServer, log hclog.Logger) (*plugin.ClientConfig, error) {
	certPEM, cert, err := clientCert()
	if err != nil {
		return nil, fmt.Errorf("plugin client certificate: %w", err)
	}
	cmd.Env = append(cmd.Env, "PLUGIN_CLIENT_CERT="+string(certPEM))
	return &plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: Plugins(&Plugin{HostServices: hs}),
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		// go-plugin loads the plugin's certificate from the handshake into
		// RootCAs and ClientCAs (for the broker) of this config.
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
			ServerName:   "localhost",
			RootCAs:      x509.NewCertPool(), // empty until the handshake: never the system's roots
		},
		Logger:          log,
		GRPCDialOptions: DialOptions(),
	}, nil
}

// clientCert makes the host's certificate for one plugin process, shaped as
// go-plugin's (CN and DNS name localhost, a CA so it verifies itself).
func clientCert() ([]byte, tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "localhost", Organization: []string{"prorl"}},
		DNSNames:              []string{"localhost"},
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageKeyAgreement | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		SerialNumber:          sn,
		NotBefore:             time.Now().Add(-30 * time.Second),
		NotAfter:              time.Now().Add(262980 * time.Hour), // as go-plugin: no expiry within a host's life
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return certPEM, cert, err
}

// CheckExec refuses an exec request whose fields do not apply: a session's
// command runs in the sandbox's one shell, in its current directory and
// environment (cd and export in the command change them), with no stdin.
func CheckExec(req *pb.ExecRequest) error {
	if !req.Session {
		return nil
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"argv", len(req.Argv) > 0}, {"stdin", len(req.Stdin) > 0}, {"workdir", req.Workdir != ""}, {"env", len(req.Env) > 0}} {
		if f.set {
			return fmt.Errorf("exec: %s does not apply to a session's command (it runs in the session's shell: cd and export there)", f.name)
		}
	}
	return nil
}
