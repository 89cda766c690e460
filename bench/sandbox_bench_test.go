package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/sandbox"
)

func BenchmarkSandboxes(b *testing.B) {
	dir := binDir(b)
	if _, err := exec.LookPath("bwrap"); err != nil {
		b.Skip("bubblewrap not installed")
	}
	root, _ := os.MkdirTemp("", "bench-sandboxes")
	_ = os.Chmod(root, 0o755)
	defer os.RemoveAll(root)
	m, err := sandbox.New(sandbox.Config{Driver: "bwrap", WorkRoot: root, Agent: filepath.Join(dir, "prorl-sandbox-agent"), MaxStarting: 64, MaxStartingPerImage: 64,
		Limits: sandbox.Limits{MemoryBytes: 1 << 30, MaxProcesses: 256, MaxOutputBytes: 1 << 20}}, hclog.NewNullLogger())
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	var rows []row

	// 1. bwrap sandbox start: until the agent inside answers.
	{
		var lat []float64
		for i := 0; i < 60; i++ {
			t0 := time.Now()
			s, err := m.Start(ctx, "bench", sandbox.Spec{})
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
			_ = m.Stop(s.ID)
		}
		p50 := pct(lat[10:], 0.5)
		rows = append(rows, row{"bwrap sandbox start p50 (until the agent answers)", fmt.Sprintf("%.1f ms", p50), "<= 15 ms", p50 <= 15},
			row{"  bwrap sandbox start p99", fmt.Sprintf("%.1f ms", pct(lat[10:], 0.99)), "", true})
		b.ReportMetric(p50, "bwrap-start-p50-ms")
	}

	// 2. A bash tool call (echo): host -> plugin process (gRPC, mTLS) -> host
	// services over the broker -> agent -> persistent bash, and back.
	{
		plugin := filepath.Join(b.TempDir(), "toolsplugin")
		if out, err := exec.Command("go", "build", "-o", plugin, "./toolsplugin").CombinedOutput(); err != nil {
			b.Fatalf("%v %s", err, out)
		}
		pm, err := pluginhost.Start(ctx, hclog.NewNullLogger(), map[string]*config.Plugin{"tools": {Enabled: true, Path: plugin,
			StartTimeout: config.Duration{Duration: 20 * time.Second}, MaxRestarts: 1, RestartWindow: config.Duration{Duration: time.Minute}}},
			&sandbox.PluginServices{M: m, DefaultTimeout: 10 * time.Second}, pluginhost.Options{Instance: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		defer pm.Stop()
		p, _ := pm.Get("tools")
		c, _ := p.Acquire(ctx)
		res := m.Reserve("bench-bash", sandbox.Spec{})
		defer res.Release()
		var lat []float64
		for i := 0; i < 2000; i++ {
			t0 := time.Now()
			r, err := c.CallTool(ctx, "bench-bash", nil, res.ID, "", "bash", []byte(`{"command":"echo hello"}`))
			if err != nil || len(r.Diagnostics) > 0 || r.Output != "hello\n[Command finished with exit code 0]" {
				b.Fatalf("%v %v", err, r)
			}
			lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
		}
		p50, p99 := pct(lat[100:], 0.5), pct(lat[100:], 0.99)
		rows = append(rows, row{"bash tool call (echo) via plugin + host services p50", fmt.Sprintf("%.2f ms", p50), "<= 3 ms", p50 <= 3},
			row{"bash tool call (echo) via plugin + host services p99", fmt.Sprintf("%.2f ms", p99), "<= 20 ms", p99 <= 20},
			row{"  ProRL server's bash action, for comparison", "420 ms", "", true})
		b.ReportMetric(p50, "bash-call-p50-ms")
		b.ReportMetric(p99, "bash-call-p99-ms")
	}

	// 3. 64 sandboxes at once, 100 commands each.
	{
		const nBox, nCmd = 64, 100
		var wg sync.WaitGroup
		var mu sync.Mutex
		failures := 0
		var firstErr error
		t0 := time.Now()
		for i := 0; i < nBox; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fail := func(err error) {
					mu.Lock()
					failures++
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
				s, err := m.Start(ctx, fmt.Sprintf("box-%d", i), sandbox.Spec{})
				if err != nil {
					fail(err)
					return
				}
				defer m.Stop(s.ID)
				for j := 0; j < nCmd; j++ {
					r, err := s.Session(ctx, fmt.Sprintf("echo %d-%d", i, j), 30*time.Second)
					if err != nil || string(r.Stdout) != fmt.Sprintf("%d-%d\n", i, j) {
						fail(fmt.Errorf("box %d cmd %d: %v %+v", i, j, err, r))
					}
				}
			}()
		}
		wg.Wait()
		el := time.Since(t0)
		rows = append(rows, row{"64 concurrent sandboxes x 100 commands: failures", fmt.Sprintf("%d of %d (%.1f s, %.0f cmds/s)", failures, nBox*nCmd, el.Seconds(), nBox*nCmd/el.Seconds()),
			"0", failures == 0})
		if firstErr != nil {
			b.Logf("first failure: %v", firstErr)
		}
	}

	// 4. Apptainer instance start, until the agent inside answers.
	if app, err := sandbox.FindApptainer(""); err != nil {
		rows = append(rows, row{"apptainer instance start p50", "not measured: " + err.Error(), "<= 400 ms", false})
	} else {
		dc, _ := config.Parse(nil, "defaults", config.Vars{})
		for _, mode := range []string{"userns", "user"} {
			am, err := sandbox.New(sandbox.Config{Driver: "apptainer", ApptainerPath: app, ApptainerRootMode: mode, ImageDir: dc.Sandbox.ImageDir, DefaultImage: "default",
				WorkRoot: root, Agent: filepath.Join(dir, "prorl-sandbox-agent"), Limits: sandbox.Limits{MaxProcesses: 256}}, hclog.NewNullLogger())
			if err != nil {
				b.Fatal(err)
			}
			var inst, ready []float64
			for i := 0; i < 12; i++ {
				s, err := am.Start(ctx, "bench", sandbox.Spec{})
				if err != nil {
					b.Fatal(err)
				}
				inst = append(inst, float64(s.PrepareTime.Microseconds())/1000)
				ready = append(ready, float64(s.StartTime.Microseconds())/1000)
				_ = am.Stop(s.ID)
			}
			am.Close()
			p50 := pct(inst[2:], 0.5)
			who := map[string]string{"userns": "as root, --userns", "user": "rootless, as nobody"}[mode]
			rows = append(rows, row{"apptainer instance start p50 (" + who + ")", fmt.Sprintf("%.0f ms", p50), "<= 400 ms", p50 <= 400},
				row{"  + agent exec'd in the instance and answering, p50", fmt.Sprintf("%.0f ms", pct(ready[2:], 0.5)), "", true})
			b.ReportMetric(p50, "apptainer-"+mode+"-start-p50-ms")
		}
	}

	printTable("Sandboxes (2 cores)", rows)
}

// BenchmarkSandboxHardening: what the sandbox hardening costs, against the
// launch as it was before it (sandbox.Config.Baseline) in the same run, and
// the host's memory while a sandbox floods output.
func BenchmarkSandboxHardening(b *testing.B) {
	dir := binDir(b)
	if _, err := exec.LookPath("bwrap"); err != nil {
		b.Skip("bubblewrap not installed")
	}
	ctx := context.Background()
	manager := func(baseline bool) *sandbox.Manager {
		root, _ := os.MkdirTemp("", "bench-sandboxes")
		_ = os.Chmod(root, 0o755)
		b.Cleanup(func() { os.RemoveAll(root) })
		m, err := sandbox.New(sandbox.Config{Driver: "bwrap", WorkRoot: root, Agent: filepath.Join(dir, "prorl-sandbox-agent"), MaxStarting: 8,
			Baseline: baseline, Cgroups: os.Getenv("BENCH_CG"), Limits: sandbox.Limits{MemoryBytes: 256 << 20, ProcessMemoryBytes: 4 << 30, MaxProcesses: 128,
				MaxOutputBytes: 1 << 20, TmpBytes: 64 << 20, DiskBytes: 256 << 20}}, hclog.NewNullLogger())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(m.Close)
		return m
	}
	type figures struct{ start, first, session, exec float64 }
	measure := func(m *sandbox.Manager) figures {
		var start, first, sess, ex []float64
		for i := 0; i < 40; i++ {
			t0 := time.Now()
			s, err := m.Start(ctx, "bench", sandbox.Spec{})
			if err != nil {
				b.Fatal(err)
			}
			start = append(start, ms(time.Since(t0)))
			t1 := time.Now()
			if r, err := s.Session(ctx, "true", 10*time.Second); err != nil || r.ExitCode != 0 {
				b.Fatalf("%v %+v", err, r)
			}
			first = append(first, ms(time.Since(t1)))
			_ = m.Stop(s.ID)
		}
		s, err := m.Start(ctx, "bench", sandbox.Spec{})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Stop(s.ID)
		for i := 0; i < 1500; i++ {
			t0 := time.Now()
			if r, err := s.Session(ctx, "echo hello", 10*time.Second); err != nil || string(r.Stdout) != "hello\n" {
				b.Fatalf("%v %+v", err, r)
			}
			sess = append(sess, ms(time.Since(t0)))
		}
		for i := 0; i < 200; i++ {
			t0 := time.Now()
			if r, err := s.Exec(ctx, []string{"true"}, nil, 10*time.Second, "", nil, nil); err != nil || r.ExitCode != 0 {
				b.Fatalf("%v %+v", err, r)
			}
			ex = append(ex, ms(time.Since(t0)))
		}
		return figures{pct(start[5:], 0.5), pct(first[5:], 0.5), pct(sess[100:], 0.5), pct(ex[20:], 0.5)}
	}
	// Alternate, so that the machine's speed swings hit both alike.
	base, hard := manager(true), manager(false)
	var before, after figures
	for round := 0; round < 2; round++ {
		bf, af := measure(base), measure(hard)
		if round == 1 {
			before, after = bf, af
		}
	}
	var rows []row
	add := func(name string, bv, av, goal float64) {
		rows = append(rows, row{name, fmt.Sprintf("%.2f -> %.2f ms (+%.2f)", bv, av, av-bv), fmt.Sprintf("<= +%.1f ms", goal), av-bv <= goal})
	}
	add("bwrap start p50 (until the agent answers), before -> after", before.start, after.start, 2)
	add("bash round trip p50 (session echo), before -> after", before.session, after.session, 0.2)
	rows = append(rows,
		row{"  first command of a sandbox p50 (includes the isolation probe)", fmt.Sprintf("%.2f -> %.2f ms", before.first, after.first), "", true},
		row{"  new process (exec true) p50", fmt.Sprintf("%.2f -> %.2f ms", before.exec, after.exec), "", true})

	// The flood: one sandbox writes output as fast as it can for 30 s, in
	// commands and in the session; the host's RSS is sampled throughout.
	s, err := hard.Start(ctx, "flood", sandbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	defer hard.Stop(s.ID)
	runtime.GC()
	base0 := rssBytes()
	peak := base0
	var sent int64
	deadline := time.Now().Add(30 * time.Second)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for time.Now().Before(deadline) {
			left := time.Until(deadline)
			r, err := s.Exec(ctx, []string{"sh", "-c", "cat /dev/zero"}, nil, min(left, 10*time.Second), "", nil, nil)
			if err != nil {
				b.Error(err)
				return
			}
			sent += int64(len(r.Stdout))
			if left := time.Until(deadline); left > 0 {
				if _, err := s.Session(ctx, "yes", min(left, 5*time.Second)); err != nil {
					b.Error(err)
					return
				}
			}
		}
	}()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-time.After(100 * time.Millisecond):
			peak = max(peak, rssBytes())
		}
	}
	grew := float64(peak-base0) / (1 << 20)
	rows = append(rows, row{"host RSS growth while one sandbox floods output for 30 s", fmt.Sprintf("%.1f MiB", grew), "<= 64 MiB", grew <= 64},
		row{"  frames dropped / output bytes over the caps", fmt.Sprintf("%d / %d", hard.Counters.FramesDropped("oversized").Load()+hard.Counters.FramesDropped("forged").Load(), hard.Counters.OutputDropped.Load()), "", true},
		row{"  per-sandbox limits", hard.Enforcement(), "", true})
	printTable("Sandbox hardening (bwrap, 2 cores, before and after in the same run)", rows)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func rssBytes() int64 {
	b, _ := os.ReadFile("/proc/self/statm")
	var size, res int64
	fmt.Sscanf(string(b), "%d %d", &size, &res)
	return res * int64(os.Getpagesize())
}
