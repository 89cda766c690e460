package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCodeJudge prints the code judge's CPU for a 100-case task
// with a correct fast solution: the judge driver (plugins/code/judge.py)
// run by this machine's python3, as the plugin runs it inside a sandbox
// (the sandbox's own start is measured by BenchmarkSandboxes).
func BenchmarkCodeJudge(b *testing.B) {
	src, err := os.ReadFile(filepath.Join("..", "plugins", "code", "judge.py"))
	if err != nil {
		b.Fatal(err)
	}
	var tests []map[string]string
	for i := range 100 {
		tests = append(tests, map[string]string{"input": fmt.Sprintf("%d %d\n", i, i*7)})
	}
	spec, _ := json.Marshal(map[string]any{"mode": "stdio", "solution": "a, b = map(int, input().split())\nprint(a + b)",
		"tests": tests, "time_limit": 2, "memory_mb": 256, "workers": 2})
	var cpus, walls []float64
	for range 5 {
		cmd := exec.Command("python3", "-I", "-c", string(src))
		cmd.Stdin = strings.NewReader(string(spec))
		t0 := time.Now()
		out, err := cmd.Output()
		if err != nil {
			b.Fatal(err)
		}
		walls = append(walls, time.Since(t0).Seconds())
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		// wait4's usage of the driver includes the test runs it waited for.
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
		cpus = append(cpus, cpu)
		if !strings.Contains(string(out), `"results"`) || strings.Count(string(out), `"exit": 0`) != 100 {
			b.Fatalf("judge output: %.300s", out)
		}
	}
	printTable("Code judge", []row{
		{name: "100-case stdio task, correct solution: judge CPU (median of 5)", measured: fmt.Sprintf("%.3f s (wall %.3f s)", pct(cpus, 0.5), pct(walls, 0.5)),
			target: "< 2 s", ok: pct(cpus, 0.5) < 2},
	})
}
