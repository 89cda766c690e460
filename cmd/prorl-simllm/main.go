// Command prorl-simllm is a SIMULATOR of a vLLM inference server for tests,
// benchmarks and `make run`: vLLM's endpoints and field names, a scripted
// policy instead of a model. Never use it to train anything.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/prorl/prorl/core/baseurl"
	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/internal/profiling"
	"github.com/prorl/prorl/internal/simllm"
	"github.com/prorl/prorl/internal/simllm/taskscripts"
)

func main() {
	if os.Getenv("GOGC") == "" {
		// A test tool sharing the machine with the host it serves: memory
		// for CPU. At the default each collection shrank the connections'
		// stacks, regrown at the next answer (copystack 8% of its CPU).
		debug.SetGCPercent(400)
	}
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "prorl-simllm:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prorl-simllm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8100", "address to listen on (loopback), or unix:///path/to/socket (as vLLM's --uds)")
	model := fs.String("model", "prorl-sim", "model name served")
	scripts := fs.String("scripts", "", "JSONL scripts: per task, the tool calls to make and the final answer (right, and wrong)")
	answers := fs.String("answers", "", "JSONL task rows ({question, answer} and the bundled examples' shapes) to script from their answers")
	correct := fs.Float64("correct-rate", 0.5, "share of rollouts playing a script's right way")
	think := fs.Int("think-turns", 1, "with --answers: think tool calls before the answer")
	python := fs.Int("python-turns", 0, "with --answers: python tool calls (printing the answer) before thinking")
	malformed := fs.Float64("malformed-rate", 0, "share of turns with a malformed tool call")
	plain := fs.Float64("plain-rate", 0, "share of answers given as text without the finish tool")
	latency := fs.Duration("token-latency", 0, "time per generated token")
	slots := fs.Int("slots", 0, "concurrent generations (0: unbounded)")
	maxLen := fs.Int("max-model-len", 32768, "context length")
	failRate := fs.Float64("fail-rate", 0, "share of generations answered with HTTP 500")
	dropRate := fs.Float64("drop-rate", 0, "share of generations whose connection is dropped")
	logPath := fs.String("log", "", "write every request and response as JSON lines to this file")
	addrFile := fs.String("addr-file", "", "write the bound address here once listening")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile here until shutdown")
	engine := fs.Bool("engine", false, "time generations by the batching-engine model (continuous batching, prefill, prefix cache; see simllm.EngineModel) instead of --token-latency/--slots")
	engSlots := fs.Int("engine-slots", simllm.DefaultEngine().Slots, "with --engine: sequences batched at once (vLLM max_num_seqs)")
	engSpeed := fs.Float64("engine-speed", 1, "with --engine: speed relative to the calibrated GPU (0.5: half as fast)")
	engCache := fs.Int("engine-cache-tokens", simllm.DefaultEngine().CacheTokens, "with --engine: prefix cache capacity in tokens")
	engScale := fs.Float64("engine-time-scale", 1, "with --engine: wall time per simulated time (0.05: twenty times faster)")
	engPriority := fs.Bool("engine-priority", false, "with --engine: admit by request priority (vLLM --scheduling-policy priority)")
	modelDir := fs.String("model-dir", "", "a Hugging Face model directory whose tokenizer and ChatML chat template replace the simulator's own")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opt := simllm.Options{Model: *model, MaxModelLen: *maxLen, CorrectRate: *correct,
		MalformedRate: *malformed, PlainRate: *plain, TokenLatency: *latency, Slots: *slots, FailRate: *failRate, DropRate: *dropRate}
	if *engine {
		m := simllm.DefaultEngine()
		m.Slots, m.Speed, m.CacheTokens, m.TimeScale, m.Priority = *engSlots, *engSpeed, *engCache, *engScale, *engPriority
		opt.Engine = &m
	}
	if *modelDir != "" {
		l, err := tokenizer.LoadDir(*modelDir, tokenizer.LocalOptions{})
		if err != nil {
			return err
		}
		opt.Local = l
	}
	if *scripts != "" {
		sc, err := simllm.LoadScripts(*scripts)
		if err != nil {
			return err
		}
		opt.Scripts = append(opt.Scripts, sc...)
	}
	if *answers != "" {
		sc, err := taskscripts.Load(*answers, taskscripts.Options{ThinkTurns: *think, PythonTurns: *python})
		if err != nil {
			return err
		}
		opt.Scripts = append(opt.Scripts, sc...)
	}
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			return err
		}
		defer f.Close()
		opt.Log = f
	}
	stopProfile, err := profiling.Start(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	s := simllm.New(opt)
	defer s.Flush()
	ln, addr, err := listenOn(*listen)
	if err != nil {
		return err
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(addr), 0o644); err != nil {
			return err
		}
	}
	shown := "http://" + addr
	if strings.HasPrefix(addr, "unix:") {
		shown = addr
	}
	fmt.Fprintf(stdout, "prorl-simllm (a SIMULATOR, not a model) serving %q on %s\n", *model, shown)
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// listenOn listens on a TCP address, or on a Unix socket given as
// unix:///path; addr is the host:port bound, or unix:///path.
func listenOn(listen string) (ln net.Listener, addr string, err error) {
	if !strings.HasPrefix(listen, "unix:") {
		ln, err = net.Listen("tcp", listen)
		if err != nil {
			return nil, "", err
		}
		return ln, ln.Addr().String(), nil
	}
	srv, err := baseurl.Parse(listen)
	if err != nil {
		return nil, "", fmt.Errorf("--listen: %w", err)
	}
	// A socket a stopped simulator left behind is taken over; a file of
	// any other kind is not removed.
	if fi, err := os.Lstat(srv.Socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(srv.Socket)
	}
	ln, err = net.Listen("unix", srv.Socket)
	if err != nil {
		return nil, "", err
	}
	return ln, srv.Display, nil
}
