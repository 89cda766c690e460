// Package batch is `prorl-host run`: tasks JSONL in, results JSONL out,
// through a host's HTTP API, with a progress bar and a summary table.
package batch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/prorl/prorl/core/trajectory"
)

// Options configure a batch run.
type Options struct {
	Server   string // base URL of the host
	Tasks    io.Reader
	Out      io.Writer // results JSONL; nil discards
	Progress io.Writer // progress bar; nil for none
	N        int
	Domain   string // used for rows that name none
	Sampling json.RawMessage
	MaxTurns int
	Timeout  string
	Seed     *int64
	// Chunk is how many tasks go in one batch request.
	Chunk int
}

// Summary is what a batch run reports.
type Summary struct {
	Tasks       int            `json:"tasks"`
	Samples     int            `json:"samples"`
	ByStatus    map[string]int `json:"by_status"`
	Failures    map[string]int `json:"failures_by_reason"`
	MeanReward  float64        `json:"mean_reward"`
	PassAt1     float64        `json:"pass_at_1"`
	PassAtK     float64        `json:"pass_at_k"`
	K           int            `json:"k"`
	MeanTurns   float64        `json:"mean_turns"`
	Elapsed     float64        `json:"elapsed_seconds"`
	RolloutsPer float64        `json:"rollouts_per_second"`
}

type submitReq struct {
	Task     json.RawMessage `json:"task"`
	Sampling json.RawMessage `json:"sampling,omitempty"`
	N        int             `json:"n"`
	MaxTurns int             `json:"max_turns,omitempty"`
	Timeout  string          `json:"timeout,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// readTasks accepts request rows ({"task": {...}, ...}) and bare task rows
// (plain or verl/ProRL style), which get the default domain unless they name
// a domain or data_source.
func readTasks(r io.Reader, o Options) ([]submitReq, error) {
	var out []submitReq
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 || raw[0] == '#' {
			continue
		}
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, fmt.Errorf("tasks line %d: %w", line, err)
		}
		req := submitReq{N: o.N, Sampling: o.Sampling, MaxTurns: o.MaxTurns, Timeout: o.Timeout}
		if t, ok := probe["task"]; ok {
			req.Task = t
			if n, ok := probe["n"]; ok {
				_ = json.Unmarshal(n, &req.N)
			}
			if s, ok := probe["sampling"]; ok {
				req.Sampling = s
			}
		} else {
			_, hasDomain := probe["domain"]
			_, hasDS := probe["data_source"]
			if !hasDomain && !hasDS {
				if o.Domain == "" {
					return nil, fmt.Errorf("tasks line %d: the row names no domain or data_source; pass --domain", line)
				}
				d, _ := json.Marshal(o.Domain)
				probe["domain"] = d
			}
			req.Task, _ = json.Marshal(probe)
		}
		req.Metadata, _ = json.Marshal(map[string]int{"line": line})
		out = append(out, req)
	}
	return out, sc.Err()
}

func post(ctx context.Context, url string, in, out any) error {
	b, _ := json.Marshal(in)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: HTTP %d: %s", url, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	return json.Unmarshal(data, out)
}

// Run submits every task, collects every result, writes them, acknowledges them.
func Run(ctx context.Context, o Options) (*Summary, error) {
	if o.N <= 0 {
		o.N = 1
	}
	if o.Chunk <= 0 {
		o.Chunk = 500
	}
	reqs, err := readTasks(o.Tasks, o)
	if err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("no tasks")
	}
	start := time.Now()
	want := map[string]int{} // rollout id -> task index
	total := 0
	for i := 0; i < len(reqs); i += o.Chunk {
		chunk := reqs[i:min(i+o.Chunk, len(reqs))]
		var resp struct {
			Groups []struct {
				GroupID    string   `json:"group_id"`
				RolloutIDs []string `json:"rollout_ids"`
			} `json:"groups"`
		}
		if err := post(ctx, o.Server+"/v1/rollouts:batch", map[string]any{"requests": chunk}, &resp); err != nil {
			return nil, fmt.Errorf("submit: %w", err)
		}
		for gi, g := range resp.Groups {
			for _, id := range g.RolloutIDs {
				want[id] = i + gi
				total++
			}
		}
	}
	bar := newBar(o.Progress, total)
	results := make([]*trajectory.Result, 0, total)
	var since uint64
	enc := json.NewEncoder(io.Discard)
	if o.Out != nil {
		enc = json.NewEncoder(o.Out)
	}
	for len(results) < total {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/results?since=%d&wait=20s&limit=5000", o.Server, since), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("results: %w", err)
		}
		var page struct {
			Results   []*trajectory.Result `json:"results"`
			NextSince uint64               `json:"next_since"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("results: %w", err)
		}
		since = page.NextSince
		var acks []string
		for _, r := range page.Results {
			if _, ok := want[r.ID]; !ok {
				continue // someone else's rollout
			}
			delete(want, r.ID)
			results = append(results, r)
			acks = append(acks, r.ID)
			if err := enc.Encode(r); err != nil {
				return nil, fmt.Errorf("write results: %w", err)
			}
		}
		if len(acks) > 0 {
			var ack struct{ Acked int }
			if err := post(ctx, o.Server+"/v1/results/ack", map[string]any{"ids": acks}, &ack); err != nil {
				return nil, err
			}
		}
		bar.set(len(results), results)
	}
	bar.done()
	return summarize(results, len(reqs), o.N, time.Since(start)), nil
}

func summarize(rs []*trajectory.Result, tasks, n int, el time.Duration) *Summary {
	s := &Summary{Tasks: tasks, Samples: len(rs), ByStatus: map[string]int{}, Failures: map[string]int{}, K: n, Elapsed: el.Seconds()}
	byGroup := map[string][]*trajectory.Result{}
	turns := 0
	for _, r := range rs {
		s.ByStatus[string(r.Status)]++
		if r.Failure != nil {
			s.Failures[r.Failure.Reason]++
		}
		s.MeanReward += r.Reward
		turns += len(r.Turns)
		byGroup[r.GroupID] = append(byGroup[r.GroupID], r)
	}
	if len(rs) > 0 {
		s.MeanReward /= float64(len(rs))
		s.MeanTurns = float64(turns) / float64(len(rs))
	}
	for _, g := range byGroup {
		c := 0
		for _, r := range g {
			if r.Resolved {
				c++
			}
		}
		s.PassAt1 += passAtK(len(g), c, 1)
		s.PassAtK += passAtK(len(g), c, min(n, len(g)))
	}
	if len(byGroup) > 0 {
		s.PassAt1 /= float64(len(byGroup))
		s.PassAtK /= float64(len(byGroup))
	}
	if el > 0 {
		s.RolloutsPer = float64(len(rs)) / el.Seconds()
	}
	return s
}

// passAtK is the unbiased estimator 1 - C(n-c, k) / C(n, k).
func passAtK(n, c, k int) float64 {
	if n-c < k {
		return 1
	}
	p := 1.0
	for i := n - c + 1; i <= n; i++ {
		p *= 1 - float64(k)/float64(i)
	}
	return 1 - p
}

// WriteTable prints the summary for a person.
func (s *Summary) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "\n%-22s %d\n", "tasks", s.Tasks)
	fmt.Fprintf(w, "%-22s %d\n", "samples", s.Samples)
	writeCounts(w, s.ByStatus)
	fmt.Fprintf(w, "%-22s %.4f\n", "mean reward", s.MeanReward)
	fmt.Fprintf(w, "%-22s %.4f\n", "pass@1", s.PassAt1)
	fmt.Fprintf(w, "%-22s %.4f\n", fmt.Sprintf("pass@%d", s.K), s.PassAtK)
	fmt.Fprintf(w, "%-22s %.2f\n", "mean turns", s.MeanTurns)
	if len(s.Failures) > 0 {
		fmt.Fprintf(w, "failures by reason\n")
		writeCounts(w, s.Failures)
	}
	fmt.Fprintf(w, "%-22s %.2f s\n", "elapsed", s.Elapsed)
	fmt.Fprintf(w, "%-22s %.1f\n", "rollouts/s", s.RolloutsPer)
}

// writeCounts prints counts under their names, sorted by name.
func writeCounts(w io.Writer, counts map[string]int) {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %-20s %d\n", k, counts[k])
	}
}

type bar struct {
	w     io.Writer
	total int
	last  time.Time
}

func newBar(w io.Writer, total int) *bar {
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
			w = nil // not a terminal: no bar
		}
	}
	return &bar{w: w, total: total}
}

func (b *bar) set(n int, rs []*trajectory.Result) {
	if b.w == nil || time.Since(b.last) < 100*time.Millisecond && n < b.total {
		return
	}
	b.last = time.Now()
	reward := 0.0
	for _, r := range rs {
		reward += r.Reward
	}
	if len(rs) > 0 {
		reward /= float64(len(rs))
	}
	const width = 30
	fill := int(math.Round(float64(width) * float64(n) / float64(max(b.total, 1))))
	fmt.Fprintf(b.w, "\r[%s%s] %d/%d  mean reward %.3f", strings.Repeat("#", fill), strings.Repeat(".", width-fill), n, b.total, reward)
}

func (b *bar) done() {
	if b.w != nil {
		fmt.Fprintln(b.w)
	}
}
