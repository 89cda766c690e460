package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/prorl/prorl/internal/faultdrill"
)

// TestFaultDrill: a GRPO step (16 groups of 8) through sandbox start
// failures (5%), backend errors and dropped connections (2% each) and a
// plugin killed mid-step comes back whole: every group with 8 trainable
// samples, none scored 0 for the infrastructure's failure (the simulator
// answers right only), none lost or twice, none with a failed attempt's
// tokens. The longer drill with the default budgets is in make bench
// (BenchmarkFaults).
func TestFaultDrill(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap not installed (make test installs it)")
	}
	e := newEnv(t, envOpts{
		// One python call (in a sandbox), then the answer: two turns.
		simArgs:   []string{"--correct-rate", "1", "--python-turns", "1", "--think-turns", "0", "--token-latency", "2ms", "--fail-rate", "0.02", "--drop-rate", "0.02"},
		extraTOML: "[sandbox]\nfault_start_rate = 0.05\n",
	})
	e.startHost()
	e.addBackend()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	killed := 0
	rep, err := faultdrill.Run(ctx, faultdrill.Drill{
		Host: e.host, Groups: 16, Size: 8, Turns: 2,
		Task: func(g int) map[string]any {
			return map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42", "id": fmt.Sprint(g)}
		},
		// Budgets that make a group's loss to chance negligible here
		// (0.05^5 a sample); the bench reports the defaults' figures.
		Submit: map[string]any{"retry_budget": map[string]int{"sandbox_failed": 4, "backend_unavailable": 4, "plugin_crashed": 4}},
		Fault: func() error {
			pid := e.domain(t).PID
			killed = pid
			return syscall.Kill(pid, syscall.SIGKILL)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plugin %d killed; %s", killed, rep)
	if rep.Whole != rep.Groups || rep.FakeZeros != 0 || rep.Lost != 0 || rep.Duplicates != 0 || rep.Leaked != 0 {
		t.Fatalf("the step did not come back whole and honest: %s", rep)
	}
	if rep.Reasons["attempt:sandbox_failed"] == 0 {
		t.Errorf("no sandbox start failed at a 5%% rate over %d samples: the fault was not injected", rep.Samples)
	}
}
