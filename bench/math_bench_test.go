package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prorl/prorl/sdk/mathans"
)

// BenchmarkMathGrading: the math grader's throughput through
// /v1/evaluate with the host and its plugin on one core, and the worst
// time of any adversarial response up to 1 MB, in-process and through the
// API.
func BenchmarkMathGrading(b *testing.B) {
	dir := binDir(b)
	if _, err := exec.LookPath("taskset"); err != nil {
		b.Skip("taskset not installed")
	}
	// Host and plugin (which inherits the affinity) on core 0.
	host := spawnArgv(b, "prorl-host", []string{"taskset", "-c", "0", filepath.Join(dir, "prorl-host"), "serve", "--config", hostConfig(b, dir)}).addr
	post := func(task map[string]any, response string) (float64, time.Duration) {
		body, _ := json.Marshal(map[string]any{"domain": "math", "task": task, "response": response})
		t0 := time.Now()
		resp, err := http.Post(host+"/v1/evaluate", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(t0)
		if resp.StatusCode != 200 {
			b.Fatalf("evaluate: %d %s", resp.StatusCode, data)
		}
		var out struct{ Reward float64 }
		_ = json.Unmarshal(data, &out)
		return out.Reward, d
	}
	// A mix a trainer sends: right and wrong, boxed and not, exact and symbolic.
	cases := []struct {
		answer, response string
	}{
		{"42", `Adding, we get \boxed{42}.`}, {"42", `So the answer is $41$.`}, {`\frac{5}{6}`, `\boxed{\frac{10}{12}}`},
		{`3\sqrt{2}`, `We find $x = \sqrt{18}$.`}, {"(1,2)", `\boxed{(2,1)}`}, {`x^2-1`, `\boxed{(x-1)(x+1)}`},
		{"0.5", "The answer is 50%."}, {`\pi`, `\boxed{3.141593}`},
	}
	for i := 0; i < 50; i++ { // warm up
		c := cases[i%len(cases)]
		post(map[string]any{"question": "q", "answer": c.answer}, c.response)
	}
	var n atomic.Int64
	deadline := time.Now().Add(5 * time.Second)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; time.Now().Before(deadline); i++ {
				c := cases[i%len(cases)]
				post(map[string]any{"question": "q", "answer": c.answer}, c.response)
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	rate := float64(n.Load()) / 5
	// The worst adversarial responses: in-process, and through the API.
	shapes := map[string]string{
		`\text{ nested 5000 deep`: strings.Repeat(`\text{`, 5000) + "1" + strings.Repeat("}", 5000),
		`\boxed{ x 40k`:           strings.Repeat(`\boxed{`, 40000),
		`\boxed{1} x 40k`:         strings.Repeat(`\boxed{1}`, 40000),
		`\frac nested 3000 deep`:  strings.Repeat(`\frac{1}{`, 3000) + "2" + strings.Repeat("}", 3000),
		"( x 100k":                strings.Repeat("(", 100000),
		"a 1 MB number":           strings.Repeat("9", 1<<20),
		"512k numbers":            strings.Repeat("1 ", 1<<19),
		"1M dollars":              strings.Repeat("$", 1<<20),
		"a 1 MB line":             strings.Repeat("x", 1<<20),
	}
	// Thousands of distinct elements compared pairwise: stopped by the
	// work budget.
	crafted := func(n int) (string, string) {
		a, g := make([]string, n), make([]string, n)
		for i := range n {
			a[i], g[n-1-i] = fmt.Sprint(i+1), fmt.Sprintf("%d.0", i+1)
		}
		return strings.Join(a, ", "), strings.Join(g, ", ")
	}
	listA, listG := crafted(1800)
	var worstIn, worstAPI time.Duration
	worstInName, worstAPIName := "", ""
	for name, s := range shapes {
		t0 := time.Now()
		a, _ := mathans.Extract(s)
		_ = mathans.Equivalent(a, "1")
		if d := time.Since(t0); d > worstIn {
			worstIn, worstInName = d, name
		}
		if _, d := post(map[string]any{"question": "q", "answer": "1"}, s); d > worstAPI {
			worstAPI, worstAPIName = d, name
		}
	}
	t0 := time.Now()
	_ = mathans.Equivalent(listA, listG)
	if d := time.Since(t0); d > worstIn {
		worstIn, worstInName = d, "1800-element lists, pairwise"
	}
	if _, d := post(map[string]any{"question": "q", "answer": listG}, `\boxed{`+listA+`}`); d > worstAPI {
		worstAPI, worstAPIName = d, "1800-element lists, pairwise"
	}
	rows := []row{
		{"evaluations/s through /v1/evaluate, host + plugin on one core", fmt.Sprintf("%.0f/s", rate), "", true},
		{"worst evaluation of an adversarial response <= 1 MB, in-process", fmt.Sprintf("%.1f ms (%s)", ms(worstIn), worstInName), "<= 100 ms", worstIn <= 100*time.Millisecond},
		{"  the same through /v1/evaluate (HTTP, 1 MB body)", fmt.Sprintf("%.1f ms (%s)", ms(worstAPI), worstAPIName), "", true},
	}
	printTable("Math grader", append(rows, agreement(b)...))
}

// agreement runs the differential tests against Math-Verify (sdk/mathans)
// and reports each corpus's agreement as they log it.
func agreement(b *testing.B) []row {
	out, err := exec.Command("go", "-C", "../sdk", "test", "-count=1", "-run", "AgainstMathVerify|TestMathVerifySuite", "-v", "./mathans/").CombinedOutput()
	if err != nil {
		b.Fatalf("differential tests: %v\n%s", err, out)
	}
	re := regexp.MustCompile(`(\w+) corpus: (\d+) pairs, agreement (\d+) \(([\d.]+)%\), (\d+) listed disagreements.*we say equal where it does not (\d+), the reverse (\d+)`)
	var rows []row
	for _, m := range re.FindAllStringSubmatch(string(out), -1) {
		rows = append(rows, row{
			fmt.Sprintf("agreement with Math-Verify 0.9.0, %s corpus", m[1]),
			fmt.Sprintf("%s%% of %s (+%s listed)", m[4], m[2], m[5]),
			"unlisted 0", m[6] == "0" && m[7] == "0",
		})
	}
	if len(rows) == 0 {
		b.Fatalf("no agreement figures in:\n%s", out)
	}
	// Math-Verify's own test suite: false positives and false negatives
	// against the verdicts its tests state.
	suite := regexp.MustCompile(`suite, (\d+) cases: ours agrees with the stated verdicts on (\d+) \(([\d.]+)%; (\d+) false positives, (\d+) false negatives\); Math-Verify 0.9.0 on (\d+) \((\d+) false positives\), (\d+) with its default settings`)
	if m := suite.FindStringSubmatch(string(out)); m != nil {
		pct, _ := strconv.ParseFloat(m[3], 64)
		rows = append(rows, row{"Math-Verify's own test suite, stated verdicts (false positives, false negatives)",
			fmt.Sprintf("%s%% of %s (%s FP, %s FN); Math-Verify %s (%s FP), %s at defaults", m[3], m[1], m[4], m[5], m[6], m[7], m[8]), ">= 97%", pct >= 97})
	} else {
		b.Fatalf("no suite figure in:\n%s", out)
	}
	return rows
}
