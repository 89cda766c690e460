package sdk

import (
	"context"
	"sync"

	pb "github.com/prorl/prorl/sdk/proto"
	"google.golang.org/grpc"
)

// PrepareBatch serves each request as Prepare does, concurrently, and
// sends each answer as it is ready.
func (s *server) PrepareBatch(req *pb.PrepareBatchRequest, stream grpc.ServerStreamingServer[pb.PrepareBatchItem]) error {
	return serveBatch(stream.Context(), req.Requests, s.Prepare, func(i int, r *pb.PrepareResponse) error {
		return stream.Send(&pb.PrepareBatchItem{Index: uint32(i), Response: r})
	})
}

// EvaluateBatch is PrepareBatch for Evaluate.
func (s *server) EvaluateBatch(req *pb.EvaluateBatchRequest, stream grpc.ServerStreamingServer[pb.EvaluateBatchItem]) error {
	return serveBatch(stream.Context(), req.Requests, s.Evaluate, func(i int, r *pb.EvaluateResponse) error {
		return stream.Send(&pb.EvaluateBatchItem{Index: uint32(i), Response: r})
	})
}

// serveBatch runs call on every request at once (as the unary calls of a
// batch's rollouts would run) and sends each answer as its call returns.
// The first failed send ends the stream (the host is gone); calls under
// way see the stream's context end.
func serveBatch[Req, Resp any](ctx context.Context, reqs []Req, call func(context.Context, Req) (Resp, error), send func(int, Resp) error) error {
	var mu sync.Mutex // a stream's Send is not safe for concurrent use
	var sendErr error
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := call(ctx, r)
			if err != nil { // the unary handlers answer in-band: never
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if sendErr == nil {
				sendErr = send(i, resp)
			}
		}()
	}
	wg.Wait()
	return sendErr
}
