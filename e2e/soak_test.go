package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prorl/prorl/core/trajectory"
)

func metric(t *testing.T, e *env, name string) float64 {
	t.Helper()
	for _, l := range strings.Split(string(e.do("GET", "/metrics", nil).body), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// The chaos soak: rollouts while the simulator fails 5% of generations with
// 500 and drops 1% of connections, the plugin is killed every few seconds,
// and the backend is removed and re-added. Every rollout must be accounted
// for exactly once (completed, or failed with a reason), none stuck, and
// goroutines and heap come back to their baseline. PRORL_SOAK_N sets the
// count (make soak: 5,000).
func TestChaosSoak(t *testing.T) {
	n := 2000
	if v := os.Getenv("PRORL_SOAK_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	if testing.Short() {
		t.Skip("soak")
	}
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1", "--fail-rate", "0.05", "--drop-rate", "0.01", "--token-latency", "3ms", "--slots", "64"},
		pluginTOML: "max_restarts = 1000", backendsTOML: `idle_conn_timeout = "2s"`})
	e.startHost()
	e.addBackend()
	time.Sleep(300 * time.Millisecond)
	baseG, baseHeap := metric(t, e, "go_goroutines"), metric(t, e, "go_memstats_heap_inuse_bytes")
	rss := func() float64 { return metric(t, e, "process_resident_memory_bytes") / (1 << 20) }
	rss0 := rss()

	submitted := e.submitMath(t, n)
	// Chaos while the rollouts run.
	stop := make(chan struct{})
	chaosDone := make(chan string)
	go func() {
		kills, flaps := 0, 0
		tick := time.NewTicker(1500 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				chaosDone <- fmt.Sprintf("%d plugin kills, %d backend remove/re-add", kills, flaps)
				return
			case <-tick.C:
			}
			if i%2 == 0 {
				if pid := e.domain(t).PID; pid > 0 && syscall.Kill(pid, syscall.SIGKILL) == nil {
					kills++
				}
			} else {
				var bs struct {
					Backends []struct{ ID string } `json:"backends"`
				}
				e.do("GET", "/v1/backends", nil).json(t, &bs)
				for _, b := range bs.Backends {
					e.do("DELETE", "/v1/backends/"+b.ID, nil)
				}
				time.Sleep(200 * time.Millisecond)
				e.do("POST", "/v1/backends", map[string]any{"url": e.sim})
				flaps++
			}
		}
	}()
	rssPeak := rss0
	got := map[string]*trajectory.Result{}
	byStatus, byReason := map[string]int{}, map[string]int{}
	var since uint64
	deadline := time.Now().Add(5 * time.Minute)
	for len(got) < n {
		if time.Now().After(deadline) {
			close(stop)
			<-chaosDone
			var l struct {
				Rollouts []map[string]any `json:"rollouts"`
			}
			e.do("GET", "/v1/rollouts", nil).json(t, &l)
			t.Fatalf("stuck: %d of %d accounted for; live: %v", len(got), n, l.Rollouts[:min(5, len(l.Rollouts))])
		}
		var page struct {
			Results   []*trajectory.Result `json:"results"`
			NextSince uint64               `json:"next_since"`
		}
		e.do("GET", fmt.Sprintf("/v1/results?since=%d&wait=2s&limit=5000", since), nil).json(t, &page)
		since = page.NextSince
		var ack []string
		for _, r := range page.Results {
			if got[r.ID] != nil {
				t.Fatalf("%s reported twice", r.ID)
			}
			if !submitted[r.ID] {
				t.Fatalf("unknown rollout %s", r.ID)
			}
			got[r.ID] = &trajectory.Result{Status: r.Status, Failure: r.Failure}
			byStatus[string(r.Status)]++
			if r.Status != trajectory.StatusCompleted {
				if r.Failure == nil || r.Failure.Reason == "" {
					t.Fatalf("%s %s without a reason", r.ID, r.Status)
				}
				byReason[r.Failure.Reason]++
			}
			ack = append(ack, r.ID)
		}
		if len(ack) > 0 {
			e.do("POST", "/v1/results/ack", map[string]any{"ids": ack})
		}
		rssPeak = max(rssPeak, rss())
	}
	close(stop)
	chaos := <-chaosDone
	// Back to baseline once idle.
	var g, heap float64
	settle := time.Now().Add(30 * time.Second)
	for {
		e.do("POST", "/v1/backends", map[string]any{"url": e.sim})
		g, heap = metric(t, e, "go_goroutines"), metric(t, e, "go_memstats_heap_inuse_bytes")
		if g <= baseG+20 || time.Now().After(settle) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if g > baseG+20 {
		t.Errorf("goroutines %v after the soak, %v before", g, baseG)
	}
	// The heap is reported, not asserted: an idle host collects no garbage for
	// up to two minutes, so heap in use right after a burst says nothing of leaks.
	// Math keeps no per-process state: calls that met a killed plugin are
	// retried on its successor, so a plugin crash costs no rollout.
	if byReason["plugin_crashed"] > 0 {
		t.Errorf("%d rollouts failed plugin_crashed in a domain without per-process state", byReason["plugin_crashed"])
	}
	if c := byStatus["completed"]; float64(c) < 0.99*float64(n) {
		t.Errorf("%d of %d completed, goal 99%%", c, n)
	}
	// Say what an internal failure was, from the host's own log.
	if byReason["internal"] > 0 {
		for _, l := range strings.Split(e.hostP.stderr.String(), "\n") {
			if strings.Contains(l, "reason=internal") {
				t.Logf("internal: %s", l)
			}
		}
	}
	t.Logf("soak of %d: %v; failures by reason %v; chaos: %s; RSS %.0f MiB before, %.0f peak, %.0f after; heap in use %.0f -> %.0f MiB; goroutines %v -> %v",
		n, byStatus, byReason, chaos, rss0, rssPeak, rss(), baseHeap/(1<<20), heap/(1<<20), baseG, g)
}
