package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/prorl/prorl/sdk/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// batchingClient is a plugin process's client that sends Prepare and
// Evaluate calls made while an earlier call or batch is being answered as
// one PrepareBatch (EvaluateBatch) stream. When a trainer submits a step, the
// init workers' Prepare calls all arrive at once; each unary call paid its
// own stream, headers and goroutine hand-offs on both sides.
type batchingClient struct {
	pb.TaskDomainClient
	prepare  *coalescer[*pb.PrepareRequest, *pb.PrepareResponse]
	evaluate *coalescer[*pb.EvaluateRequest, *pb.EvaluateResponse]
}

func newBatchingClient(c pb.TaskDomainClient) *batchingClient {
	return &batchingClient{
		TaskDomainClient: c,
		prepare: newCoalescer(c.Prepare, func(ctx context.Context, rs []*pb.PrepareRequest) (func() (uint32, *pb.PrepareResponse, error), error) {
			st, err := c.PrepareBatch(ctx, &pb.PrepareBatchRequest{Requests: rs})
			return answers(st, err, func(it *pb.PrepareBatchItem) (uint32, *pb.PrepareResponse) { return it.Index, it.Response })
		}),
		evaluate: newCoalescer(c.Evaluate, func(ctx context.Context, rs []*pb.EvaluateRequest) (func() (uint32, *pb.EvaluateResponse, error), error) {
			st, err := c.EvaluateBatch(ctx, &pb.EvaluateBatchRequest{Requests: rs})
			return answers(st, err, func(it *pb.EvaluateBatchItem) (uint32, *pb.EvaluateResponse) { return it.Index, it.Response })
		}),
	}
}

func newCoalescer[Req proto.Message, Resp any](unary func(context.Context, Req, ...grpc.CallOption) (Resp, error),
	open func(context.Context, []Req) (func() (uint32, Resp, error), error)) *coalescer[Req, Resp] {
	return &coalescer[Req, Resp]{
		unary: func(ctx context.Context, r Req) (Resp, error) { return unary(ctx, r) },
		open:  open,
		size:  func(r Req) int { return proto.Size(r) },
	}
}

// answers reads a batch stream's items as (index, answer).
func answers[Item, Resp any](st grpc.ServerStreamingClient[Item], err error, of func(*Item) (uint32, Resp)) (func() (uint32, Resp, error), error) {
	if err != nil {
		return nil, err
	}
	return func() (uint32, Resp, error) {
		it, err := st.Recv()
		if err != nil {
			var zero Resp
			return 0, zero, err
		}
		i, r := of(it)
		return i, r, nil
	}, nil
}

// Prepare goes through the coalescer (call options: a unary call).
func (b *batchingClient) Prepare(ctx context.Context, in *pb.PrepareRequest, opts ...grpc.CallOption) (*pb.PrepareResponse, error) {
	if len(opts) > 0 {
		return b.TaskDomainClient.Prepare(ctx, in, opts...)
	}
	return b.prepare.do(ctx, in)
}

// Evaluate goes through the coalescer (call options: a unary call).
func (b *batchingClient) Evaluate(ctx context.Context, in *pb.EvaluateRequest, opts ...grpc.CallOption) (*pb.EvaluateResponse, error) {
	if len(opts) > 0 {
		return b.TaskDomainClient.Evaluate(ctx, in, opts...)
	}
	return b.evaluate.do(ctx, in)
}

// batchWindow bounds how long calls queue behind a batch not yet fully
// answered: a batch of slow calls (an SWE test run) must not hold the next.
const batchWindow = 2 * time.Millisecond

// A batch is cut at maxBatch calls or batchBytes of requests: a gRPC
// message is limited to 4 MiB by default, and an SWE rollout's Evaluate
// carries its whole conversation. (A lone call over the limit goes alone,
// and fails as its unary call would.)
const (
	maxBatch   = 256
	batchBytes = 1 << 20
)

// coalescer sends calls one batch at a time: a call that arrives while the
// last call or batch is unanswered (for at most batchWindow) waits for the
// next batch, which carries every call queued by then. A lone call goes at
// once, as a unary call (a batch of one cost a stream and two goroutine
// hand-offs more: 340 against 285 µs a call, BenchmarkLoneCall).
type coalescer[Req, Resp any] struct {
	unary func(context.Context, Req) (Resp, error)
	open  func(context.Context, []Req) (recv func() (uint32, Resp, error), err error)
	size  func(Req) int

	mu      sync.Mutex
	queue   []*pending[Req, Resp]
	sending bool
	// unimplemented: the plugin predates batches; every call is unary.
	unimplemented atomic.Bool
	batches       atomic.Int64 // streams opened
}

type pending[Req, Resp any] struct {
	ctx  context.Context
	req  Req
	done chan struct{}
	resp Resp
	err  error
}

func (c *coalescer[Req, Resp]) do(ctx context.Context, req Req) (Resp, error) {
	if c.unimplemented.Load() {
		return c.unary(ctx, req)
	}
	c.mu.Lock()
	if !c.sending && len(c.queue) == 0 {
		// Alone: a unary call, here. Calls that come meanwhile queue for
		// a batch, sent when this returns or batchWindow has passed.
		c.sending = true
		c.mu.Unlock()
		t := time.AfterFunc(batchWindow, c.handOff)
		resp, err := c.unary(ctx, req)
		if t.Stop() {
			c.handOff()
		}
		return resp, err
	}
	p := &pending[Req, Resp]{ctx: ctx, req: req, done: make(chan struct{})}
	c.queue = append(c.queue, p)
	lead := !c.sending
	c.sending = true
	c.mu.Unlock()
	if lead {
		go c.send()
	}
	select {
	case <-p.done:
		return p.resp, p.err
	case <-ctx.Done():
		var zero Resp
		return zero, ctx.Err()
	}
}

// handOff ends a lone call's watch over the queue: a sender takes what
// has queued meanwhile.
func (c *coalescer[Req, Resp]) handOff() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		c.sending = false
		return
	}
	go c.send()
}

// send sends the queue as batches until it is empty, each after the last
// was answered or batchWindow passed.
func (c *coalescer[Req, Resp]) send() {
	for {
		c.mu.Lock()
		n, bytes := 0, 0
		for n < len(c.queue) && n < maxBatch {
			if bytes += c.size(c.queue[n].req); bytes > batchBytes && n > 0 {
				break
			}
			n++
		}
		batch := c.queue[:n:n]
		c.queue = c.queue[n:]
		if len(batch) == 0 {
			c.queue, c.sending = nil, false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		answered := c.run(batch)
		t := time.NewTimer(batchWindow)
		select {
		case <-answered:
		case <-t.C:
		}
		t.Stop()
	}
}

// run sends one batch and returns a channel closed when every call in it
// has its answer (or error).
func (c *coalescer[Req, Resp]) run(batch []*pending[Req, Resp]) <-chan struct{} {
	answered := make(chan struct{})
	if c.unimplemented.Load() {
		close(answered)
		for _, p := range batch {
			go c.finishUnary(p)
		}
		return answered
	}
	// The stream lives while any caller still waits: one that gave up
	// (its rollout cancelled) leaves the rest to be answered.
	ctx, cancel := context.WithCancel(context.Background())
	reqs := make([]Req, len(batch))
	for i, p := range batch {
		reqs[i] = p.req
	}
	go func() {
		defer close(answered)
		defer cancel()
		w := watch(batch, cancel)
		defer w.stop()
		left, err := c.receive(ctx, batch, reqs, w)
		if left == 0 {
			return
		}
		if status.Code(err) == codes.Unimplemented {
			c.unimplemented.Store(true)
			for _, p := range batch {
				go c.finishUnary(p)
			}
			return
		}
		for _, p := range batch {
			if !p.isDone() {
				p.err = err
				close(p.done)
			}
		}
	}()
	return answered
}

// receive sends the batch and hands each answer to its caller; it returns
// how many got none, and why.
func (c *coalescer[Req, Resp]) receive(ctx context.Context, batch []*pending[Req, Resp], reqs []Req, w *waiters) (int, error) {
	c.batches.Add(1)
	recv, err := c.open(ctx, reqs)
	if err != nil {
		return len(batch), err
	}
	for left := len(batch); left > 0; left-- {
		i, resp, err := recv()
		if errors.Is(err, io.EOF) {
			return left, fmt.Errorf("plugin's batch answer left out %d of %d calls", left, len(batch))
		}
		if err != nil {
			return left, err
		}
		if int(i) >= len(batch) || batch[i].isDone() {
			return left, fmt.Errorf("plugin answered batch item %d of %d twice or out of range", i, len(batch))
		}
		batch[i].resp = resp
		close(batch[i].done)
		w.answered(int(i))
	}
	return 0, nil
}

func (c *coalescer[Req, Resp]) finishUnary(p *pending[Req, Resp]) {
	p.resp, p.err = c.unary(p.ctx, p.req)
	close(p.done)
}

func (p *pending[Req, Resp]) isDone() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waiters ends a batch's stream once none of its callers waits for it:
// each was answered or gave up (its rollout cancelled, its deadline passed).
type waiters struct {
	left   atomic.Int64
	cancel func()
	stops  []func() bool
}

func watch[Req, Resp any](batch []*pending[Req, Resp], cancel func()) *waiters {
	w := &waiters{cancel: cancel, stops: make([]func() bool, len(batch))}
	w.left.Store(int64(len(batch)))
	for i, p := range batch {
		w.stops[i] = context.AfterFunc(p.ctx, w.gone)
	}
	return w
}

func (w *waiters) gone() {
	if w.left.Add(-1) == 0 {
		w.cancel()
	}
}

// answered: caller i waits no more (unless it gave up first: counted then).
func (w *waiters) answered(i int) {
	if w.stops[i]() {
		w.gone()
	}
}

func (w *waiters) stop() {
	for _, s := range w.stops {
		s()
	}
}
