// Command prorl-host is the prorl rollout host: `serve` runs the HTTP API,
// `run` runs a JSONL file of tasks in batch, `plugins` inspects plugin binaries.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"golang.org/x/sys/unix"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/configs"
	"github.com/prorl/prorl/core/batch"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/dataset"
	"github.com/prorl/prorl/core/host"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/rundir"
	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/internal/profiling"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	// Descriptors inherited without close-on-exec would reach every plugin
	// and sandbox this host starts.
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	ctx, stop := signalContext()
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		var ue usageError
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code) // a sandboxed command's own exit status
		}
		fmt.Fprintln(os.Stderr, "prorl-host:", err)
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// signalContext ends on the first SIGINT/SIGTERM; a second one exits at once.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ch
		cancel()
		<-ch
		fmt.Fprintln(os.Stderr, "prorl-host: second signal, exiting now")
		rundir.CloseAll() // the sockets' directory: the plugins die with the host
		os.Exit(130)
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

const usage = `usage: prorl-host <command> [flags]

commands:
  serve       run the HTTP API (ProRL-compatible endpoints included); with
              [cluster] coordinator set, as a node of that coordinator
  coordinate  run a coordinator: the same API, rollouts spread over the
              nodes that register with it
  run         run a JSONL file of tasks and print a summary
  plugins     list the configured plugins, hash or describe a plugin binary;
              exec NAME COMMAND: run a plugin binary's own admin command
  dataset     cat FILE: a task file (JSONL or Parquet) as JSONL
  sandbox     build the default image; run a command in a sandbox to check a deployment
  store       check the durable store's integrity (with the host stopped)
  swe         swe images: which instances of a dataset have their images
              (plugins exec swe images)
  harness     list the agent harnesses; install them (harness install [NAME...])
  version     print the version
`

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	host.Version = version
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError{"no command"}
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "coordinate":
		return coordinate(ctx, args[1:], stdout, stderr)
	case "run":
		return runBatch(ctx, args[1:], stdin, stdout, stderr)
	case "plugins":
		return plugins(ctx, args[1:], stdin, stdout, stderr)
	case "sandbox":
		return sandboxCmd(ctx, args[1:], stdout, stderr)
	case "store":
		return storeCmd(args[1:], stdout, stderr)
	case "swe":
		return sweCmd(args[1:], stdout, stderr)
	case "dataset":
		return datasetCat(args[1:], stdout)
	case "harness":
		return harnessCmd(ctx, args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "prorl-host", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usageError{fmt.Sprintf("unknown command %q", args[0])}
}

// loadConfig reads the config (the embedded configs/local.toml when path
// is ""), its overlays (PATH.d/*.toml) and the --plugin flags.
func loadConfig(path string, plugins ...string) (*config.Config, error) {
	var extra map[string]any
	for _, p := range plugins {
		name, table, err := config.PluginFlag(p)
		if err != nil {
			return nil, usageError{err.Error()}
		}
		if extra == nil {
			extra = map[string]any{"plugins": map[string]any{}}
		}
		extra["plugins"].(map[string]any)[name] = table
	}
	cfg, err := config.LoadWith(path, configs.Local, extra)
	if err != nil {
		return nil, err
	}
	if err := cfg.AddHarnesses(configs.Harnesses, "embedded configs/harnesses.toml"); err != nil {
		return nil, err
	}
	return cfg, nil
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// hostFlags are the flags serve and coordinate share.
type hostFlags struct {
	fs                                             *flag.FlagSet
	cfgPath, listen, addrFile, cpuProfile, dataDir *string
	plugins                                        multiFlag
}

func newHostFlags(name, configHelp, pluginHelp string, stderr io.Writer) *hostFlags {
	f := &hostFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	f.fs.SetOutput(stderr)
	f.cfgPath = f.fs.String("config", "", configHelp)
	f.listen = f.fs.String("listen", "", "override server.listen")
	f.fs.Var(&f.plugins, "plugin", pluginHelp)
	f.addrFile = f.fs.String("addr-file", "", "write the bound address to this file once listening")
	f.cpuProfile = f.fs.String("cpuprofile", "", "write a CPU profile here until shutdown")
	f.dataDir = f.fs.String("data-dir", "", "override server.data_dir (and the store and sandbox dirs under it)")
	return f
}

// config loads the config with the flags' overrides and the command's
// own (set, when not empty, on the field each points to), then checks it.
func (f *hostFlags) config(args []string, more func(*config.Config) map[*string]string) (*config.Config, error) {
	if err := f.fs.Parse(args); err != nil {
		return nil, usageError{err.Error()}
	}
	cfg, err := loadConfig(*f.cfgPath, f.plugins...)
	if err != nil {
		return nil, err
	}
	if *f.dataDir != "" {
		cfg.SetDataDir(*f.dataDir)
	}
	overrides := map[*string]string{&cfg.Server.Listen: *f.listen}
	if more != nil {
		for dst, v := range more(cfg) {
			overrides[dst] = v
		}
	}
	changed := false
	for dst, v := range overrides {
		if v != "" {
			*dst, changed = v, true
		}
	}
	if changed {
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// run builds the host, listens, writes --addr-file, and serves until ctx
// ends, under --cpuprofile.
func (f *hostFlags) run(ctx context.Context, cfg *config.Config, stdout, stderr io.Writer, what string,
	build func(context.Context, *config.Config, hclog.Logger) (*host.Host, error), serve func(context.Context, *host.Host, net.Listener) error) error {
	stopProfile, err := profiling.Start(*f.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	h, ln, err := startHostWith(ctx, cfg, host.NewLogger(cfg.Log, stderr), build)
	if err != nil {
		return err
	}
	if *f.addrFile != "" {
		if err := os.WriteFile(*f.addrFile, []byte(ln.Addr().String()), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "prorl %s listening on http://%s\n", what, ln.Addr())
	return serve(ctx, h, ln)
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newHostFlags("serve", "TOML config (default: the embedded configs/local.toml); overlays in CONFIG.d/*.toml apply after it",
		"enable a plugin: NAME=PATH [ARG...] (repeatable)", stderr)
	var backends multiFlag
	f.fs.Var(&backends, "backend", "register a vLLM backend URL at start (repeatable; PROTOCOL=URL for another protocol)")
	coordinator := f.fs.String("coordinator", "", "override cluster.coordinator: join this coordinator as a node")
	nodeID := f.fs.String("node-id", "", "override cluster.node_id")
	advertise := f.fs.String("advertise", "", "override cluster.advertise (the URL the coordinator reaches this node at)")
	cfg, err := f.config(args, func(c *config.Config) map[*string]string {
		return map[*string]string{&c.Cluster.Coordinator: *coordinator, &c.Cluster.NodeID: *nodeID, &c.Cluster.Advertise: *advertise}
	})
	if err != nil {
		return err
	}
	addStatic(cfg, backends)
	return f.run(ctx, cfg, stdout, stderr, "host", host.New, serveJoined)
}

// serveJoined serves, as a node of the configured coordinator if any: a
// refusal by the coordinator stops the host with its reason.
func serveJoined(ctx context.Context, h *host.Host, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	refusal := make(chan error, 1)
	joinErr := h.Join(ctx, ln)
	go func() {
		select {
		case err := <-joinErr:
			h.Log.Error("stopping: the coordinator refused this node", "error", err)
			refusal <- err
			cancel()
		case <-ctx.Done():
		}
	}()
	err := h.Serve(ctx, ln)
	select {
	case refused := <-refusal:
		return refused
	default:
		return err
	}
}

// coordinate runs a coordinator: the same API as a host, its rollouts run
// on the nodes that register with it.
func coordinate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newHostFlags("coordinate", "TOML config (default: the embedded configs/local.toml); the nodes use the same",
		"enable a plugin: NAME=PATH [ARG...] (repeatable; the nodes must enable the same)", stderr)
	cfg, err := f.config(args, nil)
	if err != nil {
		return err
	}
	return f.run(ctx, cfg, stdout, stderr, "coordinator", host.NewCoordinator, func(ctx context.Context, h *host.Host, ln net.Listener) error { return h.Serve(ctx, ln) })
}

// startHost assembles a host and opens its listener.
func startHost(ctx context.Context, cfg *config.Config, log hclog.Logger) (*host.Host, net.Listener, error) {
	return startHostWith(ctx, cfg, log, host.New)
}

func startHostWith(ctx context.Context, cfg *config.Config, log hclog.Logger, build func(context.Context, *config.Config, hclog.Logger) (*host.Host, error)) (*host.Host, net.Listener, error) {
	h, err := build(ctx, cfg, log)
	if err != nil {
		return nil, nil, err
	}
	ln, err := h.Listen("")
	if err != nil {
		h.Close(ctx)
		return nil, nil, err
	}
	return h, ln, nil
}

func addStatic(cfg *config.Config, backends []string) {
	for _, b := range backends {
		proto, url := "vllm", b
		if p, u, ok := strings.Cut(b, "="); ok {
			proto, url = p, u
		}
		cfg.Backends.Static = append(cfg.Backends.Static, config.Backend{URL: url, Protocol: proto})
	}
}

func runBatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "TOML config of the embedded host (default: embedded configs/local.toml)")
	server := fs.String("server", "", "use a running host at this URL instead of an embedded one")
	tasks := fs.String("tasks", "-", "tasks, JSONL or Parquet (- for JSONL on stdin)")
	out := fs.String("out", "", "write results JSONL here (default: none)")
	n := fs.Int("n", 1, "samples per task (one GRPO group)")
	domain := fs.String("domain", "math", "domain of rows that name no domain or data_source")
	temp := fs.Float64("temperature", 1.0, "sampling temperature")
	maxTurns := fs.Int("max-turns", 0, "max turns (0: the domain's default)")
	seed := fs.Int64("seed", -1, "base seed (-1: none)")
	summaryJSON := fs.String("summary-json", "", "also write the summary as JSON here")
	var backends, plugins multiFlag
	fs.Var(&backends, "backend", "backend URL for the embedded host (repeatable)")
	fs.Var(&plugins, "plugin", "enable a plugin in the embedded host: NAME=PATH [ARG...] (repeatable)")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	var in io.Reader = stdin
	if *tasks != "-" {
		f, err := dataset.Open(*tasks) // JSONL or Parquet
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	base := strings.TrimRight(*server, "/")
	if base == "" {
		cfg, err := loadConfig(*cfgPath, plugins...)
		if err != nil {
			return err
		}
		cfg.Server.Listen = "127.0.0.1:0"
		addStatic(cfg, backends)
		h, ln, err := startHost(ctx, cfg, host.NewLogger(config.Log{Level: "warn"}, stderr))
		if err != nil {
			return err
		}
		hctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.Serve(hctx, ln) }()
		defer func() { stop(); <-done }()
		base = "http://" + ln.Addr().String()
	}
	sampling, _ := json.Marshal(map[string]any{"temperature": *temp})
	o := batch.Options{Server: base, Tasks: in, Progress: stderr, N: *n, Domain: *domain, Sampling: sampling, MaxTurns: *maxTurns}
	if *seed >= 0 {
		sampling, _ = json.Marshal(map[string]any{"temperature": *temp, "seed": *seed})
		o.Sampling = sampling
	}
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		o.Out = f
	}
	s, err := batch.Run(ctx, o)
	if err != nil {
		return err
	}
	s.WriteTable(stdout)
	if *summaryJSON != "" {
		b, _ := json.MarshalIndent(s, "", "  ")
		if err := os.WriteFile(*summaryJSON, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func plugins(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"usage: prorl-host plugins list [--config F] | hash PATH | describe PATH | exec [--config F] NAME COMMAND [ARGS...]"}
	}
	switch args[0] {
	case "exec":
		return pluginExec(args[1:], stdin, stdout, stderr)
	case "list":
		fs := flag.NewFlagSet("plugins list", flag.ContinueOnError)
		fs.SetOutput(stderr)
		cfgPath := fs.String("config", "", "TOML config")
		if err := fs.Parse(args[1:]); err != nil {
			return usageError{err.Error()}
		}
		cfg, err := loadConfig(*cfgPath)
		if err != nil {
			return err
		}
		for name, p := range cfg.Plugins {
			state := "ok"
			if err := pluginhost.Verify(name, p); err != nil {
				state = err.Error()
			} else if _, err := os.Stat(p.Path); err != nil {
				state = err.Error()
			}
			fmt.Fprintf(stdout, "%-10s enabled=%-5v pinned=%-5v %s  %s\n", name, p.Enabled, p.SHA256 != "", p.Path, state)
		}
		return nil
	case "hash":
		if len(args) != 2 {
			return usageError{"usage: prorl-host plugins hash PATH"}
		}
		h, err := pluginhost.HashFile(args[1])
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "sha256 = %q\n", h)
		return nil
	case "describe":
		if len(args) != 2 {
			return usageError{"usage: prorl-host plugins describe PATH"}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, args[1], "describe")
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		cmd.Stdout, cmd.Stderr = stdout, stderr
		return cmd.Run()
	}
	return usageError{fmt.Sprintf("unknown plugins command %q", args[0])}
}

func storeCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("store", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "TOML config (default: embedded configs/local.toml)")
	path := fs.String("path", "", "the store file (default: from the config)")
	if len(args) == 0 || args[0] != "check" {
		return usageError{"usage: prorl-host store check [--config F | --path FILE]"}
	}
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{err.Error()}
	}
	p := *path
	if p == "" {
		cfg, err := loadConfig(*cfgPath)
		if err != nil {
			return err
		}
		p = cfg.Store.Path
	}
	b, err := store.OpenBolt(p, 1<<62)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Check(); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	un, _ := b.Unfinished()
	st := b.Stats()
	fmt.Fprintf(stdout, "%s: ok (%d results not yet acknowledged, %d rollouts unfinished, last sequence %d, %d bytes)\n", p, st.Finished, len(un), st.LastSeq, b.Size())
	return nil
}
