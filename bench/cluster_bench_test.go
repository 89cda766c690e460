package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BenchmarkCluster: throughput through one coordinator with 1, 2 and 4
// nodes, each node a host process with its own SIMULATOR backend (fixed
// per-token latency, a fixed number of slots), all on this machine; and
// the coordinator's CPU per rollout and memory per rollout in flight.
//
// Env: PRORL_BENCH_CLUSTER_PER_NODE rollouts per node (default 192),
// PRORL_BENCH_CLUSTER_LATENCY per-token latency (default 4ms),
// PRORL_BENCH_CLUSTER_SLOTS slots per node (default 16);
// PRORL_BENCH_CPUPROFILE profiles the coordinator of the 4-node run.
func BenchmarkCluster(b *testing.B) {
	dir := binDir(b)
	perNode := envInt("PRORL_BENCH_CLUSTER_PER_NODE", 192)
	slots := envInt("PRORL_BENCH_CLUSTER_SLOTS", 16)
	latency := os.Getenv("PRORL_BENCH_CLUSTER_LATENCY")
	if latency == "" {
		latency = "4ms"
	}
	ans := answers(b)
	var base float64
	for _, nodes := range []int{1, 2, 4} {
		tmp := b.TempDir()
		coordCfg := filepath.Join(tmp, "coord.toml")
		writeFile(b, coordCfg, clusterConfig(dir, tmp, "coord", "", ""))
		args := []string{"coordinate", "--config", coordCfg}
		prof := os.Getenv("PRORL_BENCH_CPUPROFILE")
		if prof != "" && nodes == 4 {
			args = append(args, "--cpuprofile", prof)
		}
		co := spawn(b, dir, "prorl-host", args...)
		for i := range nodes {
			sim := spawn(b, dir, "prorl-simllm", "--listen", "127.0.0.1:0", "--answers", ans, "--correct-rate", "1",
				"--token-latency", latency, "--slots", strconv.Itoa(slots))
			id := fmt.Sprintf("n%d", i)
			cfg := filepath.Join(tmp, id+".toml")
			writeFile(b, cfg, clusterConfig(dir, tmp, id, fmt.Sprintf("coordinator = %q\nnode_id = %q\n", co.addr, id),
				fmt.Sprintf("[[backends.static]]\nurl = %q\n", sim.addr)))
			spawn(b, dir, "prorl-host", "serve", "--config", cfg)
		}
		waitLive(b, co.addr, nodes)
		n := perNode * nodes
		// Warm up (plugins, connections), then measure.
		submit(b, co.addr, 8*nodes)
		_, since := collect(b, co.addr, 0, 8*nodes)
		cpu0 := cpuSeconds(co.cmd.Process.Pid)
		t0 := time.Now()
		submit(b, co.addr, n)
		peakRSS, inflight := 0.0, n
		rssBase := rssKiB(co.cmd.Process.Pid)
		rs, _ := collect(b, co.addr, since, n)
		el := time.Since(t0).Seconds()
		peakRSS = max(peakRSS, rssKiB(co.cmd.Process.Pid))
		cpu := cpuSeconds(co.cmd.Process.Pid) - cpu0
		ok := 0
		for _, r := range rs {
			if r.Status == "completed" {
				ok++
			} else if ok == 0 && os.Getenv("PRORL_BENCH_DEBUG") != "" {
				b.Logf("%s: %s %+v", r.ID, r.Status, r.Failure)
			}
		}
		tput := float64(n) / el
		if nodes == 1 {
			base = tput
		}
		if prof != "" && nodes == 4 {
			_ = co.cmd.Process.Signal(os.Interrupt) // writes the profile
			time.Sleep(2 * time.Second)
		}
		b.Logf("cluster %d node(s): %d rollouts in %.1f s = %.1f rollouts/s (%.2f× one node; goal ≥ %.1f×), %d completed; coordinator CPU %.0f µs/rollout, RSS %.0f MiB (%.1f KiB per rollout in flight, %d submitted at once)",
			nodes, n, el, tput, tput/base, 0.9*float64(nodes), ok, cpu/float64(n)*1e6, peakRSS/1024, max(0, peakRSS-rssBase)/float64(inflight), n)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func writeFile(b *testing.B, path, s string) {
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		b.Fatal(err)
	}
}

func clusterConfig(dir, tmp, name, cluster, backends string) string {
	return fmt.Sprintf(`[server]
listen = "127.0.0.1:0"
max_batch = 20000
[store]
path = %q
[pipeline]
run_workers = 256
run_queue = 20000
eval_queue = 20000
[cluster]
heartbeat_interval = "500ms"
dead_after = "10s"
%s
[backends]
wait_for_backend = "60s"
%s
[log]
level = "warn"
[plugins.math]
enabled = true
path = %q
[plugins.math.config]
max_turns = 16
`, filepath.Join(tmp, name+".db"), cluster, backends, filepath.Join(dir, "plugins/prorl-math"))
}

func waitLive(b *testing.B, coord string, n int) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		var nl struct {
			Nodes []struct {
				State string `json:"state"`
			} `json:"nodes"`
		}
		call(b, "GET", coord+"/v1/nodes", nil, &nl)
		live := 0
		for _, x := range nl.Nodes {
			if x.State == "live" {
				live++
			}
		}
		if live == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d nodes live", live, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
