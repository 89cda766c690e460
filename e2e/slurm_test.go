package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prorl/prorl/core/trajectory"

	"github.com/prorl/prorl/sdk/sdktest"
)

// TestSlurmDeployment runs deploy/slurm/prorl.sbatch as an admin would,
// under a real Slurm controller and two slurmd daemons (Debian's
// slurm-wlm), each daemon in its own network namespace with its own
// address (deploy/slurm/testcluster.sh), the simulator as each node's
// inference server: submit through the coordinator, SIGKILL one node's
// host mid-run, every rollout accounted for once; scancel leaves nothing
// running.
func TestSlurmDeployment(t *testing.T) {
	need := sdktest.RefsRequired()
	if os.Geteuid() != 0 {
		if need {
			t.Fatal("a Slurm cluster on this machine needs root (network namespaces, slurmd)")
		}
		t.Skip("needs root")
	}
	if _, err := exec.LookPath("slurmctld"); err != nil {
		if need {
			t.Fatal("slurmctld not installed: python3 scripts/ref.py install slurm")
		}
		t.Skip("slurm not installed (python3 scripts/ref.py install slurm)")
	}
	dir := t.TempDir()
	cl := filepath.Join(dir, "slurm")
	script, _ := filepath.Abs("../deploy/slurm/testcluster.sh")
	if b, err := exec.Command("bash", script, "up", cl, "2").CombinedOutput(); err != nil {
		t.Fatalf("start the Slurm cluster: %v\n%s", err, b)
	}
	t.Cleanup(func() {
		if b, err := exec.Command("bash", script, "down", cl).CombinedOutput(); err != nil {
			t.Logf("stop the Slurm cluster: %v\n%s", err, b)
		}
	})
	slurmEnv := append(os.Environ(), "SLURM_CONF="+filepath.Join(cl, "slurm.conf"))
	slurm := func(name string, args ...string) string {
		cmd := exec.Command(name, args...)
		cmd.Env, cmd.Dir = slurmEnv, dir
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, b)
		}
		return string(b)
	}

	const token = "slurm-test-token"
	tasks := filepath.Join(dir, "tasks.jsonl")
	cfg := filepath.Join(dir, "prorl.toml")
	for path, body := range map[string]string{
		filepath.Join(dir, "token"): token + "\n",
		tasks:                       testTasks,
		cfg: fmt.Sprintf(`[server]
allow_remote = true
token_file = %q
shutdown_timeout = "5s"
[pipeline]
run_workers = 16
[cluster]
heartbeat_interval = "200ms"
dead_after = "1500ms"
# The nodes' own network (10.77.0.0/24, this machine's namespaces).
allow_plain_http = true
[log]
level = "debug"
[plugins.math]
enabled = true
path = %q
`, filepath.Join(dir, "token"), filepath.Join(binDir, "plugins/prorl-math")),
	} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sbatch, _ := filepath.Abs("../deploy/slurm/prorl.sbatch")
	run := filepath.Join(dir, "run")
	cmd := exec.Command("sbatch", "--parsable", "--nodes=2", "--chdir="+dir, sbatch)
	cmd.Env = append(slurmEnv, "PRORL_CONFIG="+cfg, "PRORL_HOST_BIN="+filepath.Join(binDir, "prorl-host"), "PRORL_RUN_DIR="+run,
		"PRORL_COORD_PORT=8000", "PRORL_PORT=8006",
		"PRORL_INFERENCE_CMD="+filepath.Join(binDir, "prorl-simllm")+" --listen 127.0.0.1:8100 --correct-rate 1 --token-latency 20ms --answers "+tasks)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch: %v\n%s", err, out)
	}
	job := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(run, "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s (tail):\n%s", filepath.Base(l), tail(string(b), 2500))
			}
		}
	})

	// The trainer finds the coordinator's URL where the job wrote it.
	var coordURL string
	deadline := time.Now().Add(60 * time.Second)
	for coordURL == "" {
		if b, err := os.ReadFile(filepath.Join(run, "coordinator.url")); err == nil {
			coordURL = strings.TrimSpace(string(b))
		} else if time.Now().After(deadline) {
			t.Fatalf("no coordinator.url; squeue:\n%s", slurm("squeue"))
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	authed := func(method, path string, body any) resp {
		t.Helper()
		var rd io.Reader
		if body != nil {
			rd = strings.NewReader(mustJSON(t, body))
		}
		req, _ := http.NewRequest(method, coordURL+path, rd)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return resp{res.StatusCode, b}
	}
	if r := authed("GET", "/v1/nodes", nil); r.code != http.StatusOK {
		t.Fatalf("nodes: %d %s", r.code, r.body)
	}
	if r := (&env{t: t, host: coordURL}).do("GET", "/v1/nodes", nil); r.code != http.StatusUnauthorized {
		t.Fatalf("the coordinator answered without the token: %d", r.code)
	}
	nodes := func() map[string]int {
		var nl nodeList
		authed("GET", "/v1/nodes", nil).json(t, &nl)
		m := map[string]int{}
		for _, n := range nl.Nodes {
			if n.State == "live" {
				m[n.ID] = n.Outstanding
			}
		}
		return m
	}
	for deadline := time.Now().Add(60 * time.Second); len(nodes()) < 2; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("live nodes: %v", nodes())
		}
	}

	task := map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}
	var ids []string
	for g := range 10 {
		r := authed("POST", "/v1/rollouts", map[string]any{"task": task, "n": 4, "group_id": fmt.Sprintf("g%d", g)})
		if r.code != http.StatusAccepted {
			t.Fatalf("submit: %d %s", r.code, r.body)
		}
		var sr struct {
			RolloutIDs []string `json:"rollout_ids"`
		}
		r.json(t, &sr)
		ids = append(ids, sr.RolloutIDs...)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if n := nodes(); n["node1"] > 0 && n["node2"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("work did not spread: %v", nodes())
		}
	}
	// node2's host dies (its slurmd and inference server live on).
	pid := hostPID(t, "--node-id node2")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var rs []*trajectory.Result
	for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r := authed("GET", "/v1/results?since=0&limit=10000", nil)
		var page struct {
			Results []*trajectory.Result `json:"results"`
		}
		r.json(t, &page)
		rs = page.Results
		if len(rs) >= len(ids) || time.Now().After(deadline) {
			break
		}
	}
	reran := onceEach(t, rs, ids)
	t.Logf("Slurm job %s: %d rollouts over node1 and node2, each reported once; %d ran again after node2's host was killed", job, len(ids), reran)

	// scancel stops the coordinator, the hosts, their plugins and the
	// inference servers.
	slurm("scancel", job)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		left := processesUnder(run, tasks)
		q := strings.Fields(slurm("squeue", "-h", "-o", "%i"))
		if len(left) == 0 && !slices.Contains(q, job) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after scancel: squeue %q, processes %v", q, left)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hostPID finds the prorl-host serve process whose command line has arg.
func hostPID(t *testing.T, arg string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, p := range procs() {
			if strings.Contains(p.cmdline, "prorl-host serve") && strings.Contains(p.cmdline, arg) {
				return p.pid
			}
		}
	}
	t.Fatalf("no prorl-host with %s", arg)
	return 0
}

type procInfo struct {
	pid     int
	cmdline string
}

func procs() []procInfo {
	ents, _ := os.ReadDir("/proc")
	var out []procInfo
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		out = append(out, procInfo{pid, strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")})
	}
	return out
}

// processesUnder lists live processes whose command line names any of
// the paths (the job's run directory, its tasks file).
func processesUnder(paths ...string) []string {
	var out []string
	for _, p := range procs() {
		for _, path := range paths {
			if strings.Contains(p.cmdline, path) {
				if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid)); bytes.Contains(st, []byte(") Z ")) {
					break // a zombie: exited, not yet reaped by its parent
				}
				out = append(out, p.cmdline)
				break
			}
		}
	}
	return out
}

// TestSlurmInstallPick: scripts/ref.py installs Slurm's pinned
// revision while Debian offers it, and the newest revision of the same
// release once a security update has replaced it; never another release.
func TestSlurmInstallPick(t *testing.T) {
	tests := []struct {
		name, want, offered, got string
	}{
		{"pinned offered", "", "22.05.8-4+deb12u3\n", "22.05.8-4+deb12u3"},
		{"pinned among others", "", "22.05.8-4+deb12u4\n22.05.8-4+deb12u3\n", "22.05.8-4+deb12u3"},
		{"replaced by updates", "", "22.05.8-4+deb12u10\n22.05.8-4+deb12u4\n", "22.05.8-4+deb12u10"},
		{"only another release", "", "23.11.4-1\n", ""},
		{"a release whose dots are not wildcards", "", "22005x8-1\n", ""},
		{"another pin", "23.11.4-1", "23.11.4-1\n22.05.8-4+deb12u3\n", "23.11.4-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{filepath.Join("..", "scripts", "ref.py"), "pick", "slurm"}
			if tt.want != "" {
				args = append(args, tt.want)
			}
			cmd := exec.Command("python3", args...)
			cmd.Stdin = strings.NewReader(tt.offered)
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(out)); got != tt.got {
				t.Fatalf("picked %q, want %q", got, tt.got)
			}
		})
	}
}
