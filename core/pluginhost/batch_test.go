package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/prorl/prorl/core/config"
	pb "github.com/prorl/prorl/sdk/proto"
)

// TestBatchedCallsMatchUnary: many rollouts' Prepare and Evaluate calls at
// once through a plugin's Conn go out in batches, and each caller gets the
// answer the plugin's unary call gives for its own request — with the Go
// SDK's batches and the Python SDK's, each in a real plugin process. The
// tasks differ, so an answer handed to the wrong caller shows.
func TestBatchedCallsMatchUnary(t *testing.T) {
	for lang, pc := range countdowns(t) {
		t.Run(lang, func(t *testing.T) {
			m, err := Start(context.Background(), hclog.NewNullLogger(), map[string]*config.Plugin{"countdown": pc()}, nil, Options{Instance: "t", SocketDir: shortDir(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Stop()
			p, _ := m.Get("countdown")
			c, err := p.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			bc := c.rpc.(*batchingClient)
			const n = 300
			ctx := context.Background()
			preps := make([]*pb.PrepareRequest, n)
			evals := make([]*pb.EvaluateRequest, n)
			for i := range preps {
				task := []byte(fmt.Sprintf(`{"nums":[%d,%d],"target":%d}`, i, i+1, 2*i+1))
				if i%7 == 0 {
					task = []byte(`{"nums":[]}`) // refused: a diagnostic, in its own item
				}
				preps[i] = &pb.PrepareRequest{RolloutId: fmt.Sprintf("r%d", i), TaskJson: task}
				answer := fmt.Sprintf("<answer>%d + %d</answer>", i, i+1)
				if i%2 == 1 {
					answer = "<answer>1</answer>"
				}
				evals[i] = &pb.EvaluateRequest{RolloutId: preps[i].RolloutId, TaskJson: task, FinalResponse: answer, EndReason: "finish"}
			}
			// All at once, as a trainer's step arrives: each phase's calls
			// start together.
			gotP := make([]*pb.PrepareResponse, n)
			gotE := make([]*pb.EvaluateResponse, n)
			together(n, func(i int) (err error) { gotP[i], err = c.rpc.Prepare(ctx, preps[i]); return err }, t)
			together(n, func(i int) (err error) { gotE[i], err = c.rpc.Evaluate(ctx, evals[i]); return err }, t)
			for i := 0; i < n && !t.Failed(); i++ {
				want, err := bc.TaskDomainClient.Prepare(ctx, preps[i])
				if err != nil || !proto.Equal(gotP[i], want) {
					t.Errorf("Prepare %d: batched %v, unary %v (%v)", i, gotP[i], want, err)
				}
				wantE, err := bc.TaskDomainClient.Evaluate(ctx, evals[i])
				if err != nil || !proto.Equal(gotE[i], wantE) {
					t.Errorf("Evaluate %d: batched %v, unary %v (%v)", i, gotE[i], wantE, err)
				}
				if len(gotP[i].Diagnostics) == 0 && gotE[i].Reward != float64(1-i%2) {
					t.Errorf("Evaluate %d: reward %v", i, gotE[i].Reward)
				}
			}
			pb, eb := bc.prepare.batches.Load(), bc.evaluate.batches.Load()
			t.Logf("%d calls each: %d Prepare batches, %d Evaluate batches", n, pb, eb)
			if bc.prepare.unimplemented.Load() || bc.evaluate.unimplemented.Load() {
				t.Fatal("the SDK's batches were refused")
			}
			if pb > n/2 || eb > n/2 {
				t.Errorf("%d concurrent calls were never batched (%d, %d batches)", n, pb, eb)
			}
		})
	}
}

// together runs call(0..n-1) in goroutines released at once.
func together(n int, call func(int) error, t *testing.T) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := call(i); err != nil {
				t.Errorf("batched call %d: %v", i, err)
			}
		}()
	}
	close(start)
	wg.Wait()
}

// TestCrashMidBatch: when the plugin process dies with a batch and a lone
// call unanswered, each caller gets an error the host reads as the crash
// (so the pipeline retries it on the restarted process), none an answer.
func TestCrashMidBatch(t *testing.T) {
	m, err := Start(context.Background(), hclog.NewNullLogger(), map[string]*config.Plugin{"envtest": pcfg(envPlugin, "")}, nil, Options{Instance: "t", SocketDir: shortDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	p, _ := m.Get("envtest")
	c, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	bc := c.rpc.(*batchingClient)
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		go func() {
			_, err := c.rpc.Prepare(context.Background(), &pb.PrepareRequest{RolloutId: fmt.Sprintf("r%d", i), TaskJson: []byte(`{"hang":true}`)})
			errs <- err
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for bc.prepare.batches.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if bc.prepare.batches.Load() == 0 {
		t.Fatal("no batch went out")
	}
	time.Sleep(50 * time.Millisecond)
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		select {
		case err := <-errs:
			if err == nil {
				t.Fatal("a call to the killed process was answered")
			}
			if err := p.Check(c.Epoch, err); !errors.Is(err, ErrCrashed) {
				t.Errorf("Check = %v, want the crash", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%d callers still wait on the killed process", 20-i)
		}
	}
}

// unaryOnly is a plugin from before batches: the generated server answers
// PrepareBatch and EvaluateBatch with UNIMPLEMENTED.
type unaryOnly struct {
	pb.UnimplementedTaskDomainServer
}

func (unaryOnly) Prepare(_ context.Context, r *pb.PrepareRequest) (*pb.PrepareResponse, error) {
	return &pb.PrepareResponse{TaskId: r.RolloutId}, nil
}

func (unaryOnly) Evaluate(_ context.Context, r *pb.EvaluateRequest) (*pb.EvaluateResponse, error) {
	return &pb.EvaluateResponse{Metrics: map[string]float64{r.RolloutId: 1}}, nil
}

// TestBatchesFallBackToUnary: against a real gRPC server without the batch
// methods every call is answered, by unary calls from the first refusal on.
func TestBatchesFallBackToUnary(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterTaskDomainServer(s, unaryOnly{})
	go func() { _ = s.Serve(l) }()
	defer s.Stop()
	cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	bc := newBatchingClient(pb.NewTaskDomainClient(cc))
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("r%d", i)
			p, err := bc.Prepare(context.Background(), &pb.PrepareRequest{RolloutId: id})
			if err != nil || p.TaskId != id {
				t.Errorf("Prepare %s: %v %v", id, p, err)
			}
			e, err := bc.Evaluate(context.Background(), &pb.EvaluateRequest{RolloutId: id})
			if err != nil || e.Metrics[id] != 1 || len(e.Metrics) != 1 {
				t.Errorf("Evaluate %s: %v %v", id, e, err)
			}
		}()
	}
	wg.Wait()
	if !bc.prepare.unimplemented.Load() || !bc.evaluate.unimplemented.Load() {
		t.Error("UNIMPLEMENTED was not taken as a plugin without batches")
	}
}

// fakeStream answers a batch as script says, for the coalescer's faults.
type fakeStream struct {
	items []uint32 // indexes answered, in order
	end   error    // after them (nil: io.EOF)
}

func TestBatchFaults(t *testing.T) {
	for _, c := range []struct {
		name   string
		stream fakeStream
		want   string // in every caller's error; "" for answers
	}{
		{"all answered, any order", fakeStream{items: []uint32{2, 0, 1}}, ""},
		{"one left out", fakeStream{items: []uint32{0, 1}}, "left out 1 of 3"},
		{"answered twice", fakeStream{items: []uint32{0, 0, 1, 2}}, "twice or out of range"},
		{"out of range", fakeStream{items: []uint32{0, 3}}, "twice or out of range"},
		{"transport error", fakeStream{items: []uint32{1}, end: errors.New("connection reset")}, "connection reset"},
	} {
		t.Run(c.name, func(t *testing.T) {
			co := &coalescer[int, int]{
				unary: func(context.Context, int) (int, error) { return 0, errors.New("no unary call expected") },
				size:  func(int) int { return 8 },
				open: func(_ context.Context, reqs []int) (func() (uint32, int, error), error) {
					k := 0
					return func() (uint32, int, error) {
						if k == len(c.stream.items) {
							if c.stream.end != nil {
								return 0, 0, c.stream.end
							}
							return 0, 0, io.EOF
						}
						i := c.stream.items[k]
						k++
						if int(i) < len(reqs) {
							return i, reqs[i] * 10, nil
						}
						return i, 0, nil
					}, nil
				},
			}
			// Three callers queued before the batch goes out.
			batch := make([]*pending[int, int], 3)
			for i := range batch {
				batch[i] = &pending[int, int]{ctx: context.Background(), req: i + 1, done: make(chan struct{})}
			}
			<-co.run(batch)
			answered, failed := 0, 0
			for i, p := range batch {
				<-p.done
				switch {
				case p.err == nil && p.resp == (i+1)*10:
					answered++
				case p.err == nil:
					t.Errorf("caller %d got %d: another's answer", i, p.resp)
				case c.want == "" || !strings.Contains(p.err.Error(), c.want):
					t.Errorf("caller %d: %v, want %q", i, p.err, c.want)
				default:
					failed++
				}
			}
			if c.want == "" && answered != 3 || c.want != "" && failed == 0 {
				t.Errorf("%d answered, %d failed", answered, failed)
			}
		})
	}
}

// TestSlowCallHoldsNoOther: a call the plugin takes long over (an SWE test
// run) holds no call that comes after it, whether it went alone (a unary
// call) or in a batch, nor, once its caller gives up, its batch's stream.
func TestSlowCallHoldsNoOther(t *testing.T) {
	streamEnded := make(chan struct{})
	co := &coalescer[int, int]{
		size: func(int) int { return 8 },
		unary: func(ctx context.Context, r int) (int, error) {
			if r == 0 { // a slow call
				<-ctx.Done()
				return 0, ctx.Err()
			}
			return r, nil
		},
		// Answers the batch's other calls at once; a slow one (0) when the
		// stream ends.
		open: func(ctx context.Context, reqs []int) (func() (uint32, int, error), error) {
			next := 0
			return func() (uint32, int, error) {
				for ; next < len(reqs); next++ {
					if reqs[next] != 0 {
						next++
						return uint32(next - 1), reqs[next-1], nil
					}
				}
				<-ctx.Done()
				select {
				case <-streamEnded:
				default:
					close(streamEnded)
				}
				return 0, 0, ctx.Err()
			}, nil
		},
	}
	slow := func(ctx context.Context) chan error {
		done := make(chan error, 1)
		go func() { _, err := co.do(ctx, 0); done <- err }()
		return done
	}
	call := func(v int) {
		t.Helper()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if got, err := co.do(ctx, v); err != nil || got != v {
			t.Fatalf("call %d behind slow ones: %v %v", v, got, err)
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("call %d waited %v behind slow ones", v, el)
		}
	}
	loneCtx, giveUpLone := context.WithCancel(context.Background())
	lone := slow(loneCtx) // alone: a unary call
	time.Sleep(20 * time.Millisecond)
	call(7) // the window behind the lone call has passed: alone too
	// Queued together behind a call in flight, a slow call and another.
	co.mu.Lock()
	co.sending = true
	co.mu.Unlock()
	batchedCtx, giveUpBatched := context.WithCancel(context.Background())
	batched := slow(batchedCtx)
	mate := make(chan struct{})
	go func() {
		defer close(mate)
		// A context that never ends: answered, it waits no more all the same.
		if v, err := co.do(context.Background(), 9); err != nil || v != 9 {
			t.Errorf("batch-mate of a slow call: %v %v", v, err)
		}
	}()
	time.Sleep(20 * time.Millisecond)
	go co.handOff() // as the call in flight returns: one batch of both
	<-mate          // answered though its batch-mate is not
	time.Sleep(20 * time.Millisecond)
	call(8) // behind that batch, unanswered: sent after batchWindow
	giveUpBatched()
	if err := <-batched; !errors.Is(err, context.Canceled) {
		t.Errorf("the slow batched caller got %v", err)
	}
	select {
	case <-streamEnded:
	case <-time.After(5 * time.Second):
		t.Error("the stream outlived every caller of its batch")
	}
	giveUpLone()
	if err := <-lone; !errors.Is(err, context.Canceled) {
		t.Errorf("the slow lone caller got %v", err)
	}
}
