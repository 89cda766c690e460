// Package bench measures the figures the issues ask for, over real processes:
// the prorl-host binary with its math plugin, against the prorl-simllm
// SIMULATOR with zero latency. Run with `make bench` (binaries from bin/).
package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	fastjson "github.com/goccy/go-json"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/trajectory"
)

func binDir(b *testing.B) string {
	d := os.Getenv("PRORL_BIN")
	if d == "" {
		d = "../bin"
	}
	d, _ = filepath.Abs(d)
	if _, err := os.Stat(filepath.Join(d, "prorl-host")); err != nil {
		b.Skipf("no binaries in %s: run make build", d)
	}
	return d
}

type proc struct {
	cmd  *exec.Cmd
	addr string
}

func spawn(b *testing.B, dir, name string, args ...string) *proc {
	b.Helper()
	return spawnArgv(b, name, append([]string{filepath.Join(dir, name)}, args...))
}

// spawnArgv starts argv (a wrapper such as taskset may come first), adds
// --addr-file, and waits for the address the process writes there.
func spawnArgv(b *testing.B, name string, argv []string) *proc {
	b.Helper()
	af := filepath.Join(b.TempDir(), name+".addr")
	cmd := exec.Command(argv[0], append(argv[1:], "--addr-file", af)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		// Stopped as an operator would, so a host removes its run
		// directory; killed if it has not stopped within 10 s.
		waited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(waited) }()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
	})
	for i := 0; i < 3000; i++ {
		if a, err := os.ReadFile(af); err == nil && len(a) > 0 {
			addr := string(a)
			if !strings.HasPrefix(addr, "unix:") { // a Unix socket's address is already a URL
				addr = "http://" + addr
			}
			return &proc{cmd: cmd, addr: addr}
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("%s did not start: %s", name, errb.String())
	return nil
}

func call(b *testing.B, method, url string, in, out any) {
	b.Helper()
	var body io.Reader
	if in != nil {
		j, _ := json.Marshal(in)
		body = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, url, body)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		b.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, data)
	}
	if out != nil {
		// A trainer decodes with whatever is fastest; so does this client.
		if err := fastjson.Unmarshal(data, out); err != nil {
			b.Fatal(err)
		}
	}
}

func hostConfig(b *testing.B, dir string) string { return hostConfigStore(b, dir, "bbolt") }

func hostConfigStore(b *testing.B, dir, storeDriver string) string {
	cfg := fmt.Sprintf(`[store]
driver = %q
[server]
listen = "127.0.0.1:0"
data_dir = %q
max_batch = 20000
[pipeline]
init_workers = 64
run_workers = 1200
eval_workers = 64
run_queue = 20000
eval_queue = 20000
[backends]
wait_for_backend = "60s"
[log]
level = "warn"
[plugins.math]
enabled = true
path = %q
[plugins.math.config]
max_turns = 16
`, storeDriver, b.TempDir(), filepath.Join(dir, "plugins/prorl-math"))
	p := filepath.Join(b.TempDir(), "bench.toml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	return p
}

// Distinct tasks, so nothing keyed on content (a cache, a prefix) can flatter a figure.
const nTasks = 20000

func questionOf(i int) string { return fmt.Sprintf("What is %d + 25?", i) }

func answers(b *testing.B) string {
	p := filepath.Join(b.TempDir(), "answers.jsonl")
	var buf bytes.Buffer
	for i := 0; i < nTasks; i++ {
		fmt.Fprintf(&buf, `{"question":%q,"answer":"%d"}`+"\n", questionOf(i), i+25)
	}
	_ = os.WriteFile(p, buf.Bytes(), 0o644)
	return p
}

var taskSeq int

// submit sends n single-sample rollouts in batches and returns their ids.
func submit(b *testing.B, host string, n int) []string { return submitGroups(b, host, n, 1) }

// submitGroups submits n rollouts in groups of size (a GRPO step's shape:
// each task sampled size times).
func submitGroups(b *testing.B, host string, n, size int) []string {
	var ids []string
	for left := n; left > 0; {
		k := min(left, 5000)
		reqs := make([]any, k/size)
		for i := range reqs {
			j := taskSeq % nTasks
			taskSeq++
			reqs[i] = map[string]any{"task": map[string]any{"domain": "math", "question": questionOf(j), "answer": strconv.Itoa(j + 25)}, "n": size}
		}
		var resp struct {
			Groups []struct {
				RolloutIDs []string `json:"rollout_ids"`
			} `json:"groups"`
		}
		call(b, "POST", host+"/v1/rollouts:batch", map[string]any{"requests": reqs}, &resp)
		for _, g := range resp.Groups {
			ids = append(ids, g.RolloutIDs...)
		}
		left -= k
	}
	return ids
}

// collect waits for n results after since, acknowledging them.
func collect(b *testing.B, host string, since uint64, n int) ([]*trajectory.Result, uint64) {
	var out []*trajectory.Result
	deadline := time.Now().Add(10 * time.Minute)
	for len(out) < n {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d results", len(out), n)
		}
		var page struct {
			Results   []*trajectory.Result `json:"results"`
			NextSince uint64               `json:"next_since"`
		}
		call(b, "GET", fmt.Sprintf("%s/v1/results?since=%d&wait=10s&limit=10000", host, since), nil, &page)
		since = page.NextSince
		ids := make([]string, 0, len(page.Results))
		for _, r := range page.Results {
			ids = append(ids, r.ID)
			// Keep what the figures need; drop token arrays to keep the benchmark's own memory small.
			r.Tokens, r.Messages, r.Tools = trajectory.Tokens{}, nil, nil
			out = append(out, r)
		}
		if len(ids) > 0 {
			call(b, "POST", host+"/v1/results/ack", map[string]any{"ids": ids}, nil)
		}
	}
	return out, since
}

func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func rssKiB(pid int) float64 {
	var kib float64
	procFields(fmt.Sprintf("/proc/%d/status", pid), map[string]*float64{"VmRSS": &kib})
	return kib
}

// procFields adds to each of into's numbers the value of its key in a
// /proc file of "key: value [unit]" lines (status, io).
func procFields(path string, into map[string]*float64) {
	b, _ := os.ReadFile(path)
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		if p, f := into[k], strings.Fields(v); p != nil && len(f) > 0 {
			n, _ := strconv.ParseFloat(f[0], 64)
			*p += n
		}
	}
}

// cpuSeconds is a process's user+system CPU time from /proc.
func cpuSeconds(pid int) float64 {
	user, sys := cpuModes(pid)
	return user + sys
}

// cpuModes is a process's CPU seconds in user and in kernel mode.
func cpuModes(pid int) (user, sys float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	kt, _ := strconv.ParseFloat(f[12], 64)
	return ut / 100, kt / 100 // USER_HZ
}

// procStat is what /proc says a process has used: CPU seconds in user and
// kernel mode, read and write system calls, and its threads' voluntary
// (blocked) and involuntary context switches. Calls and switches, unlike
// CPU time, do not swing with this VM's speed.
type procStat struct{ user, sys, reads, writes, waits, preempts float64 }

func readProc(pid int) procStat {
	var st procStat
	st.user, st.sys = cpuModes(pid)
	procFields(fmt.Sprintf("/proc/%d/io", pid), map[string]*float64{"syscr": &st.reads, "syscw": &st.writes})
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	for _, t := range tasks {
		procFields(t, map[string]*float64{"voluntary_ctxt_switches": &st.waits, "nonvoluntary_ctxt_switches": &st.preempts})
	}
	return st
}

// childPID finds the first child of pid (the host's plugin process), which
// any of the host's threads may have started.
func childPID(pid int) int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			return n
		}
	}
	return 0
}

func heapBytes(b *testing.B, host string) float64 {
	return hostMetrics(b, host, "go_memstats_heap_inuse_bytes")[0]
}

// hostMetrics are unlabelled metrics' values on the host's /metrics, read
// in one scrape (0 for one not there).
func hostMetrics(b *testing.B, host string, names ...string) []float64 {
	resp, err := http.Get(host + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	out := make([]float64, len(names))
	for _, l := range strings.Split(string(data), "\n") {
		for i, name := range names {
			if v, ok := strings.CutPrefix(l, name+" "); ok {
				out[i], _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	return out
}

// allocMetrics are the host's bytes and objects allocated so far.
var allocMetrics = []string{"go_memstats_alloc_bytes_total", "go_memstats_mallocs_total"}

type row struct {
	name, measured, target string
	ok                     bool
}

func BenchmarkRollouts(b *testing.B) {
	dir := binDir(b)
	ans := answers(b)
	var rows []row

	// 1. Per-turn host overhead at 1,000 concurrent rollouts of 4 turns each.
	{
		sim := spawn(b, dir, "prorl-simllm", "--listen", "127.0.0.1:0", "--answers", ans, "--correct-rate", "1", "--think-turns", "3")
		host := spawn(b, dir, "prorl-host", "serve", "--config", hostConfig(b, dir))
		call(b, "POST", host.addr+"/v1/backends", map[string]any{"url": sim.addr}, nil)
		collect(b, host.addr, 0, len(submit(b, host.addr, 200))) // warm up
		var since uint64 = 200
		ids := submit(b, host.addr, 1000)
		rs, _ := collect(b, host.addr, since, len(ids))
		var ovh []float64
		for _, r := range rs {
			if r.Status != trajectory.StatusCompleted {
				b.Fatalf("rollout %s: %s %+v", r.ID, r.Status, r.Failure)
			}
			for _, t := range r.Turns {
				ovh = append(ovh, t.OverheadMS)
			}
		}
		p50, p99 := pct(ovh, 0.50), pct(ovh, 0.99)
		rows = append(rows,
			row{"per-turn host overhead p50, 1000 concurrent", fmt.Sprintf("%.3f ms", p50), "<= 0.5 ms", p50 <= 0.5},
			row{"per-turn host overhead p99, 1000 concurrent", fmt.Sprintf("%.3f ms", p99), "<= 5 ms", p99 <= 5})
		b.ReportMetric(p50, "overhead-p50-ms")
		b.ReportMetric(p99, "overhead-p99-ms")
		b.Logf("overhead over %d turns", len(ovh))
	}

	// 2. Single-turn rollouts per second end to end, with the durable store
	// (the default) and with the memory store, and the simulator alone as the baseline.
	modelDir := qwen3Dir()
	drivers := []string{"bbolt", "memory", "bbolt+go-tokenizer", "bbolt+groups", "bbolt+unix"}
	if only := os.Getenv("PRORL_BENCH_DRIVERS"); only != "" {
		drivers = strings.Split(only, ",") // e.g. bbolt,bbolt+groups for interleaved comparisons
	} else if os.Getenv("PRORL_BENCH_HOST_FILED") != "" {
		// make bench: the host of the day issue 19 was filed, interleaved
		// with this one (3+3 runs: one run's CPU swings by ±15% on this
		// VM); its target is half that host's CPU.
		drivers = append([]string{"bbolt@filed", "bbolt", "bbolt@filed", "bbolt", "bbolt@filed"}, drivers...)
	}
	hostUS := map[string][]float64{} // host CPU per rollout by label, in run order
	for _, label := range drivers {
		// "DRIVER@b" runs the host binary PRORL_BENCH_HOST_B instead: two
		// builds compared in one run, interleaved (the VM's speed swings).
		storeDriver, alt, _ := strings.Cut(label, "@")
		hostBin := filepath.Join(dir, "prorl-host")
		if alt != "" {
			if hostBin = os.Getenv("PRORL_BENCH_HOST_" + strings.ToUpper(alt)); hostBin == "" {
				b.Fatalf("driver %s: PRORL_BENCH_HOST_%s is not set", label, strings.ToUpper(alt))
			}
		}
		listen := "127.0.0.1:0"
		if storeDriver == "bbolt+unix" {
			// A server on this machine, on a Unix socket (vLLM's --uds).
			listen = "unix://" + filepath.Join(b.TempDir(), "sim.sock")
		}
		simArgs := []string{"--listen", listen, "--answers", ans, "--correct-rate", "1", "--think-turns", "0"}
		goTok := storeDriver == "bbolt+go-tokenizer"
		if goTok {
			if modelDir == "" {
				rows = append(rows, row{"single-turn math rollouts/s, durable store, Go tokenizer", "n/a: make models", "", true})
				continue
			}
			// The simulator and the host share Qwen3's tokenizer and template,
			// so the host renders and encodes itself: no /tokenize.
			simArgs = append(simArgs, "--model-dir", modelDir)
		}
		if p := os.Getenv("PRORL_BENCH_SIM_CPUPROFILE"); p != "" {
			simArgs = append(simArgs, "--cpuprofile", p)
		}
		sim := spawn(b, dir, "prorl-simllm", simArgs...)
		defer func() { _ = sim.cmd.Process.Signal(syscall.SIGTERM); time.Sleep(500 * time.Millisecond) }()
		groupSize := 1
		if storeDriver == "bbolt+groups" {
			groupSize = 8 // GRPO's shape: a group's rollouts share their prompt
		}
		cfgPath := hostConfigStore(b, dir, strings.Split(storeDriver, "+")[0])
		if goTok {
			appendFile(b, cfgPath, fmt.Sprintf("[tokenizer]\nmodel_dir = %q\n", modelDir))
		}
		args := []string{"serve", "--config", cfgPath}
		profDriver := cmp.Or(os.Getenv("PRORL_BENCH_CPUPROFILE_DRIVER"), "bbolt")
		if p := os.Getenv("PRORL_BENCH_CPUPROFILE"); p != "" && (label == profDriver || profDriver == "all") {
			if profDriver == "all" { // one profile a run: DRIVER@B runs compared in one VM state
				p = fmt.Sprintf("%s.%s.%d", p, strings.NewReplacer("@", "-", "+", "-").Replace(label), len(hostUS[label]))
			}
			args = append(args, "--cpuprofile", p) // written when the host stops gracefully
		}
		host := spawnArgv(b, "prorl-host", append([]string{hostBin}, args...))
		call(b, "POST", host.addr+"/v1/backends", map[string]any{"url": sim.addr}, nil)
		// PRORL_BENCH_WARMUP=N: N rollouts before the measured ones (500):
		// a fresh host's heap grows into new pages during the first
		// thousands, which a long-running host has done once.
		warm := 500
		if v, err := strconv.Atoi(os.Getenv("PRORL_BENCH_WARMUP")); err == nil && v > 0 {
			warm = v
		}
		collect(b, host.addr, 0, len(submit(b, host.addr, warm)))
		defer func() { _ = host.cmd.Process.Signal(syscall.SIGTERM); time.Sleep(time.Second) }()
		const n = 10000
		pluginPID := childPID(host.cmd.Process.Pid)
		procs := map[string]int{"host": host.cmd.Process.Pid, "math plugin": pluginPID, "simulator": sim.cmd.Process.Pid, "bench client": os.Getpid()}
		// Bytes and objects the host allocates: unlike CPU time, not
		// moved by this VM's speed, so a change's effect shows in one run.
		// Read before the CPU, so the scrape is not counted in it.
		allocs0 := hostMetrics(b, host.addr, allocMetrics...)
		proc0 := readProc(host.cmd.Process.Pid)
		cpu0 := map[string]float64{}
		for k, pid := range procs {
			cpu0[k] = cpuSeconds(pid)
		}
		start := time.Now()
		ids := submitGroups(b, host.addr, n, groupSize)
		rs, _ := collect(b, host.addr, uint64(warm), len(ids))
		el := time.Since(start)
		for _, r := range rs {
			if r.Status != trajectory.StatusCompleted || r.Reward != 1 {
				b.Fatalf("rollout %s: %s %+v", r.ID, r.Status, r.Failure)
			}
		}
		rate := float64(n) / el.Seconds()
		used := map[string]float64{}
		for _, k := range []string{"host", "math plugin", "simulator", "bench client"} {
			used[k] = cpuSeconds(procs[k]) - cpu0[k]
			rows = append(rows, row{"  CPU of " + k + " (" + label + ")", fmt.Sprintf("%.2f s (%.0f µs/rollout)", used[k], used[k]/n*1e6), "", true})
		}
		proc := readProc(host.cmd.Process.Pid)
		rows = append(rows, row{"  host user / kernel CPU, calls, switches (" + label + ")",
			fmt.Sprintf("%.0f / %.0f µs, %.1f reads %.1f writes, %.1f blocked %.1f preempted /rollout",
				(proc.user-proc0.user)/n*1e6, (proc.sys-proc0.sys)/n*1e6, (proc.reads-proc0.reads)/n,
				(proc.writes-proc0.writes)/n, (proc.waits-proc0.waits)/n, (proc.preempts-proc0.preempts)/n), "", true})
		allocs := hostMetrics(b, host.addr, allocMetrics...)
		alloc, mallocs := allocs[0]-allocs0[0], allocs[1]-allocs0[1]
		rows = append(rows, row{"  host allocations (" + label + ")", fmt.Sprintf("%.1f KiB, %.0f objects /rollout", alloc/n/1024, mallocs/n), "", true})
		hostUS[label] = append(hostUS[label], used["host"]/n*1e6)
		// The simulator's CPU for the same calls is the yardstick: this
		// VM's speed swings by half from run to run, the ratio much less.
		rows = append(rows, row{"  host CPU / simulator CPU (" + label + ")", fmt.Sprintf("%.2f", used["host"]/used["simulator"]), "", true})
		name := map[string]string{"bbolt": "single-turn math rollouts/s, end to end, durable store",
			"memory":             "single-turn math rollouts/s, end to end, memory store",
			"bbolt+go-tokenizer": "single-turn math rollouts/s, durable store, Go tokenizer",
			"bbolt+groups":       "single-turn math rollouts/s, durable store, groups of 8",
			"bbolt+unix":         "single-turn math rollouts/s, durable store, Unix socket"}[storeDriver]
		if alt != "" {
			name += " @" + alt
		}
		rows = append(rows, row{name, fmt.Sprintf("%.0f /s", rate), ">= 2000 /s", rate >= 2000})
		b.ReportMetric(rate, label+"-rollouts/s")
		if label != "bbolt" || len(hostUS[label]) > 1 {
			continue
		}
		// Baseline: the call one rollout makes to the simulator, made directly.
		base := simBaseline(b, sim.addr, 4000)
		rows = append(rows, row{"  baseline: simulator alone, chat exchanges/s", fmt.Sprintf("%.0f /s (host at %.2fx)", base, rate/base), "", true})
	}

	rows = append(rows, buildRatios(hostUS)...)

	// 3. Host memory per in-flight rollout: rollouts held in the run stage by a slow simulator.
	{
		sim := spawn(b, dir, "prorl-simllm", "--listen", "127.0.0.1:0", "--answers", ans, "--correct-rate", "1", "--think-turns", "0", "--token-latency", "2s")
		host := spawn(b, dir, "prorl-host", "serve", "--config", hostConfig(b, dir))
		call(b, "POST", host.addr+"/v1/backends", map[string]any{"url": sim.addr}, nil)
		time.Sleep(300 * time.Millisecond)
		rss0, heap0 := rssKiB(host.cmd.Process.Pid), heapBytes(b, host.addr)
		const n = 1000
		submit(b, host.addr, n)
		deadline := time.Now().Add(2 * time.Minute)
		for {
			var l struct {
				Rollouts []json.RawMessage `json:"rollouts"`
			}
			call(b, "GET", host.addr+"/v1/rollouts?status=running&stage=run", nil, &l)
			if len(l.Rollouts) >= n {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("only %d rollouts in flight", len(l.Rollouts))
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		rss1, heap1 := rssKiB(host.cmd.Process.Pid), heapBytes(b, host.addr)
		per := (rss1 - rss0) / n
		rows = append(rows, row{"host memory per in-flight rollout (RSS)", fmt.Sprintf("%.1f KiB", per), "<= 100 KiB", per <= 100},
			row{"  of which Go heap in use", fmt.Sprintf("%.1f KiB", (heap1-heap0)/1024/n), "", true})
		b.ReportMetric(per, "KiB/rollout")
		call(b, "POST", host.addr+"/v1/rollouts:cancel", map[string]any{"all": true}, nil)
	}

	// 4. Plugin RPC round trip over go-plugin gRPC with mTLS to the real math plugin.
	{
		m, err := pluginhost.Start(context.Background(), hclog.NewNullLogger(), map[string]*config.Plugin{"math": {Enabled: true,
			Path: filepath.Join(dir, "plugins/prorl-math"), StartTimeout: config.Duration{Duration: 20 * time.Second}, MaxRestarts: 1, RestartWindow: config.Duration{Duration: time.Minute}}},
			nil, pluginhost.Options{Instance: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Stop()
		p, _ := m.Get("math")
		c, _ := p.Acquire(context.Background())
		var lat []float64
		for i := 0; i < 5000; i++ {
			t0 := time.Now()
			if _, err := c.CallTool(context.Background(), "r", []byte(`{"question":"q","answer":"1"}`), "", "", "think", []byte(`{"thought":"x"}`)); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, float64(time.Since(t0).Microseconds()))
		}
		p50 := pct(lat[500:], 0.5)
		rows = append(rows, row{"plugin RPC round trip p50 (CallTool think)", fmt.Sprintf("%.0f µs", p50), "<= 300 µs", p50 <= 300},
			row{"plugin RPC round trip p99", fmt.Sprintf("%.0f µs", pct(lat[500:], 0.99)), "", true})
		b.ReportMetric(p50, "plugin-rpc-p50-us")
	}

	printTable("Rollouts: host overhead, throughput, memory, plugin RPC (2 cores; simulator with zero latency unless noted)", rows)
}

// buildRatios compares, per "DRIVER@X" label, that build's host CPU with
// this build's on the same driver, both measured in this run: the mean of
// each over the mean of the other. Against the build issue 19 was filed
// on (@filed) the target is half.
func buildRatios(hostUS map[string][]float64) []row {
	var rows []row
	for _, label := range slices.Sorted(maps.Keys(hostUS)) {
		driver, alt, ok := strings.Cut(label, "@")
		if !ok || len(hostUS[driver]) == 0 {
			continue
		}
		this, other := mean(hostUS[driver]), mean(hostUS[label])
		r := row{fmt.Sprintf("host CPU, this build / @%s (%s)", alt, driver),
			fmt.Sprintf("%.2f (%.0f / %.0f µs, %d+%d runs)", this/other, this, other, len(hostUS[driver]), len(hostUS[label])), "", true}
		if alt == "filed" {
			r.target, r.ok = "<= 0.50", this/other <= 0.5
		}
		rows = append(rows, r)
	}
	return rows
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// printTable prints figures against their targets.
func printTable(title string, rows []row) {
	fmt.Printf("\n%s\n%-56s %-34s %-12s %s\n", title, "figure", "measured", "target", "")
	for _, r := range rows {
		mark := "ok"
		if !r.ok {
			mark = "MISSED"
		}
		if r.target == "" {
			mark = ""
		}
		fmt.Printf("%-56s %-34s %-12s %s\n", r.name, r.measured, r.target, mark)
	}
}

// simBaseline is the rate of the simulator calls one single-turn rollout
// makes (alone, it renders and generates in one /v1/chat/completions
// exchange), made directly with 64 clients.
func simBaseline(b *testing.B, sim string, n int) float64 {
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "finish", "description": "Give the final answer.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}}}}}
	chat, _ := json.Marshal(map[string]any{"messages": []any{map[string]string{"role": "system", "content": "You are a careful mathematician."},
		map[string]string{"role": "user", "content": questionOf(1)}}, "tools": tools, "tool_choice": "none", "max_tokens": 512,
		"logprobs": true, "return_token_ids": true})
	start := time.Now()
	work := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		work <- struct{}{}
	}
	close(work)
	done := make(chan struct{})
	for w := 0; w < 64; w++ {
		go func() {
			for range work {
				resp, err := http.Post(sim+"/v1/chat/completions", "application/json", bytes.NewReader(chat))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
			done <- struct{}{}
		}()
	}
	for w := 0; w < 64; w++ {
		<-done
	}
	return float64(n) / time.Since(start).Seconds()
}

// qwen3Dir is the reference Qwen3 model directory `make models` lays out, or "".
func qwen3Dir() string {
	home, _ := os.UserHomeDir()
	d := filepath.Join(home, ".cache", "prorl", "models", "qwen3")
	if _, err := os.Stat(filepath.Join(d, "tokenizer.json")); err != nil {
		return ""
	}
	return d
}

func appendFile(b *testing.B, path, text string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		b.Fatal(err)
	}
}
