package bench

import (
	"bufio"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkDashboard: the dashboard's data with thousands of rollouts in
// flight (generation paused, so they all stay live): latency of a page of
// the rollouts table and of an overview snapshot, and the live stream's
// rate. PRORL_BENCH_UI_INFLIGHT sets how many (default 5000).
func BenchmarkDashboard(b *testing.B) {
	dir := binDir(b)
	n := envInt("PRORL_BENCH_UI_INFLIGHT", 5000)
	sim := spawn(b, dir, "prorl-simllm", "--listen", "127.0.0.1:0", "--answers", answers(b))
	cfg := hostConfig(b, dir)
	host := spawn(b, dir, "prorl-host", "serve", "--config", cfg, "--backend", sim.addr)
	call(b, "POST", host.addr+"/v1/policy:pause", map[string]any{"mode": "drain"}, nil)
	submit(b, host.addr, n)
	// Every rollout is admitted and waiting on generation.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		var o struct {
			Stages struct {
				Total int `json:"total"`
			} `json:"stages"`
		}
		call(b, "GET", host.addr+"/v1/ui/overview", nil, &o)
		if o.Stages.Total >= n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d in flight", o.Stages.Total, n)
		}
	}
	lat := func(path string) (p50, p99 float64) {
		var xs []float64
		for range 50 {
			t0 := time.Now()
			call(b, "GET", host.addr+path, nil, nil)
			xs = append(xs, float64(time.Since(t0).Microseconds())/1000)
		}
		sort.Float64s(xs)
		return xs[len(xs)/2], xs[len(xs)*99/100]
	}
	r50, r99 := lat("/v1/ui/rollouts?limit=200")
	o50, o99 := lat("/v1/ui/overview")
	// The stream: events in 5 s.
	resp, err := http.Get(host.addr + "/v1/ui/stream")
	if err != nil {
		b.Fatal(err)
	}
	events := 0
	done := time.After(5 * time.Second)
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
loop:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				break loop
			}
			if strings.HasPrefix(l, "event: overview") {
				events++
			}
		case <-done:
			break loop
		}
	}
	resp.Body.Close()
	b.Logf("dashboard with %d rollouts in flight: rollouts page (200 rows) p50 %.1f ms p99 %.1f ms; overview p50 %.1f ms p99 %.1f ms; stream %d events in 5 s (one a second per viewer)",
		n, r50, r99, o50, o99, events)
	call(b, "POST", host.addr+"/v1/policy:resume", map[string]any{}, nil)
}
