// Package backend talks to inference servers and chooses one per rollout:
// protocol clients (vLLM, NeMo RL's /generate), a load-keyed min-heap with
// sticky leases, and health checks.
package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"encoding/json"

	fastjson "github.com/goccy/go-json"
	"github.com/prorl/prorl/core/baseurl"
	"github.com/prorl/prorl/core/httpc"

	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/core/trajectory"
)

// GenerateRequest is one turn's generation: token ids in.
type GenerateRequest struct {
	PromptIDs   []int
	MaxTokens   int
	Temperature float64
	TopP        float64
	TopK        int
	Seed        *int64
	Stop        []string
	// IgnoreEOS generates exactly MaxTokens (vLLM's ignore_eos: fixed
	// output lengths for benchmarks).
	IgnoreEOS bool
	// Priority is vLLM's request priority (lower is served first under
	// --scheduling-policy priority; vLLM 0.32 ignores it otherwise, older
	// versions refuse it).
	Priority int
	// CacheSalt separates the server's prefix cache: requests reuse each
	// other's cached prefix only under the same salt (vLLM's cache_salt,
	// SGLang's extra_key). Empty: none.
	CacheSalt string
}

// GenerateResult is token ids and their logprobs out.
type GenerateResult struct {
	IDs          []int
	Logprobs     []float64
	Text         string
	HasText      bool
	FinishReason string // "stop", "length", or FinishAbort
	// Segments, when a generation was paused and continued, are its
	// consecutive parts, each with the policy version that produced it.
	Segments []Segment
}

// PolicySpans are the result's token spans with the policy version of
// each (nil for a generation made by one request) and the version of its
// first token (def when it has none).
func (g *GenerateResult) PolicySpans(def int64) (int64, []trajectory.PolicySpan) {
	if len(g.Segments) == 0 {
		return def, nil
	}
	first := g.Segments[0].Policy
	if len(g.Segments) == 1 {
		return first, nil
	}
	spans := make([]trajectory.PolicySpan, 0, len(g.Segments))
	at := 0
	for _, s := range g.Segments {
		spans = append(spans, trajectory.PolicySpan{Start: at, End: at + s.Tokens, Version: s.Policy})
		at += s.Tokens
	}
	return first, spans
}

// Truncate keeps the first n tokens (n below their number), as a request
// for n would have ended: finish "length", the text to be decoded again.
func (g *GenerateResult) Truncate(n int) {
	g.IDs, g.Logprobs = g.IDs[:n], g.Logprobs[:n]
	g.Text, g.HasText, g.FinishReason = "", false, "length"
	kept := g.Segments[:0]
	for _, s := range g.Segments {
		if n <= 0 {
			break
		}
		s.Tokens = min(s.Tokens, n)
		n -= s.Tokens
		kept = append(kept, s)
	}
	g.Segments = kept
}

// Segment is a run of a generation's tokens made by one request.
type Segment struct {
	Tokens int
	Policy int64
}

// FinishAbort is the finish reason of a request the server aborted (vLLM's
// pause in abort mode): its tokens so far come back with it.
const FinishAbort = "abort"

// Pauser is a server that stops generating for a weight update: Pause with
// abort ends its in-flight requests (they answer FinishAbort with their
// tokens so far) and holds new ones until Resume.
type Pauser interface {
	Pause(ctx context.Context, abort bool) error
	Resume(ctx context.Context) error
}

// ErrNoPause: the protocol has no pause; in-flight requests are cancelled
// instead and their turn generates again from its start.
var ErrNoPause = errors.New("this backend protocol cannot pause generation")

// Aborter aborts every generation in flight on a backend, each answering
// with the tokens generated so far, and takes requests again at once,
// keeping the prefix cache.
type Aborter interface {
	AbortInFlight(ctx context.Context) error
}

// Client is one inference server's protocol.
type Client interface {
	tokenizer.Tokenizer
	Generate(ctx context.Context, req GenerateRequest) (*GenerateResult, error)
	Health(ctx context.Context) error
}

// StatusError is a non-2xx answer from a backend.
type StatusError struct {
	URL    string
	Status int
	Body   string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s", e.URL, e.Status, e.Body)
}

// dialer is the transport's, as httpc.New's is baseurl's too: a server on
// a Unix socket has a base URL of its own that only baseurl's dialer knows.
var dialer = baseurl.NewDialer()

// transport is shared by all backends: many idle connections per host
// because a thousand rollouts may share one server.
var transport = &http.Transport{
	Proxy:               nil, // backends are addressed directly, never through a proxy from the environment
	DialContext:         dialer.DialContext,
	MaxIdleConns:        4096,
	MaxIdleConnsPerHost: 2048,
	IdleConnTimeout:     90 * time.Second,
}

// HTTPClient is the client of every backend's occasional calls (health,
// models, pause) and of every call to an https backend.
// Redirects are not followed: a backend answers where it was registered
// (a 3xx is an error like any other status).
var HTTPClient = &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// lean is the client of the generation path's POSTs to plain-http backends.
var lean = httpc.New()

// SetIdleConnTimeout sets how long unused backend connections stay open.
func SetIdleConnTimeout(d time.Duration) {
	if d > 0 {
		transport.IdleConnTimeout = d
		lean.IdleTimeout = d
	}
}

// maxResponseBytes bounds what a backend may send back.
const maxResponseBytes = 256 << 20

// bufs are request and response buffers: a turn's two calls would
// otherwise allocate (and zero) their bodies each time.
var bufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuf() *bytes.Buffer {
	b := bufs.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

// putBuf keeps ordinary buffers only: one huge answer must not stay pinned.
func putBuf(b *bytes.Buffer) {
	if b.Cap() <= 4<<20 {
		bufs.Put(b)
	}
}

func postJSON(ctx context.Context, url string, in, out any) error {
	reqBuf := getBuf()
	defer putBuf(reqBuf)
	if a, ok := in.(appender); ok {
		body, err := a.appendJSON(reqBuf.AvailableBuffer())
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		reqBuf.Write(body)
	} else if err := fastjson.NewEncoder(reqBuf).Encode(in); err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	respBuf := getBuf()
	defer putBuf(respBuf)
	status, err := post(ctx, url, reqBuf.Bytes(), respBuf)
	if err != nil {
		return err
	}
	data := respBuf.Bytes()
	if status/100 != 2 {
		return statusError(url, status, data)
	}
	// Decoders copy what they keep: data goes back to the pool. What the
	// fast decoders decline goes to encoding/json: goccy's decoder panics
	// on some malformed input (`{"\`, found by FuzzFastDecode), and a
	// backend's answer is not ours to trust.
	if f, ok := out.(fastDecoder); ok && f.decodeFast(data) {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s: decode response: %w", url, err)
	}
	return nil
}

// statusError is a non-2xx answer to a POST, its body cut to 512 bytes.
func statusError(url string, status int, body []byte) *StatusError {
	return &StatusError{URL: url, Status: status, Body: string(body[:min(len(body), 512)])}
}

// post sends a JSON body and reads the answer into out: plain-http
// backends through the lean client, anything else through net/http.
func post(ctx context.Context, url string, body []byte, out *bytes.Buffer) (int, error) {
	status, err := lean.Post(ctx, url, "application/json", body, out, maxResponseBytes)
	if !errors.Is(err, httpc.ErrUnsupported) {
		if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("POST %s: %w", url, err)
		}
		return status, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := HTTPClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.ContentLength > 0 && resp.ContentLength <= maxResponseBytes {
		out.Grow(int(resp.ContentLength))
	}
	if _, err := out.ReadFrom(io.LimitReader(resp.Body, maxResponseBytes)); err != nil {
		return 0, fmt.Errorf("%s: read response: %w", url, err)
	}
	return resp.StatusCode, nil
}

// fastDecoder is a response with a decoder for its usual shape (fastjson.go);
// false (with out reset) sends the bytes to the generic decoder.
type fastDecoder interface{ decodeFast([]byte) bool }

// postQuery posts an empty request to url and expects a 2xx answer.
func postQuery(ctx context.Context, url string) error { return send(ctx, http.MethodPost, url, nil) }

func getOK(ctx context.Context, url string) error { return getJSON(ctx, url, nil) }

// NewClient returns the client of a protocol.
func NewClient(protocol, baseURL, model string) (Client, error) {
	switch protocol {
	case "vllm":
		return &VLLM{BaseURL: baseURL, Model: model}, nil
	case "generate":
		return &Generate{VLLM: VLLM{BaseURL: baseURL, Model: model}}, nil
	case "sglang":
		return &SGLang{BaseURL: baseURL, Model: model}, nil
	}
	return nil, fmt.Errorf("unknown protocol %q", protocol)
}

// openAIMessages are messages as a server takes them: without the
// host's own fields (a message's token span).
func openAIMessages(msgs []trajectory.Message) []trajectory.Message {
	out := make([]trajectory.Message, len(msgs))
	for i, m := range msgs {
		m.Span = nil
		out[i] = m
	}
	return out
}

func getJSON(ctx context.Context, url string, out any) error {
	return send(ctx, http.MethodGet, url, out)
}

// send makes a bodiless request and decodes a 2xx answer into out (nil: ignored).
func send(ctx context.Context, method, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return err
	}
	resp, err := HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return &StatusError{URL: url, Status: resp.StatusCode, Body: string(data)}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}
