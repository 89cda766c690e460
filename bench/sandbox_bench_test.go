package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/pluginhost"
	"github.com/prorl/prorl/core/sandbox"
	pb "github.com/prorl/prorl/sdk/proto"
)

func BenchmarkIssue3Figures(b *testing.B) {
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
			&sandbox.HostServices{M: m, DefaultTimeout: 10 * time.Second}, "bench")
		if err != nil {
			b.Fatal(err)
		}
		defer pm.Stop()
		p, _ := pm.Get("tools")
		c, _ := p.Acquire(ctx)
		res := m.Reserve("bench-bash", sandbox.Spec{})
		defer res.Release()
		req := &pb.CallToolRequest{RolloutId: "bench-bash", SandboxId: res.ID, Call: &pb.ToolCall{Name: "bash", ArgumentsJson: []byte(`{"command":"echo hello"}`)}}
		var lat []float64
		for i := 0; i < 2000; i++ {
			t0 := time.Now()
			r, err := c.CallTool(ctx, req)
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

	printTable("prorl issue 3 figures (2 cores)", rows)
}
