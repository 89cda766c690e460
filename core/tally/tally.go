// Package tally counts the rollouts a host finished, for its dashboard
// and metrics.
package tally

import (
	"sort"
	"sync"
	"time"

	"github.com/prorl/prorl/core/trajectory"
)

// Tally counts what finished, for dashboards: by status and failure
// reason, rewards per domain (a histogram), the finish rate, and the last
// rollouts that finished. Exact: fed as each result is stored, not by reading results
// back (which the trainer may already have acknowledged).
type Tally struct {
	mu       sync.Mutex
	finished uint64
	byReason map[string]uint64 // "status" or "status/reason"
	rewards  map[string]*[RewardBins + 2]uint64
	times    [256]time.Time // last finish times, a ring
	n        int
	recent   [recentN]Finished
	next     int
	health   map[string]uint64
	timeline []Bucket
}

// Bucket counts what finished in one interval, by status and reason.
type Bucket struct {
	Start  time.Time         `json:"start"`
	Counts map[string]uint64 `json:"counts"`
}

// The timeline: 10-second buckets over the last 10 minutes.
const (
	bucketWidth = 10 * time.Second
	buckets     = 60
)

// SlowInit is how long an init stage (mostly starting the sandbox) may
// take before the health check "slow_init" counts it.
const SlowInit = time.Minute

// healthOf lists the health checks a result tripped: those the agent loop
// flags (metrics health_*), a template that does not reproduce the tokens
// kept, a slow init.
func healthOf(res *trajectory.Result) []string {
	var out []string
	for k, v := range res.Metrics {
		if v > 0 && len(k) > 7 && k[:7] == "health_" {
			out = append(out, k[7:])
		}
	}
	if res.Metrics["template_mismatch_turns"] > 0 {
		out = append(out, "template_mismatch")
	}
	if res.Timing.InitMS > float64(SlowInit.Milliseconds()) {
		out = append(out, "slow_init")
	}
	sort.Strings(out)
	return out
}

// RewardBins split [0, 1]; rewards below and above get a bin each.
const RewardBins = 10

const recentN = 500

// Finished is one finished rollout as a dashboard lists it.
type Finished struct {
	ID         string    `json:"id"`
	GroupID    string    `json:"group_id"`
	Domain     string    `json:"domain"`
	Status     string    `json:"status"`
	Stage      string    `json:"stage"`
	Reason     string    `json:"reason,omitempty"`
	Reward     float64   `json:"reward"`
	Backend    string    `json:"backend,omitempty"`
	Turns      int       `json:"turns"`
	Health     []string  `json:"health,omitempty"`
	FinishedAt time.Time `json:"finished_at"`
	TotalMS    float64   `json:"total_ms"`
}

// Snapshot is a copy of the counts.
type Snapshot struct {
	Finished uint64            `json:"finished"`
	ByReason map[string]uint64 `json:"by_reason"`
	// Rewards per domain: [below 0, RewardBins bins over [0, 1], above 1].
	Rewards map[string][]uint64 `json:"rewards"`
	// PerSecond is the finish rate over the last 10 s (or the last 256
	// finishes, whichever is shorter).
	PerSecond float64 `json:"per_second"`
	// Health counts the rollouts that tripped each health check.
	Health map[string]uint64 `json:"health"`
	// Timeline is ByReason over time: 10-second buckets, oldest first,
	// the last 10 minutes (buckets in which nothing finished are absent).
	Timeline []Bucket `json:"timeline"`
}

// Add counts a finished result.
func (t *Tally) Add(res *trajectory.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byReason == nil {
		t.byReason, t.rewards, t.health = map[string]uint64{}, map[string]*[RewardBins + 2]uint64{}, map[string]uint64{}
	}
	health := healthOf(res)
	for _, h := range health {
		t.health[h]++
	}
	t.finished++
	key := string(res.Status)
	reason := ""
	if res.Failure != nil {
		reason = res.Failure.Reason
		key += "/" + reason
	}
	t.byReason[key]++
	if res.Status == trajectory.StatusCompleted || res.Status == trajectory.StatusTruncated {
		h := t.rewards[res.Domain]
		if h == nil {
			h = new([RewardBins + 2]uint64)
			t.rewards[res.Domain] = h
		}
		switch r := res.Reward; {
		case r < 0:
			h[0]++
		case r > 1:
			h[RewardBins+1]++
		default:
			h[1+min(RewardBins-1, int(r*RewardBins))]++
		}
	}
	now := time.Now()
	start := now.Truncate(bucketWidth)
	if l := len(t.timeline); l == 0 || !t.timeline[l-1].Start.Equal(start) {
		t.timeline = append(t.timeline, Bucket{Start: start, Counts: map[string]uint64{}})
		for len(t.timeline) > 0 && now.Sub(t.timeline[0].Start) > buckets*bucketWidth {
			t.timeline = t.timeline[1:]
		}
	}
	t.timeline[len(t.timeline)-1].Counts[key]++
	t.times[t.n%len(t.times)] = now
	t.n++
	backend := ""
	if len(res.Turns) > 0 {
		backend = res.Turns[len(res.Turns)-1].Backend
	}
	t.recent[t.next%recentN] = Finished{ID: res.ID, GroupID: res.GroupID, Domain: res.Domain, Status: string(res.Status), Stage: res.Stage,
		Reason: reason, Reward: res.Reward, Backend: backend, Turns: len(res.Turns), Health: health, FinishedAt: now, TotalMS: res.Timing.TotalMS}
	t.next++
}

// Snapshot copies the counts.
func (t *Tally) Snapshot() Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Snapshot{Finished: t.finished, ByReason: map[string]uint64{}, Rewards: map[string][]uint64{}, Health: map[string]uint64{}}
	for k, v := range t.health {
		s.Health[k] = v
	}
	s.Timeline = make([]Bucket, 0, len(t.timeline))
	for _, b := range t.timeline {
		if time.Since(b.Start) > buckets*bucketWidth {
			continue
		}
		c := make(map[string]uint64, len(b.Counts))
		for k, v := range b.Counts {
			c[k] = v
		}
		s.Timeline = append(s.Timeline, Bucket{Start: b.Start, Counts: c})
	}
	for k, v := range t.byReason {
		s.ByReason[k] = v
	}
	for d, h := range t.rewards {
		s.Rewards[d] = append([]uint64(nil), h[:]...)
	}
	now := time.Now()
	count, oldest := 0, now
	for i := 1; i <= min(t.n, len(t.times)); i++ {
		ts := t.times[(t.n-i)%len(t.times)]
		if now.Sub(ts) > 10*time.Second {
			break
		}
		count, oldest = count+1, ts
	}
	if count > 1 {
		s.PerSecond = float64(count) / max(now.Sub(oldest).Seconds(), 1)
	}
	return s
}

// Recent lists the last rollouts that finished, newest first.
func (t *Tally) Recent() []Finished {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := min(t.next, recentN)
	out := make([]Finished, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, t.recent[(t.next-i)%recentN])
	}
	return out
}

// HealthCount is how many finished rollouts tripped one health check
// (for a metric read at every scrape, without copying the whole tally).
func (t *Tally) HealthCount(check string) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.health[check]
}
