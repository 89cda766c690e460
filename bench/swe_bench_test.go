package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/core/sandbox"
)

// BenchmarkSWEFixture: what a writable /testbed costs a sandbox's
// start, on the Django fixture (make swe-fixtures), against the same
// image's start without it, in the same run.
func BenchmarkSWEFixture(b *testing.B) {
	dir := binDir(b)
	if _, err := exec.LookPath("bwrap"); err != nil {
		b.Skip("bubblewrap not installed")
	}
	cfg, err := config.Parse(nil, "defaults", config.Vars{})
	if err != nil {
		b.Fatal(err)
	}
	image := filepath.Join(cfg.Sandbox.ImageDir, "swe-django__django-90001", "rootfs")
	if _, err := os.Stat(filepath.Join(image, "testbed")); err != nil {
		b.Skipf("no Django fixture (make swe-fixtures): %v", err)
	}
	root, _ := os.MkdirTemp("", "bench-sandboxes")
	_ = os.Chmod(root, 0o755)
	defer os.RemoveAll(root)
	m, err := sandbox.New(sandbox.Config{Driver: "bwrap", WorkRoot: root, Agent: filepath.Join(dir, "prorl-sandbox-agent"), MaxStarting: 4,
		Limits: sandbox.Limits{MemoryBytes: 2 << 30, MaxProcesses: 128, MaxOutputBytes: 1 << 20, DiskBytes: 1 << 30}}, hclog.NewNullLogger())
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	start := func(writable []string) float64 {
		var lat []float64
		for i := 0; i < 12; i++ {
			t0 := time.Now()
			s, err := m.Start(ctx, "bench", sandbox.Spec{Image: image, Writable: writable})
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, ms(time.Since(t0)))
			_ = m.Stop(s.ID)
		}
		return pct(lat[2:], 0.5)
	}
	plain, copied := start(nil), start([]string{"/testbed"})
	b.ReportMetric(copied, "writable-testbed-start-p50-ms")
	printTable("SWE repository writable in place (bwrap, Django fixture, 55 MB /testbed)", []row{
		{"sandbox start p50, image only (baseline, same run)", fmt.Sprintf("%.1f ms", plain), "", true},
		{"sandbox start p50, /testbed copied in", fmt.Sprintf("%.1f ms (%.1fx)", copied, copied/plain), "<= 1000 ms", copied <= 1000},
	})
}
