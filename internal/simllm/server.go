package simllm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	json "github.com/goccy/go-json"
	"github.com/prorl/prorl/core/tokenizer"
	"github.com/prorl/prorl/sdk/schema"
	"hash/fnv"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure the simulator.
type Options struct {
	Model       string
	MaxModelLen int
	// Scripts are what the policy plays for the tasks it knows; for any
	// other task it tries each tool the prompt offers once, then gives up.
	Scripts []Script
	// CorrectRate is the share of rollouts that play a script's right way
	// (the rest play its wrong way), decided per (seed, question).
	CorrectRate float64
	// MalformedRate is the share of turns with a malformed tool call.
	MalformedRate float64
	// PlainRate is the share of final turns that answer in text with no finish call.
	PlainRate float64
	// TokenLatency is the time per generated token; Slots bounds concurrent generations (0: unbounded).
	TokenLatency time.Duration
	Slots        int
	// Engine, when set, times generations by a model of a batching engine
	// with a prefix cache (and replaces TokenLatency and Slots).
	Engine *EngineModel
	// FailRate answers that share of generation requests with HTTP 500;
	// DropRate closes that share of connections without an answer (chaos tests).
	FailRate float64
	DropRate float64
	// Log receives one JSON line per request and response.
	Log io.Writer
	// Local replaces the simulator's toy tokenizer and chat template with a
	// real model directory's (its tokenizer.json and chat template), so a
	// host with the same [tokenizer] model_dir can skip /tokenize.
	Local *tokenizer.Local
}

// Server is the simulator's HTTP handler.
type Server struct {
	opt Options
	tok vocab
	// render applies the chat template (the simulator's own, or a model
	// directory's).
	render  func(msgs []Message, tools []Tool, addGenerationPrompt bool) (string, error)
	imEnd   int
	scripts *scriptBook
	slots   chan struct{}
	engine  *Engine
	logMu   sync.Mutex
	logW    *bufio.Writer
	n       atomic.Uint64
	// chaosN counts the requests chaos drew for.
	chaosN atomic.Uint64
	mux    *http.ServeMux
	pause  pauseState
}

// New returns a simulator.
func New(opt Options) *Server {
	if opt.Model == "" {
		opt.Model = "prorl-sim"
	}
	if opt.MaxModelLen == 0 {
		opt.MaxModelLen = 32768
	}
	s := &Server{opt: opt, tok: NewTokenizer(), mux: http.NewServeMux(), imEnd: idImEnd, scripts: newScriptBook(opt.Scripts),
		render: func(m []Message, t []Tool, agp bool) (string, error) { return RenderChat(m, t, agp), nil }}
	if opt.Local != nil {
		s.useModel(opt.Local)
	}
	if opt.Engine != nil {
		s.engine = NewEngine(*opt.Engine)
	} else if opt.Slots > 0 {
		s.slots = make(chan struct{}, opt.Slots)
	}
	if opt.Log != nil {
		s.logW = bufio.NewWriterSize(opt.Log, 1<<16)
	}
	s.mux.HandleFunc("POST /v1/completions", s.completions)
	s.mux.HandleFunc("POST /v1/chat/completions", s.chatCompletions)
	s.mux.HandleFunc("POST /generate", s.generate)
	s.mux.HandleFunc("POST /tokenize", s.tokenize)
	s.mux.HandleFunc("POST /detokenize", s.detokenize)
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	s.mux.HandleFunc("GET /v1/models", s.models)
	s.mux.HandleFunc("GET /sim/stats", s.engineStats)
	s.mux.HandleFunc("POST /pause", s.pauseHandler)
	s.mux.HandleFunc("POST /resume", s.resumeHandler)
	s.mux.HandleFunc("GET /is_paused", s.isPaused)
	s.pause.abort = make(chan struct{})
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Flush writes buffered log lines.
func (s *Server) Flush() {
	if s.logW == nil {
		return
	}
	s.logMu.Lock()
	defer s.logMu.Unlock()
	_ = s.logW.Flush()
}

// LogEntry is one line of the request log.
type LogEntry struct {
	Seq      uint64          `json:"seq"`
	Time     time.Time       `json:"time"`
	Path     string          `json:"path"`
	Request  json.RawMessage `json:"request"`
	Response json.RawMessage `json:"response,omitempty"`
	Status   int             `json:"status"`
	Decision *Decision       `json:"decision,omitempty"`
}

// Decision is what the scripted policy chose for a generation.
type Decision struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
	Correct  bool   `json:"correct"`
	Action   string `json:"action"` // the tool called, finish, plain, malformed, or explore:TOOL for an unknown task
	Scripted bool   `json:"scripted"`
	Turn     int    `json:"turn"`
}

// begin reads and decodes a request; on failure it answers 400, logs, and
// returns false. The caller logs the returned entry when done.
func (s *Server) begin(w http.ResponseWriter, r *http.Request, v any, strict bool) (*LogEntry, bool) {
	body, err := readBody(r)
	if err != nil {
		return nil, false
	}
	e := &LogEntry{Path: r.URL.Path, Request: body}
	if strict {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		err = dec.Decode(v)
	} else {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		e.Status, e.Response = 400, s.apiError(w, 400, "invalid request: "+err.Error())
		s.logEntry(e)
		return nil, false
	}
	return e, true
}

func (s *Server) logEntry(e *LogEntry) {
	if s.logW == nil {
		return
	}
	e.Seq, e.Time = s.n.Add(1), time.Now()
	b, _ := json.Marshal(e)
	s.logMu.Lock()
	_, _ = s.logW.Write(b)
	_ = s.logW.WriteByte('\n')
	_ = s.logW.Flush()
	s.logMu.Unlock()
}

// apiError writes vLLM's error body.
func (s *Server) apiError(w http.ResponseWriter, status int, msg string) []byte {
	return s.apiErrorParam(w, status, msg, "")
}

// apiErrorParam is vLLM's error answer (0.32: ErrorResponse{error:
// ErrorInfo}), naming the request field at fault if param is set.
func (s *Server) apiErrorParam(w http.ResponseWriter, status int, msg, param string) []byte {
	typ := map[int]string{400: "BadRequestError", 404: "NotFoundError", 422: "UnprocessableEntityError",
		500: "InternalServerError", 503: "ServiceUnavailableError"}[status]
	if typ == "" {
		typ = http.StatusText(status)
	}
	info := map[string]any{"message": msg, "type": typ, "param": nil, "code": status}
	if param != "" {
		info["param"] = param
	}
	b, _ := json.Marshal(map[string]any{"error": info})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return b
}

// writeJSON answers v with its length, as vLLM (uvicorn) does: net/http
// would send an answer over 2 KiB in chunks, in several writes.
func writeJSON(w http.ResponseWriter, v any) []byte {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
	return b
}

func readBody(r *http.Request) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r.Body, 256<<20))
}

func hash64(parts ...any) uint64 {
	var buf [128]byte
	b := buf[:0]
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			b = append(b, v...)
		case int:
			b = strconv.AppendInt(b, int64(v), 10)
		case int64:
			b = strconv.AppendInt(b, v, 10)
		case uint64:
			b = strconv.AppendUint(b, v, 10)
		default:
			b = fmt.Append(b, v)
		}
		b = append(b, 0)
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	// FNV-1a barely mixes its last bytes into the high bits, so inputs
	// differing only in a trailing counter hashed to nearly equal values
	// (a lone retried request failed again and again); splitmix64's
	// finaliser spreads every bit.
	x := h.Sum64()
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func unit(parts ...any) float64 { return float64(hash64(parts...)>>11) / float64(1<<53) }

// checkSalt reads a request's cache_salt as vLLM does: absent is none,
// and an empty one is refused.
func (s *Server) checkSalt(w http.ResponseWriter, entry *LogEntry, salt *string) (string, bool) {
	if salt == nil {
		return "", true
	}
	if *salt == "" {
		entry.Status, entry.Response = 400, s.apiError(w, 400, "Parameter 'cache_salt' must be a non-empty string if provided.")
		return "", false
	}
	return *salt, true
}

// chaos injects failures; it reports whether the request was handled.
// Each request draws anew (its own count), as a real server's faults
// strike a request, not a prompt: a retry of the same prompt may pass.
func (s *Server) chaos(w http.ResponseWriter, seed any) bool {
	if s.opt.DropRate == 0 && s.opt.FailRate == 0 {
		return false
	}
	k := s.chaosN.Add(1)
	if s.opt.DropRate > 0 && unit("drop", seed, k) < s.opt.DropRate {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return true
			}
		}
	}
	if s.opt.FailRate > 0 && unit("fail", seed, k) < s.opt.FailRate {
		s.apiError(w, http.StatusInternalServerError, "simulated failure")
		return true
	}
	return false
}

// policy decides the next assistant message from the prompt: the task's
// script (its right or wrong play, drawn per seed), else exploring the tools
// the prompt offers. It knows no domain.
func (s *Server) policy(prompt []int, seed int64) (string, Decision) {
	text := s.tok.Decode(prompt)
	q := firstUser(text)
	turn := strings.Count(text, "<|im_start|>assistant\n") - 1
	sc := s.scripts.find(q)
	if sc == nil {
		// A harness may put its own context first (Codex's environment
		// block): the task is the first user message a script knows.
		for _, u := range userMessages(text) {
			if sc = s.scripts.find(u); sc != nil {
				q = u
				break
			}
		}
	}
	d := Decision{Question: q, Turn: turn}
	if sc == nil {
		// An unknown task: each offered tool once, with arguments its schema
		// accepts, then an admission (a run end to end, no reward).
		var calls []toolSpec
		for _, t := range offeredTools(text) {
			if t.Name != "finish" {
				calls = append(calls, t)
			}
		}
		if turn < len(calls) {
			d.Action = "explore:" + calls[turn].Name
			return toolCall("Let me try the "+calls[turn].Name+" tool.", calls[turn].Name, schema.Example(calls[turn].Parameters)), d
		}
		d.Answer = "I do not know."
		return s.final(d, text, seed, q)
	}
	d.Scripted = true
	rate := s.opt.CorrectRate
	if sc.CorrectRate != nil {
		rate = *sc.CorrectRate
	}
	d.Correct = unit("correct", seed, q) < rate
	play := &sc.Play
	if !d.Correct && sc.Wrong != nil {
		play = sc.Wrong
	}
	d.Answer = play.Final
	if s.opt.MalformedRate > 0 && unit("malformed", seed, q, turn) < s.opt.MalformedRate {
		d.Action = "malformed"
		return "Let me call a tool.\n<tool_call>\n{\"name\": \"think\", \"arguments\": {\"thought\": unquoted}\n</tool_call>", d
	}
	if turn < len(play.Calls) {
		c := play.Calls[turn]
		d.Action = c.Tool
		return toolCall("<think>\nNext step.\n</think>\n", c.Tool, c.Arguments), d
	}
	return s.final(d, text, seed, q)
}

// final ends an episode: the answer through the finish tool when the
// prompt offers one (PlainRate of the time as text anyway), else as text.
func (s *Server) final(d Decision, text string, seed int64, q string) (string, Decision) {
	finish := slices.ContainsFunc(offeredTools(text), func(t toolSpec) bool { return t.Name == "finish" })
	if !finish || (s.opt.PlainRate > 0 && unit("plain", seed, q) < s.opt.PlainRate) {
		d.Action = "plain"
		return d.Answer, d
	}
	d.Action = "finish"
	msg, _ := json.Marshal(struct {
		Message string `json:"message"` // a struct, not a map: the same bytes, a tenth the CPU
	}{d.Answer})
	return toolCall("<think>\nI have it.\n</think>\n\n"+d.Answer, "finish", msg), d
}

// toolCall is a Hermes tool call after some text.
func toolCall(text, name string, args json.RawMessage) string {
	n, _ := json.Marshal(name)
	return fmt.Sprintf("%s\n<tool_call>\n{\"name\": %s, \"arguments\": %s}\n</tool_call>", text, n, args)
}

// userMessages are the contents of the prompt's user messages, in order.
func userMessages(text string) []string {
	const open = "<|im_start|>user\n"
	var out []string
	for {
		i := strings.Index(text, open)
		if i < 0 {
			return out
		}
		text = text[i+len(open):]
		msg := text
		if j := strings.Index(msg, "<|im_end|>"); j >= 0 {
			msg = msg[:j]
		}
		out = append(out, msg)
	}
}

func firstUser(text string) string {
	const open = "<|im_start|>user\n"
	i := strings.Index(text, open)
	if i < 0 {
		return ""
	}
	rest := text[i+len(open):]
	if j := strings.Index(rest, "<|im_end|>"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// The /v1/completions response, field for field as vLLM writes it.
type completionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   usage              `json:"usage"`
}

type completionChoice struct {
	Index          int                 `json:"index"`
	Text           string              `json:"text"`
	Logprobs       *completionLogprobs `json:"logprobs"`
	FinishReason   string              `json:"finish_reason"`
	StopReason     *string             `json:"stop_reason"`
	TokenIDs       []int               `json:"token_ids,omitempty"`
	PromptTokenIDs []int               `json:"prompt_token_ids,omitempty"`
}

type completionLogprobs struct {
	TextOffset    []int                `json:"text_offset"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	Tokens        []string             `json:"tokens"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
}

// chatResponse is vLLM's ChatCompletionResponse, the fields it sends
// null left out (the protocol comparison with vLLM allows a subset).
type chatResponse struct {
	ID             string       `json:"id"`
	Object         string       `json:"object"`
	Created        int64        `json:"created"`
	Model          string       `json:"model"`
	Choices        []chatChoice `json:"choices"`
	Usage          usage        `json:"usage"`
	PromptTokenIDs []int        `json:"prompt_token_ids"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      chatMessage   `json:"message"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
	StopReason   *string       `json:"stop_reason"`
	TokenIDs     []int         `json:"token_ids"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatLogprobs struct {
	Content []chatLogprob `json:"content"`
}

type chatLogprob struct {
	Token       string           `json:"token"`
	Logprob     float64          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []chatTopLogprob `json:"top_logprobs"`
}

type chatTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type genOut struct {
	ids      []int
	logprobs []float64
	text     string
	finish   string
	decision Decision
}

// Close stops the engine model's loop, if any (a server no longer used).
func (s *Server) Close() {
	if s.engine != nil {
		s.engine.Stop()
	}
}

// EngineStats are the engine model's counters (false without one).
func (s *Server) EngineStats() (EngineStats, bool) {
	if s.engine == nil {
		return EngineStats{}, false
	}
	return s.engine.Stats(), true
}

func (s *Server) engineStats(w http.ResponseWriter, _ *http.Request) {
	st, ok := s.EngineStats()
	if !ok {
		s.apiError(w, 404, "the simulator runs without an engine model (--engine)")
		return
	}
	writeJSON(w, st)
}

// run generates for prompt; with ignoreEOS (vLLM's ignore_eos, how
// benchmarks fix output lengths) exactly maxTokens tokens come back. A
// prompt that ends inside an assistant message (a generation aborted by
// /pause, resumed with its kept tokens) continues that message: the
// scripted policy is deterministic, so the continuation is the rest of what
// it would have written, with the same seed and logprobs.
func (s *Server) run(prompt []int, maxTokens int, ignoreEOS bool, priority int, salt string, reqSeed *int64, r *http.Request) (*genOut, error) {
	// Under first-come-first-served scheduling a priority is ignored, as
	// vLLM 0.32 does (older versions refused it: TestAgainstVLLM/protocol).
	if len(prompt) == 0 {
		return nil, fmt.Errorf("prompt is empty")
	}
	for _, id := range prompt {
		if id < 0 || id >= s.tok.VocabSize() {
			return nil, fmt.Errorf("token id %d is out of vocabulary (size %d)", id, s.tok.VocabSize())
		}
	}
	if maxTokens <= 0 {
		maxTokens = s.opt.MaxModelLen - len(prompt)
	}
	if len(prompt)+maxTokens > s.opt.MaxModelLen {
		//lint:ignore ST1005 vLLM's message, word for word: clients match on it
		return nil, fmt.Errorf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			s.opt.MaxModelLen, len(prompt)+maxTokens, len(prompt), maxTokens)
	}
	abort, leave, err := s.admit(r.Context())
	if err != nil {
		return nil, err
	}
	defer leave()
	base, partial := prompt, []int(nil)
	if !ignoreEOS {
		base, partial = s.continuation(prompt)
	}
	seed := seedOf(reqSeed, base)
	var ids []int
	var d Decision
	finish := "stop"
	if len(partial) > 0 {
		text, dec := s.policy(base, seed)
		full := append(s.tok.Encode(text), s.imEnd)
		if len(partial) < len(full) && slices.Equal(full[:len(partial)], partial) {
			ids, d = full[len(partial):], dec
		} else {
			// Not its own message so far (a template's generation prompt
			// longer than the header): the whole prompt is the prompt.
			base, partial = prompt, nil
			seed = seedOf(reqSeed, base)
		}
	}
	if ignoreEOS && maxTokens > 0 {
		// A benchmark's request (fixed length): no scripted policy, which
		// would decode the whole prompt; ids drawn from the seed.
		ids = make([]int, maxTokens)
		x := uint64(seed) ^ uint64(len(prompt))<<32
		for i := range ids {
			x += 0x9e3779b97f4a7c15 // splitmix64
			z := (x ^ x>>30) * 0xbf58476d1ce4e5b9
			z = (z ^ z>>27) * 0x94d049bb133111eb
			ids[i] = byteBase + int((z^z>>31)%uint64(s.tok.VocabSize()-byteBase))
		}
		finish = "length"
	} else if ids == nil {
		var text string
		text, d = s.policy(base, seed)
		ids = append(s.tok.Encode(text), s.imEnd)
	}
	if len(ids) > maxTokens {
		ids, finish = ids[:maxTokens], "length"
	}
	lps := make([]float64, len(ids))
	for i, id := range ids {
		lps[i] = -3 * unit("lp", seed, len(base), len(partial)+i, id)
	}
	decoded, err := s.wait(r.Context(), abort, prompt, ids, priority, salt)
	if err != nil {
		return nil, err
	}
	if decoded < len(ids) { // aborted by /pause: the tokens so far
		ids, lps, finish = ids[:decoded], lps[:decoded], "abort"
	}
	return &genOut{ids: ids, logprobs: lps, text: s.tok.Decode(ids), finish: finish, decision: d}, nil
}

// wait holds a generation for its simulated time; it returns how many of
// out's tokens were generated (fewer when /pause aborted it).
func (s *Server) wait(ctx context.Context, abort <-chan struct{}, prompt, out []int, priority int, salt string) (int, error) {
	if s.engine != nil {
		err := s.engine.GenerateSalted(ctx, prompt, out, priority, salt)
		if a, ok := err.(*Aborted); ok {
			return a.Decoded, nil
		}
		return len(out), err
	}
	if s.slots != nil {
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		case <-abort:
			return 0, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if s.opt.TokenLatency <= 0 {
		return len(out), nil
	}
	t0 := time.Now()
	select {
	case <-time.After(time.Duration(len(out)) * s.opt.TokenLatency):
		return len(out), nil
	case <-abort:
		return min(len(out), int(time.Since(t0)/s.opt.TokenLatency)), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// continuation splits a prompt that ends inside an assistant message into
// the prompt up to that message's header and the message's tokens so far.
func (s *Server) continuation(prompt []int) (base, partial []int) {
	hdr := s.tok.Encode("<|im_start|>assistant\n")
	for i := len(prompt) - len(hdr); i >= 0; i-- {
		if prompt[i] == s.imEnd {
			return prompt, nil // the last message is closed
		}
		if slices.Equal(prompt[i:i+len(hdr)], hdr) {
			return prompt[:i+len(hdr)], prompt[i+len(hdr):]
		}
	}
	return prompt, nil
}

func seedOf(seed *int64, prompt []int) int64 {
	if seed != nil {
		return *seed
	}
	b := make([]byte, 0, 64)
	for _, id := range prompt[:min(len(prompt), 4096)] {
		b = binary.AppendVarint(b, int64(id))
	}
	return int64(hash64(string(b)))
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model                  string          `json:"model"`
		Prompt                 json.RawMessage `json:"prompt"`
		MaxTokens              *int            `json:"max_tokens"`
		Temperature            *float64        `json:"temperature"`
		TopP                   *float64        `json:"top_p"`
		TopK                   *int            `json:"top_k"`
		Seed                   *int64          `json:"seed"`
		Stop                   []string        `json:"stop"`
		Logprobs               *int            `json:"logprobs"`
		ReturnTokenIDs         bool            `json:"return_token_ids"`
		ReturnTokensAsTokenIDs bool            `json:"return_tokens_as_token_ids"`
		SkipSpecialTokens      *bool           `json:"skip_special_tokens"`
		Stream                 bool            `json:"stream"`
		IgnoreEOS              bool            `json:"ignore_eos"`
		Priority               int             `json:"priority"`
		CacheSalt              *string         `json:"cache_salt"`
	}
	entry, ok := s.begin(w, r, &req, false)
	if !ok {
		return
	}
	defer s.logEntry(entry)
	maxTokens, ok := s.checkSampling(w, entry, req.Model, req.Stream, req.MaxTokens, req.Temperature)
	if !ok {
		return
	}
	var prompt []int
	if err := json.Unmarshal(req.Prompt, &prompt); err != nil {
		var text string
		if json.Unmarshal(req.Prompt, &text) != nil {
			entry.Status, entry.Response = 400, s.apiError(w, 400, "prompt must be a list of token ids or a string")
			return
		}
		prompt = s.tok.Encode(text)
	}
	salt, ok := s.checkSalt(w, entry, req.CacheSalt)
	if !ok {
		return
	}
	seed := seedOf(req.Seed, prompt)
	if s.chaos(w, seed) {
		entry.Status = 500
		return
	}
	out, err := s.run(prompt, maxTokens, req.IgnoreEOS, req.Priority, salt, req.Seed, r)
	if err != nil {
		entry.Status, entry.Response = 400, s.apiError(w, 400, err.Error())
		return
	}
	entry.Decision = &out.decision
	lp := &completionLogprobs{TextOffset: make([]int, len(out.ids)), TokenLogprobs: out.logprobs, Tokens: make([]string, len(out.ids)), TopLogprobs: make([]map[string]float64, len(out.ids))}
	off := 0
	for i, id := range out.ids {
		if req.ReturnTokensAsTokenIDs {
			lp.Tokens[i] = "token_id:" + strconv.Itoa(id)
		} else {
			lp.Tokens[i] = s.tok.TokenString(id)
		}
		lp.TopLogprobs[i] = map[string]float64{lp.Tokens[i]: out.logprobs[i]}
		lp.TextOffset[i] = off
		off += len(s.tok.TokenString(id))
	}
	choice := completionChoice{Text: out.text, FinishReason: out.finish}
	if req.Logprobs != nil {
		choice.Logprobs = lp
	}
	if req.ReturnTokenIDs {
		choice.TokenIDs, choice.PromptTokenIDs = out.ids, prompt
	}
	resp := completionResponse{
		ID: "cmpl-sim-" + strconv.FormatUint(s.n.Load(), 10), Object: "text_completion", Created: time.Now().Unix(), Model: s.opt.Model,
		Choices: []completionChoice{choice},
		Usage:   usage{PromptTokens: len(prompt), CompletionTokens: len(out.ids), TotalTokens: len(prompt) + len(out.ids)},
	}
	entry.Status, entry.Response = 200, writeJSON(w, resp)
}

// checkSampling answers vLLM's errors for the fields the completion and
// chat requests share and returns max_tokens (0 when absent: up to the
// model's length).
func (s *Server) checkSampling(w http.ResponseWriter, entry *LogEntry, model string, stream bool, maxTokens *int, temperature *float64) (int, bool) {
	if model != "" && model != s.opt.Model { // vLLM: an absent model means the served one
		entry.Status, entry.Response = 404, s.apiError(w, 404, fmt.Sprintf("The model `%s` does not exist.", model))
		return 0, false
	}
	if stream {
		entry.Status, entry.Response = 400, s.apiError(w, 400, "the simulator does not stream")
		return 0, false
	}
	n := 0
	if maxTokens != nil {
		if n = *maxTokens; n < 1 {
			msg := fmt.Sprintf("max_tokens must be at least 1, got %d.", n)
			entry.Status, entry.Response = 400, s.apiErrorParam(w, 400, msg, "max_tokens")
			return 0, false
		}
	}
	if temperature != nil && *temperature < 0 {
		entry.Status, entry.Response = 400, s.apiError(w, 400, "temperature must be non-negative")
		return 0, false
	}
	return n, true
}

// chatCompletions is vLLM's /v1/chat/completions as a server without
// --enable-auto-tool-choice or a reasoning parser answers it: the
// template rendered as /tokenize renders it, the content the generated
// text, and with return_token_ids the prompt's ids and the generated ones.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model                  string          `json:"model"`
		Messages               []Message       `json:"messages"`
		Tools                  []Tool          `json:"tools"`
		ToolChoice             json.RawMessage `json:"tool_choice"`
		AddGenerationPrompt    *bool           `json:"add_generation_prompt"`
		ChatTemplateKwargs     map[string]any  `json:"chat_template_kwargs"`
		MaxTokens              *int            `json:"max_tokens"`
		MaxCompletionTokens    *int            `json:"max_completion_tokens"`
		Temperature            *float64        `json:"temperature"`
		TopP                   *float64        `json:"top_p"`
		TopK                   *int            `json:"top_k"`
		Seed                   *int64          `json:"seed"`
		Stop                   []string        `json:"stop"`
		Logprobs               bool            `json:"logprobs"`
		TopLogprobs            *int            `json:"top_logprobs"`
		ReturnTokenIDs         bool            `json:"return_token_ids"`
		ReturnTokensAsTokenIDs bool            `json:"return_tokens_as_token_ids"`
		SkipSpecialTokens      *bool           `json:"skip_special_tokens"`
		Stream                 bool            `json:"stream"`
		IgnoreEOS              bool            `json:"ignore_eos"`
		Priority               int             `json:"priority"`
		CacheSalt              *string         `json:"cache_salt"`
	}
	entry, ok := s.begin(w, r, &req, false)
	if !ok {
		return
	}
	defer s.logEntry(entry)
	if req.MaxTokens == nil {
		req.MaxTokens = req.MaxCompletionTokens
	}
	maxTokens, ok := s.checkSampling(w, entry, req.Model, req.Stream, req.MaxTokens, req.Temperature)
	if !ok {
		return
	}
	var choice string
	if len(req.ToolChoice) > 0 && json.Unmarshal(req.ToolChoice, &choice) != nil {
		choice = "named" // an object naming a function
	}
	switch {
	case len(req.Tools) > 0 && (choice == "" || choice == "auto"):
		msg := `"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`
		entry.Status, entry.Response = 400, s.apiError(w, 400, msg)
		return
	case len(req.Tools) == 0 && choice != "" && choice != "none":
		entry.Status, entry.Response = 400, s.apiErrorParam(w, 400, "When using `tool_choice`, `tools` must be set.", "tool_choice")
		return
	}
	text, err := s.render(req.Messages, req.Tools, req.AddGenerationPrompt == nil || *req.AddGenerationPrompt)
	if err != nil {
		entry.Status, entry.Response = 400, s.apiError(w, 400, err.Error())
		return
	}
	salt, ok := s.checkSalt(w, entry, req.CacheSalt)
	if !ok {
		return
	}
	prompt := s.tok.Encode(text)
	if s.chaos(w, seedOf(req.Seed, prompt)) {
		entry.Status = 500
		return
	}
	out, err := s.run(prompt, maxTokens, req.IgnoreEOS, req.Priority, salt, req.Seed, r)
	if err != nil {
		entry.Status, entry.Response = 400, s.apiError(w, 400, err.Error())
		return
	}
	entry.Decision = &out.decision
	c := chatChoice{Message: chatMessage{Role: "assistant", Content: out.text}, FinishReason: out.finish}
	if req.Logprobs {
		c.Logprobs = &chatLogprobs{Content: make([]chatLogprob, len(out.ids))}
		for i, id := range out.ids {
			tok := s.tok.TokenString(id)
			e := chatLogprob{Token: tok, Logprob: out.logprobs[i], Bytes: byteList(tok), TopLogprobs: []chatTopLogprob{}}
			if req.ReturnTokensAsTokenIDs {
				e.Token = "token_id:" + strconv.Itoa(id)
			}
			if req.TopLogprobs != nil && *req.TopLogprobs > 0 {
				e.TopLogprobs = []chatTopLogprob{{Token: e.Token, Logprob: e.Logprob, Bytes: e.Bytes}}
			}
			c.Logprobs.Content[i] = e
		}
	}
	resp := chatResponse{
		ID: "chatcmpl-sim-" + strconv.FormatUint(s.n.Load(), 10), Object: "chat.completion", Created: time.Now().Unix(), Model: s.opt.Model,
		Choices: []chatChoice{c},
		Usage:   usage{PromptTokens: len(prompt), CompletionTokens: len(out.ids), TotalTokens: len(prompt) + len(out.ids)},
	}
	if req.ReturnTokenIDs {
		resp.Choices[0].TokenIDs, resp.PromptTokenIDs = out.ids, prompt
	}
	entry.Status, entry.Response = 200, writeJSON(w, resp)
}

// byteList is s's UTF-8 bytes as numbers (vLLM's logprob "bytes").
func byteList(s string) []int {
	out := make([]int, len(s))
	for i := range len(s) {
		out[i] = int(s[i])
	}
	return out
}

func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		PromptIDs         []int    `json:"prompt_ids"`
		MaxTokens         int      `json:"max_tokens"`
		Temperature       *float64 `json:"temperature"`
		TopP              *float64 `json:"top_p"`
		TopK              *int     `json:"top_k"`
		Seed              *int64   `json:"seed"`
		Stop              []string `json:"stop"`
		SkipSpecialTokens *bool    `json:"skip_special_tokens"`
	}
	entry, ok := s.begin(w, r, &req, true)
	if !ok {
		return
	}
	defer s.logEntry(entry)
	seed := seedOf(req.Seed, req.PromptIDs)
	if s.chaos(w, seed) {
		entry.Status = 500
		return
	}
	out, err := s.run(req.PromptIDs, req.MaxTokens, false, 0, "", req.Seed, r)
	if err != nil {
		entry.Status, entry.Response = 400, s.apiError(w, 400, err.Error())
		return
	}
	entry.Decision = &out.decision
	entry.Status, entry.Response = 200, writeJSON(w, map[string]any{"response_ids": out.ids, "logprobs": out.logprobs})
}

func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model                string         `json:"model"`
		Prompt               *string        `json:"prompt"`
		Messages             []Message      `json:"messages"`
		Tools                []Tool         `json:"tools"`
		AddGenerationPrompt  *bool          `json:"add_generation_prompt"`
		ContinueFinalMessage bool           `json:"continue_final_message"`
		AddSpecialTokens     *bool          `json:"add_special_tokens"`
		ReturnTokenStrs      bool           `json:"return_token_strs"`
		ChatTemplateKwargs   map[string]any `json:"chat_template_kwargs"`
	}
	entry, ok := s.begin(w, r, &req, false)
	if !ok {
		return
	}
	defer s.logEntry(entry)
	var text string
	switch {
	case req.Messages != nil:
		// vLLM's default for chat tokenisation is add_generation_prompt=true.
		agp := req.AddGenerationPrompt == nil || *req.AddGenerationPrompt
		var err error
		if text, err = s.render(req.Messages, req.Tools, agp); err != nil {
			entry.Status, entry.Response = 400, s.apiError(w, 400, err.Error())
			return
		}
	case req.Prompt != nil:
		text = *req.Prompt
	default:
		entry.Status, entry.Response = 400, s.apiError(w, 400, "give prompt or messages")
		return
	}
	ids := s.tok.Encode(text)
	resp := map[string]any{"count": len(ids), "max_model_len": s.opt.MaxModelLen, "tokens": ids, "token_strs": nil}
	if req.ReturnTokenStrs {
		strs := make([]string, len(ids))
		for i, id := range ids {
			strs[i] = s.tok.TokenString(id)
		}
		resp["token_strs"] = strs
	}
	entry.Status, entry.Response = 200, writeJSON(w, resp)
}

func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model  string `json:"model"`
		Tokens []int  `json:"tokens"`
	}
	entry, ok := s.begin(w, r, &req, false)
	if !ok {
		return
	}
	defer s.logEntry(entry)
	entry.Status, entry.Response = 200, writeJSON(w, map[string]any{"prompt": s.tok.Decode(req.Tokens)})
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{
		"id": s.opt.Model, "object": "model", "created": time.Now().Unix(), "owned_by": "prorl-simllm", "root": s.opt.Model,
		"max_model_len": s.opt.MaxModelLen,
	}}})
}
