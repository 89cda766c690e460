package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prorl/prorl/core/trajectory"
)

// cluster is a coordinator and its nodes, each node a host process with
// its own simulator as backend, all real processes.
type cluster struct {
	t       *testing.T
	dir     string
	tasks   string
	coord   *proc
	coordU  string
	coordC  string // coordinator config
	nodes   map[string]*proc
	nodeURL map[string]string
}

const clusterTOML = `[server]
listen = "127.0.0.1:0"
shutdown_timeout = "5s"
[pipeline]
run_workers = 16
[store]
path = %q
[cluster]
heartbeat_interval = "200ms"
dead_after = "1500ms"
%s
[backends]
health_interval = "500ms"
wait_for_backend = "10s"
%s
[log]
level = "debug"
[plugins.math]
enabled = true
path = %q
start_timeout = "20s"
[plugins.math.config]
max_turns = 6
`

func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t, dir: t.TempDir(), nodes: map[string]*proc{}, nodeURL: map[string]string{}}
	c.tasks = filepath.Join(c.dir, "tasks.jsonl")
	if err := os.WriteFile(c.tasks, []byte(testTasks), 0o644); err != nil {
		t.Fatal(err)
	}
	c.coordC = filepath.Join(c.dir, "coord.toml")
	cfg := fmt.Sprintf(clusterTOML, filepath.Join(c.dir, "coord.db"), "", "", filepath.Join(binDir, "plugins/prorl-math"))
	if err := os.WriteFile(c.coordC, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *cluster) startCoordinator() {
	c.t.Helper()
	c.coord, c.coordU = listening(c.t, filepath.Join(c.dir, "coord.addr"), "prorl-host", "coordinate", "--config", c.coordC)
}

// startNode starts a node with its own simulator (tokenLatency per token).
func (c *cluster) startNode(id string, tokenLatency string) {
	c.t.Helper()
	_, simURL := listening(c.t, filepath.Join(c.dir, id+".sim.addr"), "prorl-simllm", "--listen", "127.0.0.1:0", "--answers", c.tasks,
		"--correct-rate", "1", "--token-latency", tokenLatency)
	cfgPath := filepath.Join(c.dir, id+".toml")
	cfg := fmt.Sprintf(clusterTOML, filepath.Join(c.dir, id+".db"), fmt.Sprintf("coordinator = %q\nnode_id = %q\n", c.coordU, id),
		fmt.Sprintf("[[backends.static]]\nurl = %q\n", simURL), filepath.Join(binDir, "plugins/prorl-math"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.nodes[id], c.nodeURL[id] = listening(c.t, filepath.Join(c.dir, id+".addr"), "prorl-host", "serve", "--config", cfgPath)
}

func (c *cluster) do(method, path string, body any) resp {
	c.t.Helper()
	e := &env{t: c.t, host: c.coordU}
	return e.do(method, path, body)
}

type nodeList struct {
	Nodes []struct {
		ID          string `json:"id"`
		State       string `json:"state"`
		Outstanding int    `json:"outstanding"`
	} `json:"nodes"`
}

func (c *cluster) nodesState() nodeList {
	var nl nodeList
	c.do("GET", "/v1/nodes", nil).json(c.t, &nl)
	return nl
}

func (c *cluster) waitNodes(want map[string]string) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := map[string]string{}
		for _, n := range c.nodesState().Nodes {
			got[n.ID] = n.State
		}
		ok := len(got) == len(want)
		for id, st := range want {
			ok = ok && got[id] == st
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("nodes %v, want %v", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// results reads the coordinator's whole results stream so far.
func (c *cluster) results() []*trajectory.Result {
	var page struct {
		Results []*trajectory.Result `json:"results"`
	}
	r := c.do("GET", "/v1/results?since=0&limit=10000", nil)
	if r.code != http.StatusOK {
		c.t.Fatalf("results: %d %s", r.code, r.body)
	}
	r.json(c.t, &page)
	return page.Results
}

// TestClusterNodeLoss: a coordinator and two nodes; groups submitted to the
// coordinator spread over both; one node is killed (SIGKILL) mid-run and
// declared dead; its unfinished rollouts run again on the other (same id,
// attempt 2); every rollout ends exactly once in the coordinator's stream,
// completed and scored. Then the coordinator itself is killed and
// restarted on its store: nothing it relayed is lost or repeated.
func TestClusterNodeLoss(t *testing.T) {
	c := newCluster(t)
	c.startCoordinator()
	// With no node, a submission is refused and says why.
	task := map[string]any{"domain": "math", "question": "What is 17 + 25?", "answer": "42"}
	r := c.do("POST", "/v1/rollouts", map[string]any{"task": task, "n": 2})
	if r.code != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "no node has registered") {
		t.Fatalf("submit with no node: %d %s", r.code, r.body)
	}
	c.startNode("n1", "20ms")
	c.startNode("n2", "20ms")
	c.waitNodes(map[string]string{"n1": "live", "n2": "live"})

	// Validation happens at the coordinator, with a host's errors.
	if r := c.do("POST", "/v1/rollouts", map[string]any{"task": map[string]any{"domain": "chess"}}); r.code != 422 || !strings.Contains(string(r.body), `"task.domain"`) {
		t.Fatalf("unknown domain: %d %s", r.code, r.body)
	}
	const groups, n = 12, 4
	var ids []string
	for g := range groups {
		var sr struct {
			GroupID    string   `json:"group_id"`
			RolloutIDs []string `json:"rollout_ids"`
		}
		r := c.do("POST", "/v1/rollouts", map[string]any{"task": task, "n": n, "group_id": fmt.Sprintf("g%d", g)})
		if r.code != http.StatusAccepted {
			t.Fatalf("submit: %d %s", r.code, r.body)
		}
		r.json(t, &sr)
		ids = append(ids, sr.RolloutIDs...)
	}
	// Both nodes get work; kill n1 while it has some.
	deadline := time.Now().Add(30 * time.Second)
	for {
		busy := 0
		for _, nd := range c.nodesState().Nodes {
			if nd.Outstanding > 0 {
				busy++
			}
		}
		if busy == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("work did not spread over both nodes: %+v", c.nodesState())
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(-c.nodes["n1"].cmd.Process.Pid, syscall.SIGKILL)
	c.waitNodes(map[string]string{"n1": "dead", "n2": "live"})

	// Halfway through, the coordinator dies too and comes back on its store.
	waitCount := func(want int) []*trajectory.Result {
		deadline := time.Now().Add(90 * time.Second)
		for {
			rs := c.results()
			if len(rs) >= want || time.Now().After(deadline) {
				return rs
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitCount(len(ids) / 2)
	_ = syscall.Kill(-c.coord.cmd.Process.Pid, syscall.SIGKILL)
	<-c.coord.done
	c.coord.done <- nil
	oldURL := c.coordU
	c.coordC = rewriteListen(t, c.coordC, strings.TrimPrefix(oldURL, "http://"))
	c.startCoordinator()
	if c.coordU != oldURL {
		t.Fatalf("the coordinator came back at %s, not %s", c.coordU, oldURL)
	}
	c.waitNodes(map[string]string{"n2": "live"})

	reran := onceEach(t, waitCount(len(ids)), ids)
	t.Logf("%d rollouts, each reported once; %d ran again (n1 died, then the coordinator restarted)", len(ids), reran)

	// Policy changes reach every node, and a node that joins later.
	r = c.do("PUT", "/v1/policy", map[string]any{"version": 3})
	var pol struct {
		Version int64 `json:"version"`
		Nodes   map[string]struct {
			Status int `json:"status"`
		} `json:"nodes"`
	}
	r.json(t, &pol)
	if r.code != http.StatusOK || pol.Version != 3 || len(pol.Nodes) != 1 || pol.Nodes["n2"].Status != http.StatusOK {
		t.Fatalf("set policy: %d %s", r.code, r.body)
	}
	c.startNode("n3", "1ms")
	c.waitNodes(map[string]string{"n2": "live", "n3": "live"}) // the restarted coordinator never saw n1
	for _, id := range []string{"n2", "n3"} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			var ps struct {
				Version int64 `json:"version"`
			}
			(&env{t: t, host: c.nodeURL[id]}).do("GET", "/v1/policy", nil).json(t, &ps)
			if ps.Version == 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s is at policy %d, not 3", id, ps.Version)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// rewriteListen pins the coordinator's address so its nodes find it again.
func rewriteListen(t *testing.T, path, addr string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), `listen = "127.0.0.1:0"`, fmt.Sprintf("listen = %q", addr), 1)
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestClusterRefusesBadNodes: a node of another version, with another
// plugin set, or with an id a live node holds is refused with the reason.
func TestClusterRefusesBadNodes(t *testing.T) {
	c := newCluster(t)
	c.startCoordinator()
	c.startNode("n1", "1ms")
	c.waitNodes(map[string]string{"n1": "live"})
	cases := []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"id": "x", "url": "http://127.0.0.1:1", "version": "v9", "plugins": []string{"math"}}, `"field":"version"`},
		{map[string]any{"id": "x", "url": "http://127.0.0.1:1", "version": "dev", "plugins": []string{"math", "swe"}}, `"field":"plugins"`},
		{map[string]any{"id": "n1", "url": "http://127.0.0.1:1", "version": "dev", "plugins": []string{"math"}}, `taken by a live node`},
		{map[string]any{"id": "x", "url": "ftp://h", "version": "dev", "plugins": []string{"math"}}, `"field":"url"`},
	}
	for _, tc := range cases {
		r := c.do("POST", "/v1/nodes", tc.body)
		if r.code/100 != 4 || !strings.Contains(string(r.body), tc.want) {
			t.Errorf("register %v: %d %s, want %s", tc.body, r.code, r.body, tc.want)
		}
	}
	if r := c.do("POST", "/v1/nodes/ghost:heartbeat", map[string]any{"capacity": 1}); r.code != http.StatusNotFound {
		t.Errorf("heartbeat from an unknown node: %d %s", r.code, r.body)
	}
	// A node with another plugin set stops with the coordinator's reason.
	cfgPath := filepath.Join(c.dir, "bad.toml")
	b, _ := os.ReadFile(filepath.Join(c.dir, "n1.toml"))
	cfg := strings.Replace(string(b), `node_id = "n1"`, `node_id = "bad"`, 1) + "[plugins.stem]\nenabled = true\npath = " + fmt.Sprintf("%q", filepath.Join(binDir, "plugins/prorl-stem")) + "\n"
	cfg = strings.Replace(cfg, filepath.Join(c.dir, "n1.db"), filepath.Join(c.dir, "bad.db"), 1)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, "prorl-host", "serve", "--config", cfgPath)
	select {
	case err := <-p.done:
		p.done <- err
		if err == nil || !strings.Contains(p.stderr.String(), "enable the same plugins on every node") {
			t.Fatalf("the refused node: %v\n%s", err, tail(p.stderr.String(), 2000))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a node with another plugin set kept running")
	}
	var nl nodeList
	c.do("GET", "/v1/nodes", nil).json(t, &nl)
	b, _ = json.Marshal(nl)
	if strings.Contains(string(b), `"bad"`) {
		t.Fatalf("the refused node is listed: %s", b)
	}
}

// TestClusterCompatAPIs: ProRL's /process and Polar's task API work
// through the coordinator as on a host, their rollouts run on a node.
func TestClusterCompatAPIs(t *testing.T) {
	c := newCluster(t)
	c.startCoordinator()
	c.startNode("n1", "1ms")
	c.waitNodes(map[string]string{"n1": "live"})
	e := &env{t: t, host: c.coordU}
	if r := e.do("POST", "/start", nil); r.code != 200 {
		t.Fatalf("/start: %d %s", r.code, r.body)
	}
	r := e.do("POST", "/process", map[string]any{
		"instance":        map[string]any{"data_source": "deepscaler", "instance_id": "i-7", "trajectory_id": 3, "prompt": []any{map[string]string{"role": "user", "content": "What is 17 + 25?"}}, "reward_model": map[string]any{"ground_truth": "42"}, "extra_info": map[string]any{}},
		"sampling_params": map[string]any{"temperature": 1.0, "max_iterations": 4, "max_output_tokens": 512, "token_level_generation": true},
	})
	var pr struct {
		Score   float64 `json:"score"`
		Success bool    `json:"success"`
	}
	r.json(t, &pr)
	if r.code != 200 || pr.Score != 1 || !pr.Success {
		t.Fatalf("/process through the coordinator: %d %s", r.code, r.body)
	}
	if r := e.do("POST", "/rollout/task/submit", polarTask("t-1", 2, nil)); r.code != 200 {
		t.Fatalf("polar submit: %d %s", r.code, r.body)
	}
	st := e.waitTask(t, "t-1")
	if st.Status != "completed" {
		t.Fatalf("polar task through the coordinator: %+v", st)
	}
	// An inference server the trainer registers goes to a node.
	_, simURL := listening(t, filepath.Join(c.dir, "extra.sim.addr"), "prorl-simllm", "--listen", "127.0.0.1:0", "--answers", c.tasks)
	if r := e.do("POST", "/add_llm_server", map[string]string{"address": simURL}); r.code != 200 {
		t.Fatalf("/add_llm_server through the coordinator: %d %s", r.code, r.body)
	}
	var bl struct {
		Backends []struct {
			URL string `json:"url"`
		} `json:"backends"`
	}
	(&env{t: t, host: c.nodeURL["n1"]}).do("GET", "/v1/backends", nil).json(t, &bl)
	if len(bl.Backends) != 2 || (bl.Backends[0].URL != simURL && bl.Backends[1].URL != simURL) {
		t.Fatalf("n1's backends: %+v, want %s among them", bl.Backends, simURL)
	}
	if r := e.do("POST", "/v1/backends", map[string]any{"url": "ftp://x"}); r.code != 422 || !strings.Contains(string(r.body), `"field":"url"`) {
		t.Fatalf("a bad backend through the coordinator: %d %s", r.code, r.body)
	}
	if m := string(e.do("GET", "/metrics", nil).body); !strings.Contains(m, `prorl_cluster_nodes{state="live"} 1`) {
		t.Fatalf("metrics lack the live node count:\n%s", tail(m, 1500))
	}
}

// onceEach checks that every rollout is in the results exactly once,
// completed with reward 1, that nothing else is, and that some ran again
// (attempt > 1); it returns how many.
func onceEach(t *testing.T, rs []*trajectory.Result, ids []string) (reran int) {
	t.Helper()
	seen := map[string]int{}
	for _, res := range rs {
		seen[res.ID]++
		if res.Status != trajectory.StatusCompleted || res.Reward != 1 {
			t.Errorf("%s: status %s reward %v failure %+v", res.ID, res.Status, res.Reward, res.Failure)
		}
		if res.Attempt > 1 {
			reran++
			// Each lost attempt is on record: its node's death, or the
			// coordinator's restart.
			if len(res.Attempts) != res.Attempt-1 {
				t.Errorf("%s: attempt %d with %d earlier attempts on record", res.ID, res.Attempt, len(res.Attempts))
			}
			for _, a := range res.Attempts {
				if a.Reason != trajectory.ReasonInterrupted {
					t.Errorf("%s: attempt %d ended %s (%s)", res.ID, a.Attempt, a.Reason, a.Message)
				}
			}
		}
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("rollout %s is in the stream %d times", id, seen[id])
		}
	}
	if len(rs) != len(ids) || reran == 0 {
		t.Fatalf("%d results for %d rollouts, %d ran again", len(rs), len(ids), reran)
	}
	return reran
}
