// Package coord spreads rollouts over many hosts: a coordinator that nodes
// register with and heartbeat to, which places each group on one node,
// relays the nodes' results into its own durable stream, and runs a dead
// node's unfinished rollouts again elsewhere (same id, next attempt); and
// the node side that registers and heartbeats.
//
// The coordinator is a host whose pipeline runs rollouts remotely
// (pipeline.Executor): the same API, validation, store, results stream,
// cancels and restart recovery as a host, with the stages on the nodes.
package coord

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	fastjson "github.com/goccy/go-json"
	"github.com/hashicorp/go-hclog"
	"github.com/prorl/prorl/core/pipeline"
	"github.com/prorl/prorl/core/store"
	"github.com/prorl/prorl/core/trajectory"
)

// NodeInfo is what a node registers with.
type NodeInfo struct {
	ID      string   `json:"id"`
	URL     string   `json:"url"`
	Version string   `json:"version"`
	Plugins []string `json:"plugins"`
}

// Load is what a node reports with each heartbeat.
type Load struct {
	// Capacity is how many rollouts it runs at once (its run workers).
	Capacity int `json:"capacity"`
	pipeline.Stats
	Backends        int  `json:"backends"`
	HealthyBackends int  `json:"healthy_backends"`
	Sandboxes       int  `json:"sandboxes"`
	Healthy         bool `json:"healthy"`
}

// Node states.
const (
	StateLive     = "live"
	StateDraining = "draining"
	StateDead     = "dead"
)

// NodeStatus is a node as GET /v1/nodes lists it.
type NodeStatus struct {
	NodeInfo
	State         string    `json:"state"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	Load          Load      `json:"load"`
	// Outstanding is how many rollouts the coordinator has placed on it
	// and not yet had back.
	Outstanding int `json:"outstanding"`
}

type node struct {
	NodeStatus
	lost   chan struct{} // closed when the node is declared dead
	cancel context.CancelFunc
	toAck  []string
	given  int // backends given to it since its last heartbeat
}

type waiter struct {
	node string
	ch   chan *trajectory.Result
	lost <-chan struct{}
}

// Options configure a coordinator.
type Options struct {
	Version string
	Plugins []string
	// Token authenticates the coordinator to nodes (their admin token).
	Token string
	// DeadAfter declares a node dead when it has not heartbeaten this long.
	DeadAfter time.Duration
	Store     store.Store
	Log       hclog.Logger
	Client    *http.Client
	// AllowPlainHTTP lets nodes register with an http:// URL that is not
	// loopback although a Token would then cross the network in the clear.
	AllowPlainHTTP bool
}

// NoRedirects is a client's CheckRedirect that follows none: a request
// that carries a token goes only where it was addressed.
func NoRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// plainRemote reports an http:// URL whose host is not loopback.
func plainRemote(u *url.URL) bool {
	if u.Scheme != "http" {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return false
	}
	ip := net.ParseIP(h)
	return ip == nil || !ip.IsLoopback()
}

// Coordinator tracks nodes and runs rollouts on them.
type Coordinator struct {
	o       Options
	mu      sync.Mutex
	nodes   map[string]*node
	groups  map[string]*placement
	waiters map[string]*waiter
	joined  chan struct{} // closed (and replaced) whenever a node becomes live
	policy  func() int64
	stop    context.CancelFunc
	ctx     context.Context
	wg      sync.WaitGroup
}

type placement struct {
	node string
	n    int
}

var _ pipeline.Executor = (*Coordinator)(nil)

// New starts a coordinator's monitor (dead nodes) and acknowledger.
func New(o Options) *Coordinator {
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 30 * time.Second}
	}
	// Requests carry the admin token: never on to where a node redirects.
	cl := *o.Client
	cl.CheckRedirect = NoRedirects
	o.Client = &cl
	if o.DeadAfter <= 0 {
		o.DeadAfter = 10 * time.Second
	}
	o.Plugins = slices.Sorted(slices.Values(o.Plugins))
	c := &Coordinator{o: o, nodes: map[string]*node{}, groups: map[string]*placement{}, waiters: map[string]*waiter{}, joined: make(chan struct{})}
	c.ctx, c.stop = context.WithCancel(context.Background())
	c.wg.Add(2)
	go c.monitor()
	go c.acker()
	return c
}

// Close stops the coordinator's goroutines and node streams.
func (c *Coordinator) Close() {
	c.stop()
	c.wg.Wait()
}

// RegisterError is a refused registration.
type RegisterError struct {
	Status int
	Field  string
	Msg    string
}

func (e *RegisterError) Error() string { return e.Msg }

// Register adds (or renews) a node. A node with another version or
// plugin set, or an id a live node with another URL holds, is refused.
func (c *Coordinator) Register(in NodeInfo) error {
	switch {
	case in.ID == "" || len(in.ID) > 128:
		return &RegisterError{422, "id", "a node id of 1 to 128 characters is required"}
	case in.URL == "":
		return &RegisterError{422, "url", "the node's URL is required"}
	case in.Version != c.o.Version:
		return &RegisterError{409, "version", fmt.Sprintf("node %s runs version %q, the coordinator %q: run one build everywhere", in.ID, in.Version, c.o.Version)}
	}
	u, err := url.Parse(in.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &RegisterError{422, "url", fmt.Sprintf("node URL %q must be http(s)://host:port", in.URL)}
	}
	if c.o.Token != "" && !c.o.AllowPlainHTTP && plainRemote(u) {
		return &RegisterError{422, "url", fmt.Sprintf("node URL %q is plain http to another machine: the coordinator would send its admin token in the clear; give the node an https:// URL, or set [cluster] allow_plain_http = true on a network you trust", in.URL)}
	}
	plugins := slices.Sorted(slices.Values(in.Plugins))
	if !slices.Equal(plugins, c.o.Plugins) {
		return &RegisterError{409, "plugins", fmt.Sprintf("node %s serves domains [%s], the coordinator [%s]: enable the same plugins on every node", in.ID, strings.Join(plugins, ", "), strings.Join(c.o.Plugins, ", "))}
	}
	in.Plugins = plugins
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.nodes[in.ID]; ok {
		if old.State != StateDead && old.URL != in.URL {
			return &RegisterError{409, "id", fmt.Sprintf("node id %s is taken by a live node at %s (this one is at %s): give each node its own id", in.ID, old.URL, in.URL)}
		}
		if old.State != StateDead {
			// The same node again (it restarted, or missed a reply): its
			// rollouts stay with it; its stream starts over.
			old.cancel()
			old.NodeInfo, old.LastHeartbeat, old.State = in, time.Now(), StateLive
			c.startStream(old)
			go c.syncPolicy(old)
			c.log().Info("node registered again", "node", in.ID, "url", in.URL)
			return nil
		}
	}
	n := &node{NodeStatus: NodeStatus{NodeInfo: in, State: StateLive, LastHeartbeat: time.Now(), Load: Load{Capacity: 1}}, lost: make(chan struct{})}
	c.nodes[in.ID] = n
	c.startStream(n)
	go c.syncPolicy(n)
	close(c.joined)
	c.joined = make(chan struct{})
	c.log().Info("node registered", "node", in.ID, "url", in.URL)
	return nil
}

func (c *Coordinator) log() hclog.Logger {
	if c.o.Log == nil {
		return hclog.NewNullLogger()
	}
	return c.o.Log
}

// ErrUnknownNode answers a heartbeat from a node the coordinator does not
// know (or declared dead): it registers again.
var ErrUnknownNode = errors.New("unknown or dead node: register again")

// Heartbeat records a node's load.
func (c *Coordinator) Heartbeat(id string, l Load) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.nodes[id]
	if !ok || n.State == StateDead {
		return ErrUnknownNode
	}
	if l.Capacity < 1 {
		l.Capacity = 1
	}
	n.Load, n.LastHeartbeat, n.given = l, time.Now(), 0
	return nil
}

// Drain stops placing rollouts on a node; those it has run to the end.
func (c *Coordinator) Drain(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.nodes[id]
	if !ok || n.State == StateDead {
		return ErrUnknownNode
	}
	n.State = StateDraining
	return nil
}

// Nodes lists the nodes, by id.
func (c *Coordinator) Nodes() []NodeStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]NodeStatus, 0, len(c.nodes))
	for _, n := range c.nodes {
		out = append(out, n.NodeStatus)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Admission refuses new rollouts while no node can take them.
func (c *Coordinator) Admission() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.nodes) == 0 {
		return errors.New("no node has registered with this coordinator yet")
	}
	var states []string
	for _, n := range c.nodes {
		if n.State == StateLive {
			return nil
		}
		states = append(states, n.ID+" "+n.State)
	}
	sort.Strings(states)
	return fmt.Errorf("no live node: %s", strings.Join(states, ", "))
}

// monitor declares nodes dead when their heartbeats stop.
func (c *Coordinator) monitor() {
	defer c.wg.Done()
	t := time.NewTicker(max(c.o.DeadAfter/8, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			c.mu.Lock()
			for _, n := range c.nodes {
				n.cancel()
			}
			c.mu.Unlock()
			return
		case <-t.C:
		}
		now := time.Now()
		c.mu.Lock()
		for _, n := range c.nodes {
			if n.State != StateDead && now.Sub(n.LastHeartbeat) > c.o.DeadAfter {
				c.declareDead(n)
			}
		}
		c.mu.Unlock()
	}
}

// declareDead stops using a node: the rollouts waiting on it run again
// elsewhere, its groups are placed anew. c.mu is held.
func (c *Coordinator) declareDead(n *node) {
	n.State = StateDead
	n.cancel()
	close(n.lost)
	for g, p := range c.groups {
		if p.node == n.ID {
			delete(c.groups, g)
		}
	}
	c.log().Warn("node declared dead: its unfinished rollouts run again on other nodes", "node", n.ID,
		"last_heartbeat", n.LastHeartbeat, "outstanding", n.Outstanding)
}

// place picks a live node for a rollout: its group's node while that one
// is live, else the one with the most free capacity. It waits (until ctx
// ends) while no node is live.
func (c *Coordinator) place(ctx context.Context, r *pipeline.Rollout, avoid string) (*node, error) {
	for {
		c.mu.Lock()
		if p := c.groups[r.Req.GroupID]; p != nil {
			if n := c.nodes[p.node]; n != nil && n.State == StateLive && n.ID != avoid {
				p.n++
				n.Outstanding++
				c.mu.Unlock()
				return n, nil
			}
		}
		var best *node
		for _, n := range c.nodes {
			if n.State != StateLive || n.ID == avoid && len(c.nodes) > 1 {
				continue
			}
			if best == nil || less(n, best) {
				best = n
			}
		}
		if best != nil {
			best.Outstanding++
			if p := c.groups[r.Req.GroupID]; p != nil {
				p.node = best.ID
				p.n++
			} else {
				c.groups[r.Req.GroupID] = &placement{node: best.ID, n: 1}
			}
			c.mu.Unlock()
			return best, nil
		}
		joined := c.joined
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-joined:
		case <-time.After(time.Second):
		}
	}
}

// less orders nodes by free capacity: outstanding per slot, then id.
func less(a, b *node) bool {
	fa := float64(a.Outstanding) / float64(max(1, a.Load.Capacity))
	fb := float64(b.Outstanding) / float64(max(1, b.Load.Capacity))
	if fa != fb {
		return fa < fb
	}
	return a.ID < b.ID
}

// unplace undoes place's counts once the rollout is back (or moved).
func (c *Coordinator) unplace(r *pipeline.Rollout, nodeID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.nodes[nodeID]; n != nil && n.Outstanding > 0 {
		n.Outstanding--
	}
	if p := c.groups[r.Req.GroupID]; p != nil {
		if p.n--; p.n <= 0 {
			delete(c.groups, r.Req.GroupID)
		}
	}
	if w := c.waiters[r.ID]; w != nil && w.node == nodeID {
		delete(c.waiters, r.ID)
	}
}

// Execute implements pipeline.Executor: it places the rollout on a node
// and waits for the result the node reports; if the node dies first, the
// rollout runs again on another one.
func (c *Coordinator) Execute(ctx context.Context, r *pipeline.Rollout, retry func(why string) (int, error)) (*trajectory.Result, error) {
	req, err := json.Marshal(r.Req)
	if err != nil {
		return nil, err
	}
	avoid := ""
	for {
		n, err := c.place(ctx, r, avoid)
		if err != nil {
			return nil, err
		}
		w := &waiter{node: n.ID, ch: make(chan *trajectory.Result, 1), lost: n.lost}
		c.mu.Lock()
		c.waiters[r.ID] = w
		c.mu.Unlock()
		state, err := c.send(ctx, n, pipeline.Assigned{ID: r.ID, Attempt: r.Attempt, Request: req})
		if err == nil && state == "finished" {
			// The node ran it before (the coordinator restarted since).
			var res *trajectory.Result
			if res, err = c.fetch(ctx, n, r.ID); err == nil {
				c.deliver(n.ID, res)
			}
		}
		if err != nil {
			c.unplace(r, n.ID)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			c.log().Warn("could not place a rollout on a node; trying another", "rollout", r.ID, "node", n.ID, "error", err)
			avoid = n.ID
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		select {
		case res := <-w.ch:
			c.unplace(r, n.ID)
			return res, nil
		case <-w.lost:
			c.unplace(r, n.ID)
			attempt, err := retry("node " + n.ID + " was lost")
			if err != nil {
				return nil, err
			}
			c.log().Info("rollout runs again: its node died", "rollout", r.ID, "node", n.ID, "attempt", attempt)
			avoid = n.ID
		case <-ctx.Done():
			c.unplace(r, n.ID)
			go c.cancelOn(n, r.ID)
			return nil, ctx.Err()
		}
	}
}

// request sends a JSON request with the bearer token and reads at most
// limit bytes of the answer.
func request(ctx context.Context, client *http.Client, token, method, u string, body any, limit int64) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, limit))
	return resp.StatusCode, bytes.TrimSpace(b), nil
}

// call is a request to a node that must succeed; out, if set, takes the answer.
func (c *Coordinator) call(ctx context.Context, method, u string, body any, out any) error {
	// A whole trajectory (fetch) can be large.
	status, b, err := request(ctx, c.o.Client, c.o.Token, method, u, body, 64<<20)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, u, status, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (c *Coordinator) send(ctx context.Context, n *node, a pipeline.Assigned) (string, error) {
	var out struct {
		Rollouts []pipeline.AssignedState `json:"rollouts"`
	}
	if err := c.call(ctx, http.MethodPost, n.URL+"/v1/node/rollouts", map[string]any{"rollouts": []pipeline.Assigned{a}}, &out); err != nil {
		return "", err
	}
	if len(out.Rollouts) != 1 {
		return "", fmt.Errorf("node %s answered %d states for 1 rollout", n.ID, len(out.Rollouts))
	}
	return out.Rollouts[0].State, nil
}

func (c *Coordinator) fetch(ctx context.Context, n *node, id string) (*trajectory.Result, error) {
	var res trajectory.Result
	if err := c.call(ctx, http.MethodGet, n.URL+"/v1/rollouts/"+url.PathEscape(id), nil, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// cancelOn forwards a cancel to the node running the rollout, best effort.
func (c *Coordinator) cancelOn(n *node, id string) {
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	if err := c.call(ctx, http.MethodDelete, n.URL+"/v1/rollouts/"+url.PathEscape(id), nil, nil); err != nil {
		c.log().Debug("forward cancel", "rollout", id, "node", n.ID, "error", err)
	}
}

// deliver hands a node's result to the rollout waiting for it from that
// node; a stale one (the rollout moved on, or finished) is only acked.
func (c *Coordinator) deliver(nodeID string, res *trajectory.Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.nodes[nodeID]; n != nil {
		n.toAck = append(n.toAck, res.ID)
	}
	if w := c.waiters[res.ID]; w != nil && w.node == nodeID {
		select {
		case w.ch <- res:
		default:
		}
	}
}

// startStream follows a node's results stream until the node's
// incarnation ends. c.mu is held.
func (c *Coordinator) startStream(n *node) {
	ctx, cancel := context.WithCancel(c.ctx)
	n.cancel = cancel
	id, u := n.ID, n.URL
	go func() {
		var since uint64
		for ctx.Err() == nil {
			err := c.stream(ctx, id, u, &since)
			if ctx.Err() != nil {
				return
			}
			c.log().Debug("node results stream ended; reconnecting", "node", id, "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
}

func (c *Coordinator) stream(ctx context.Context, id, u string, since *uint64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/results/stream?since=%d", u, *since), nil)
	if err != nil {
		return err
	}
	if c.o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.Token)
	}
	// No client timeout: the stream is long-lived; ctx ends it.
	resp, err := (&http.Client{Transport: c.o.Client.Transport, CheckRedirect: NoRedirects}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("results stream: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		var res trajectory.Result
		// Whole trajectories, one per rollout: the coordinator's main cost.
		// goccy's decoder panics on some malformed input (a line cut
		// short); encoding/json's validator passes only whole documents.
		if !json.Valid(sc.Bytes()) {
			return fmt.Errorf("results stream: a line that is not JSON (%d bytes)", len(sc.Bytes()))
		}
		if err := fastjson.Unmarshal(sc.Bytes(), &res); err != nil {
			return fmt.Errorf("results stream: %w", err)
		}
		if res.Seq > *since {
			*since = res.Seq
		}
		c.deliver(id, &res)
	}
	return sc.Err()
}

// acker acknowledges nodes' results once the coordinator has persisted
// them (or they are stale: the rollout finished from another node), so a
// node holds each result until the coordinator can no longer lose it.
func (c *Coordinator) acker() {
	defer c.wg.Done()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		type batch struct {
			n   *node
			ids []string
		}
		var todo []batch
		c.mu.Lock()
		for _, n := range c.nodes {
			var ack, keep []string
			for _, id := range n.toAck {
				_, persisted := c.o.Store.Get(id)
				w := c.waiters[id]
				if persisted || (w != nil && w.node != n.ID) {
					ack = append(ack, id)
				} else {
					keep = append(keep, id)
				}
			}
			n.toAck = keep
			if len(ack) > 0 && n.State != StateDead {
				todo = append(todo, batch{n, ack})
			}
		}
		c.mu.Unlock()
		for _, b := range todo {
			ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
			if err := c.call(ctx, http.MethodPost, b.n.URL+"/v1/results/ack", map[string]any{"ids": b.ids}, nil); err != nil {
				c.log().Debug("ack on node", "node", b.n.ID, "error", err)
				c.mu.Lock()
				b.n.toAck = append(b.n.toAck, b.ids...)
				c.mu.Unlock()
			}
			cancel()
		}
	}
}

// NodeReply is one node's answer to a broadcast request.
type NodeReply struct {
	Status int             `json:"status,omitempty"`
	Body   json.RawMessage `json:"body,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// Broadcast sends a request to every node that is not dead, in parallel
// (policy changes, pauses): each node's answer, by node id.
func (c *Coordinator) Broadcast(ctx context.Context, method, path string, body any) map[string]NodeReply {
	c.mu.Lock()
	var targets []*node
	for _, n := range c.nodes {
		if n.State != StateDead {
			targets = append(targets, n)
		}
	}
	c.mu.Unlock()
	out := make(map[string]NodeReply, len(targets))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep := c.ask(ctx, method, n.URL+path, body)
			mu.Lock()
			out[n.ID] = rep
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// ask is one request whose answer, whatever its status, is the result.
func (c *Coordinator) ask(ctx context.Context, method, u string, body any) NodeReply {
	status, b, err := request(ctx, c.o.Client, c.o.Token, method, u, body, 1<<20)
	if err != nil {
		return NodeReply{Error: err.Error()}
	}
	rep := NodeReply{Status: status}
	if json.Valid(b) {
		rep.Body = b
	} else {
		rep.Error = string(b)
	}
	return rep
}

// SetPolicySource tells the coordinator where the current policy version
// is, so a node that joins is brought up to it.
func (c *Coordinator) SetPolicySource(f func() int64) {
	c.mu.Lock()
	c.policy = f
	c.mu.Unlock()
}

// syncPolicy brings a node that joined to the current policy version.
func (c *Coordinator) syncPolicy(n *node) {
	c.mu.Lock()
	f := c.policy
	c.mu.Unlock()
	if f == nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	if rep := c.ask(ctx, http.MethodPut, n.URL+"/v1/policy", map[string]int64{"version": f()}); rep.Status != http.StatusOK {
		c.log().Warn("could not bring a node to the current policy version", "node", n.ID, "status", rep.Status, "body", string(rep.Body), "error", rep.Error)
	}
}

// AddBackend gives an inference server to the live node with the fewest
// backends (its last heartbeat's count plus those given since).
func (c *Coordinator) AddBackend(ctx context.Context, req any) (string, NodeReply, error) {
	c.mu.Lock()
	var best *node
	for _, n := range c.nodes {
		if n.State != StateLive {
			continue
		}
		if best == nil || n.Load.Backends+n.given < best.Load.Backends+best.given || (n.Load.Backends+n.given == best.Load.Backends+best.given && n.ID < best.ID) {
			best = n
		}
	}
	if best == nil {
		c.mu.Unlock()
		return "", NodeReply{}, errors.New("no live node to give the backend to")
	}
	best.given++
	c.mu.Unlock()
	return best.ID, c.ask(ctx, http.MethodPost, best.URL+"/v1/backends", req), nil
}
