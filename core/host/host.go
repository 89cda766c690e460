// Package host assembles a prorl host from its configuration: plugins,
// backends, pipeline, store and API, and shuts it down in order.
package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prorl/prorl/core/api"
	"github.com/prorl/prorl/core/api/dashboard"
	"github.com/prorl/prorl/core/api/nodes"
	"github.com/prorl/prorl/core/api/polar"
	"github.com/prorl/prorl/core/api/prorl"
	"github.com/prorl/prorl/core/backend"
	"github.com/prorl/prorl/core/baseurl"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/coord"
	"github.com/prorl/prorl/core/engine"
	"github.com/prorl/prorl/core/metrics"
	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/rundir"
	"github.com/prorl/prorl/core/sandbox"
	"github.com/prorl/prorl/core/store"
	"golang.org/x/net/netutil"
)

// Host is a running prorl host.
type Host struct {
	Cfg       *config.Config
	Log       hclog.Logger
	Metrics   *metrics.Metrics
	Store     store.Store
	Pool      *backend.Pool
	Plugins   *pluginhost.Manager
	Pipeline  *pipeline.Pipeline
	Sandboxes *sandbox.Manager // nil when disabled
	// Coordinator is set on a coordinator (NewCoordinator).
	Coordinator *coord.Coordinator
	API         *api.Server
	Handler     http.Handler
	Instance    string

	cancel context.CancelFunc
	// The gateway as sandboxes reach it: its routes alone, on a Unix socket.
	gwServer *http.Server
	// run holds the host's sockets (the gateway's, the plugins').
	run *rundir.Dir
}

// NewLogger makes the host's logger from the config.
func NewLogger(c config.Log, w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "prorl", Level: hclog.LevelFromString(c.Level), JSONFormat: c.JSON, Output: w, TimeFormat: time.RFC3339Nano})
}

// Version is the build's version (set by the command); a coordinator
// takes only nodes of its own version.
var Version = "dev"

// New starts plugins and the pipeline; Serve starts the API.
func New(ctx context.Context, cfg *config.Config, log hclog.Logger) (*Host, error) {
	return build(ctx, cfg, log, false)
}

// NewCoordinator starts a coordinator: a host whose rollouts run on the
// nodes that register with it (no backends or sandboxes of its own; its
// plugins only validate tasks).
func NewCoordinator(ctx context.Context, cfg *config.Config, log hclog.Logger) (*Host, error) {
	return build(ctx, cfg, log, true)
}

func build(ctx context.Context, cfg *config.Config, log hclog.Logger, coordinating bool) (*Host, error) {
	// GOGC and GOMEMLIMIT in the environment win over the config.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(cfg.Server.GCPercent)
	}
	if cfg.Server.MemoryLimitMiB > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(cfg.Server.MemoryLimitMiB << 20)
	}
	hn, _ := os.Hostname()
	h := &Host{Cfg: cfg, Log: log, Metrics: metrics.New(), Instance: fmt.Sprintf("%s-%d", hn, os.Getpid())}
	if err := h.openStore(); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			h.Store.Close()
		}
	}()
	if err := h.addBackends(ctx, coordinating); err != nil {
		return nil, err
	}
	if cfg.Server.AllowRemote && cfg.Server.Token == "" && cfg.Server.AdminToken == "" {
		log.Warn("the API is exposed beyond loopback WITHOUT a token (server.insecure = true): anyone who reaches it can submit, cancel and change backends", "listen", cfg.Server.Listen)
	}
	run, swept, err := rundir.Create("")
	if err != nil {
		return nil, err
	}
	defer func() {
		if !ok {
			run.Close()
		}
	}()
	h.run = run
	if len(swept) > 0 {
		log.Info("removed the socket directories of hosts that were killed", "dirs", swept)
	}
	enabled := cfg.EnabledPlugins()
	if len(enabled) == 0 {
		log.Warn("no plugin is enabled: the host serves no domain")
	}
	for n, p := range enabled {
		if p.SHA256 == "" {
			log.Warn("plugin binary is not pinned by sha256; pin it in production", "plugin", n, "path", p.Path)
		}
	}
	hs, err := h.startSandboxes(coordinating)
	if err != nil {
		return nil, err
	}
	plugs, err := pluginhost.Start(ctx, log.Named("plugins"), enabled, hs, pluginhost.Options{Instance: h.Instance, SocketDir: run.Path})
	if err != nil {
		if h.Sandboxes != nil {
			h.Sandboxes.Close()
		}
		return nil, err
	}
	h.Plugins = plugs
	var gwLn net.Listener
	if h.Sandboxes != nil {
		if gwLn, err = h.gatewaySocket(); err != nil {
			plugs.Stop()
			h.Sandboxes.Close()
			return nil, err
		}
	}
	socket := ""
	if gwLn != nil {
		socket = gwLn.Addr().String()
	}
	pd := pipeline.Deps{Cfg: cfg, Log: log.Named("pipeline"), Plugins: plugs, Pool: h.Pool, Store: h.Store, Metrics: h.Metrics, Sandboxes: h.Sandboxes, GatewaySocket: socket}
	if cfg.Store.Driver != "memory" {
		// Beside the durable store: what the memory store forgets, this does too.
		pd.LengthsFile = cfg.Store.Path + ".lengths"
	}
	onRestart := cfg.Store.OnRestart
	if coordinating {
		h.Coordinator = coord.New(coord.Options{Version: Version, Plugins: plugs.Names(), Token: cfg.Server.Admin(), DeadAfter: cfg.Cluster.DeadAfter.Duration, AllowPlainHTTP: cfg.Cluster.AllowPlainHTTP,
			Store: h.Store, Log: log.Named("coordinator")})
		pd.Remote, pd.RemoteWorkers = h.Coordinator, cfg.Cluster.Workers
		// Nodes keep what they ran: placing it again finds it there.
		onRestart = "rerun"
	}
	h.Pipeline, err = pipeline.New(pd)
	if err != nil {
		plugs.Stop()
		if h.Coordinator != nil {
			h.Coordinator.Close()
		}
		return nil, err
	}
	if gwLn != nil {
		h.serveGateway(gwLn)
	}
	if h.Coordinator != nil {
		h.Coordinator.SetPolicySource(h.Pipeline.Policy)
	}
	h.Pipeline.Start()
	rerun, interrupted, cancelled, err := h.Pipeline.Recover(onRestart)
	if err != nil {
		h.Pipeline.Shutdown(ctx)
		plugs.Stop()
		return nil, err
	}
	if rerun+interrupted+cancelled > 0 {
		log.Warn("recovered rollouts a previous run left unfinished", "rerun", rerun, "reported_interrupted", interrupted, "reported_cancelled", cancelled)
	}
	dash := dashboard.Deps{Pipeline: h.Pipeline, Pool: h.Pool, Plugins: plugs, Store: h.Store, Cluster: h.Coordinator}
	if h.Sandboxes != nil {
		dash.SandboxStats = h.Sandboxes.Stats
	}
	ad := api.Deps{Cfg: cfg, Log: log.Named("api"), Pipeline: h.Pipeline, Pool: h.Pool, Plugins: plugs, Store: h.Store, Metrics: h.Metrics,
		Dialects: []api.Dialect{prorl.Routes, polar.Routes, nodes.Routes(h.Coordinator), dashboard.Routes(dash)}}
	if c := h.Coordinator; c != nil {
		ad.Admission, ad.Cluster = c.Admission, c
		h.clusterMetrics(c)
	}
	h.API, h.Handler = api.New(ad)
	h.hostMetrics(plugs)
	hctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go h.Pool.RunHealthChecks(hctx, cfg.Backends.HealthInterval.Duration)
	go h.expireKeys(hctx, cfg.Server.IdempotencyTTL.Duration)
	ok = true
	return h, nil
}

// expireKeys deletes idempotency keys older than ttl every quarter of it
// (at most hourly: a key lives ttl and up to an hour more), until ctx
// ends: without it a run that keys every submission grows the store for good.
func (h *Host) expireKeys(ctx context.Context, ttl time.Duration) {
	t := time.NewTicker(min(max(ttl/4, time.Second), time.Hour))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := h.Store.ExpireKeys(time.Now().Add(-ttl)); err != nil {
				h.Log.Warn("idempotency keys not expired; trying again later", "error", err)
			} else if n > 0 {
				h.Log.Debug("idempotency keys expired", "keys", n, "ttl", ttl)
			}
		}
	}
}

// Listen opens the configured address (or addr when not empty).
func (h *Host) Listen(addr string) (net.Listener, error) {
	if addr == "" {
		addr = h.Cfg.Server.Listen
	}
	return net.Listen("tcp", addr)
}

// Serve serves the API on ln until ctx ends, then shuts down gracefully.
func (h *Host) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: h.Handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	h.Log.Info("prorl host serving", "addr", ln.Addr().String(), "domains", strings.Join(h.Plugins.Names(), ","), "instance", h.Instance)
	select {
	case err := <-errc:
		h.Close(context.Background())
		return err
	case <-ctx.Done():
	}
	h.Log.Info("shutting down: no new work; waiting for live rollouts", "deadline", h.Cfg.Server.ShutdownTimeout.Duration)
	h.API.SetClosing()
	sctx, cancel := context.WithTimeout(context.Background(), h.Cfg.Server.ShutdownTimeout.Duration)
	defer cancel()
	h.Pipeline.Shutdown(sctx)
	// Every result is out: long polls and streams answer and end; the
	// moment left is for requests still being answered.
	h.API.EndWaits()
	hctx, hcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer hcancel()
	if err := srv.Shutdown(hctx); err != nil {
		_ = srv.Close()
	}
	h.Close(context.Background())
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// gatewaySocket listens on a Unix socket in the host's directory, which
// every sandbox uid can reach by name (a root host runs each sandbox as its
// own uid); the session keys are what keep one session from another.
func (h *Host) gatewaySocket() (net.Listener, error) {
	sock := filepath.Join(h.run.Path, "gateway.sock")
	ln, err := net.Listen("unix", sock)
	if err == nil {
		if err = os.Chmod(sock, 0o666); err != nil {
			ln.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("gateway socket: %w", err)
	}
	return ln, nil
}

// Close stops health checks and plugins.
func (h *Host) Close(context.Context) {
	if h.cancel != nil {
		h.cancel()
	}
	if h.Coordinator != nil {
		h.Coordinator.Close()
	}
	if h.gwServer != nil {
		_ = h.gwServer.Close()
	}
	h.Plugins.Stop()
	if h.Sandboxes != nil {
		h.Sandboxes.Close()
	}
	if err := h.run.Close(); err != nil {
		h.Log.Warn("remove the host's socket directory", "error", err)
	}
	if err := h.Store.Close(); err != nil {
		h.Log.Error("close store", "error", err)
	}
	h.Log.Info("host stopped")
}

// Join makes this host a node of the coordinator its config names: it
// registers (advertising ln's address unless cluster.advertise is set)
// and heartbeats until ctx ends. The channel reports a refusal.
func (h *Host) Join(ctx context.Context, ln net.Listener) <-chan error {
	errc := make(chan error, 1)
	cl := h.Cfg.Cluster
	if cl.Coordinator == "" {
		return errc
	}
	addr := ln.Addr().String()
	u := cl.Advertise
	if u == "" {
		u = "http://" + addr
	}
	id := cl.NodeID
	if id == "" {
		hn, _ := os.Hostname()
		_, port, _ := net.SplitHostPort(addr)
		id = hn + "-" + port
	}
	m := &coord.Member{Coordinator: strings.TrimRight(cl.Coordinator, "/"), Token: h.Cfg.Server.Admin(), Interval: cl.HeartbeatInterval.Duration,
		Info: coord.NodeInfo{ID: id, URL: strings.TrimRight(u, "/"), Version: Version, Plugins: h.Plugins.Names()},
		Load: h.load, Log: h.Log.Named("cluster")}
	go func() {
		if err := m.Run(ctx); errors.Is(err, coord.ErrRefused) {
			errc <- err
		}
	}()
	return errc
}

// load is what this node reports to its coordinator.
func (h *Host) load() coord.Load {
	l := coord.Load{Capacity: h.Cfg.Pipeline.RunWorkers, Stats: h.Pipeline.Stats(), Healthy: h.Store.Healthy() == nil}
	for _, b := range h.Pool.List() {
		l.Backends++
		if b.Healthy {
			l.HealthyBackends++
		}
	}
	if h.Sandboxes != nil {
		l.Sandboxes, _ = h.Sandboxes.Stats()
	}
	return l
}

// openStore opens the configured store, with its gauges.
func (h *Host) openStore() error {
	switch h.Cfg.Store.Driver {
	case "memory":
		h.Store = store.NewMemory(h.Cfg.Server.ResultRetention)
		h.Log.Warn("store driver memory: submissions and results are lost if the host stops")
	default:
		if err := os.MkdirAll(filepath.Dir(h.Cfg.Store.Path), 0o755); err != nil {
			return fmt.Errorf("store: %w", err)
		}
		b, err := store.OpenBolt(h.Cfg.Store.Path, h.Cfg.Server.ResultRetention)
		if err != nil {
			return err
		}
		h.Store = b
		h.Metrics.Gauge("prorl_store_bytes", "Size of the store file.", nil, func() float64 { return float64(b.Size()) })
		h.Metrics.Gauge("prorl_store_held_results", "Finished results held in memory because the store file refused writes; written when it takes them again.", nil,
			func() float64 { return float64(b.Held()) })
		h.Metrics.Gauge("prorl_store_healthy", "1 while the store file takes writes.", nil, func() float64 {
			if b.Healthy() != nil {
				return 0
			}
			return 1
		})
	}
	return nil
}

// addBackends sets the pool's routing and adds the config's backends (a
// coordinator has none of its own).
func (h *Host) addBackends(ctx context.Context, coordinating bool) error {
	h.Pool = backend.NewPool(h.Log.Named("backends"))
	if err := h.Pool.SetRouting(backend.Routing(h.Cfg.Backends.Routing)); err != nil {
		return fmt.Errorf("backends.routing: %w", err)
	}
	h.Pool.SetMigrateMaxTokens(h.Cfg.Backends.MigrateMaxTokens)
	h.Pool.SetCacheOvercommit(h.Cfg.Backends.CacheOvercommit)
	engine.SetIdleConnTimeout(h.Cfg.Backends.IdleConnTimeout.Duration)
	for _, b := range h.Cfg.Backends.Static {
		if coordinating {
			h.Log.Warn("a coordinator has no backends of its own: the nodes' are used", "ignored", b.URL)
			continue
		}
		srv, err := baseurl.Parse(b.URL) // again: --backend flags join after the config's validation
		if err != nil {
			return fmt.Errorf("backend %s: %w", b.URL, err)
		}
		if b.Model == "" {
			b.Model = engine.Discover(ctx, srv.Base)
		}
		c, err := engine.NewClient(b.Protocol, srv.Base, b.Model)
		if err != nil {
			return err
		}
		if _, err := h.Pool.Add(&backend.Backend{URL: srv.Display, Protocol: b.Protocol, Model: b.Model, MaxConcurrency: b.MaxConcurrency, Slots: b.Slots, CacheTokens: b.CacheTokens, Weight: b.Weight, Client: c}); err != nil {
			return fmt.Errorf("backend %s: %w", b.URL, err)
		}
	}
	return nil
}

// startSandboxes starts the sandbox manager unless the config disables it
// (or the host coordinates), and returns it as plugins reach it.
func (h *Host) startSandboxes(coordinating bool) (pluginhost.Sandboxes, error) {
	if sc := h.Cfg.Sandbox; sc.Driver != "disabled" && !coordinating {
		m, err := sandbox.New(sandbox.ConfigFrom(sc), h.Log.Named("sandbox"))
		if err != nil {
			return nil, fmt.Errorf("%w (or set [sandbox] driver = \"disabled\")", err)
		}
		h.Sandboxes = m
		h.Metrics.Gauge("prorl_sandboxes_alive", "Sandboxes running.", nil, func() float64 { a, _ := m.Stats(); return float64(a) })
		h.Metrics.Gauge("prorl_sandboxes_starting", "Sandboxes starting.", nil, func() float64 { _, s := m.Stats(); return float64(s) })
		for _, reason := range sandbox.FrameReasons {
			c := m.Counters.FramesDropped(reason)
			h.Metrics.Counter("prorl_sandbox_frames_dropped_total", "Frames from sandboxes dropped: over the size cap, failing authentication, malformed, or for a finished request.",
				prometheus.Labels{"reason": reason}, func() float64 { return float64(c.Load()) })
		}
		h.Metrics.Counter("prorl_sandbox_output_dropped_bytes_total", "Command output over the per-call cap, dropped by the host.", nil,
			func() float64 { return float64(m.Counters.OutputDropped.Load()) })
		h.Log.Info("sandboxes", "driver", m.Driver(), "limits", m.Enforcement(), "seccomp", sc.Seccomp)
		return &sandbox.PluginServices{M: m, DefaultTimeout: sc.ExecTimeout.Duration}, nil
	}
	return nil, nil // nil: plugins are told the host has no sandboxes
}

// serveGateway serves the gateway on the socket sandboxes reach.
func (h *Host) serveGateway(gwLn net.Listener) {
	r := mux.NewRouter()
	h.Pipeline.Gateway().Register(r, nil)
	// Model-written code in a sandbox reaches this socket: headers and
	// (in the gateway's decode) bodies are read against deadlines, and
	// its connections are capped (more wait in the listen backlog,
	// holding nothing of the host's). No ReadTimeout: it would also end
	// a request whose generation outlasts it.
	h.gwServer = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	lim := netutil.LimitListener(gwLn, h.Cfg.Gateway.MaxConnections)
	go func() { _ = h.gwServer.Serve(lim) }()
}

// clusterMetrics are a coordinator's gauges of its nodes.
func (h *Host) clusterMetrics(c *coord.Coordinator) {
	for _, state := range []string{coord.StateLive, coord.StateDraining, coord.StateDead} {
		h.Metrics.Gauge("prorl_cluster_nodes", "Nodes known to the coordinator, by state.", map[string]string{"state": state}, func() float64 {
			n := 0
			for _, ns := range c.Nodes() {
				if ns.State == state {
					n++
				}
			}
			return float64(n)
		})
	}
	h.Metrics.Gauge("prorl_cluster_outstanding", "Rollouts the coordinator has out on nodes.", nil, func() float64 {
		n := 0
		for _, ns := range c.Nodes() {
			n += ns.Outstanding
		}
		return float64(n)
	})
}

// hostMetrics are the gauges and counters of the host's parts.
func (h *Host) hostMetrics(plugs *pluginhost.Manager) {
	h.Metrics.Gauge("prorl_backends_healthy", "Healthy backends.", nil, func() float64 {
		n := 0
		for _, b := range h.Pool.List() {
			if b.Healthy {
				n++
			}
		}
		return float64(n)
	})
	h.Metrics.Gauge("prorl_rollouts_stuck", "Live rollouts held in one stage longer than pipeline.stuck_after.", nil, func() float64 {
		return float64(dashboard.StuckCount(h.Pipeline.Active(), h.Cfg.Pipeline.StuckAfter.Duration, time.Now()))
	})
	for _, check := range []string{"loop", "runaway_generation", "template_mismatch", "slow_init"} {
		h.Metrics.Counter("prorl_rollout_health_total", "Finished rollouts that tripped a health check.", prometheus.Labels{"check": check},
			func() float64 { return float64(h.Pipeline.Tally().HealthCount(check)) })
	}
	h.Metrics.Gauge("prorl_results_unacked", "Finished results not yet acknowledged.", nil, func() float64 { return float64(h.Store.Stats().Finished) })
	for _, name := range plugs.Names() {
		p, _ := plugs.Get(name)
		h.Metrics.Gauge("prorl_plugin_restarts", "Plugin process restarts.", map[string]string{"plugin": name}, func() float64 { return float64(p.Status().Restarts) })
		h.Metrics.Gauge("prorl_plugin_healthy", "Plugin serving (1) or not (0).", map[string]string{"plugin": name}, func() float64 {
			if p.Healthy() {
				return 1
			}
			return 0
		})
	}
}
