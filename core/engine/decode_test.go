package engine

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"testing"

	"github.com/prorl/prorl/core/jsonscan"
	"github.com/prorl/prorl/core/tokenizer"
)

// vLLM's CompletionResponse with every field it sends (protocol.py): the
// decoder must pass over what it does not read.
const vllmCompletion = `{"id":"cmpl-5d6c","object":"text_completion","created":1732000000,"model":"Qwen/Qwen3-8B",
 "choices":[{"index":0,"text":"Hi \u003cthere\u003e \"x\"\n\ud83d\ude00","logprobs":{"text_offset":[0,2],
 "token_logprobs":[-0.0031802367977797985,null,-1e-7,0],"tokens":["token_id:9707","token_id:151645","token_id:1","token_id:2"],
 "top_logprobs":[{"token_id:9707":-0.0031802367977797985},null,{"a":1},{}]},
 "finish_reason":"stop","stop_reason":null,"prompt_logprobs":null,"prompt_token_ids":null,"token_ids":null}],
 "service_tier":null,"system_fingerprint":null,"usage":{"prompt_tokens":12,"total_tokens":14,"completion_tokens":2,"prompt_tokens_details":null},
 "kv_transfer_params":null}`

const vllmTokenize = `{"count":5,"max_model_len":40960,"tokens":[151644,872,198,-0,1],"token_strs":null}`

// decodeBoth decodes data with the fast and the generic decoder and fails
// when the fast one succeeds with anything but the generic one's result.
func decodeBoth[T any, P interface {
	*T
	fastDecoder
}](t *testing.T, data []byte) (fastOK bool) {
	var fast, generic T
	fastOK = P(&fast).decodeFast(data)
	gerr := json.Unmarshal(data, &generic)
	if !fastOK {
		var zero T
		if !reflect.DeepEqual(fast, zero) {
			t.Fatalf("a refused fast decode left %+v behind", fast)
		}
		return false
	}
	if gerr != nil {
		t.Fatalf("fast decoder accepted %q, the generic one refuses it: %v", data, gerr)
	}
	if !reflect.DeepEqual(fast, generic) {
		fj, _ := json.Marshal(fast)
		gj, _ := json.Marshal(generic)
		t.Fatalf("decoders differ on %q:\nfast    %s\ngeneric %s", data, fj, gj)
	}
	return true
}

func TestFastDecodeCompletion(t *testing.T) {
	sim, err := os.ReadFile("testdata/sim_completion.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, in string
		fast     bool // the fast path must take it (else it is never exercised)
	}{
		{"vllm", vllmCompletion, true},
		{"simulator", string(sim), true},
		{"token ids", `{"choices":[{"text":"a","token_ids":[1,2],"logprobs":{"tokens":[],"token_logprobs":[]},"finish_reason":"length"}]}`, true},
		{"null choices", `{"choices":null}`, true},
		{"empty choices", `{"choices":[]}`, true},
		{"no logprobs", `{"choices":[{"text":"a","logprobs":null,"finish_reason":null}]}`, true},
		{"whitespace", " \n{ \"choices\" : [ { \"text\" : \"a\" } ] } \t", true},
		{"escaped text", `{"choices":[{"text":"\\u00e9\\n\\\\"}]}`, true},
		{"one-character escapes", `{"choices":[{"text":"a\"b\\c\/d\b\f\n\r\té"}]}`, true},
		{"bad escape", `{"choices":[{"text":"a\x"}]}`, false},
		{"invalid utf8", "{\"choices\":[{\"text\":\"\xff\"}]}", true}, // that string alone goes to the generic decoder
		{"folded key", `{"Choices":[{"text":"a"}]}`, false},
		{"folded inner key", `{"choices":[{"TEXT":"a"}]}`, false},
		{"duplicate key", `{"choices":[],"choices":[{"text":"a"}]}`, false},
		{"escaped key", `{"\u0063hoices":[{"text":"a"}]}`, false},
		{"float out of range", `{"choices":[{"logprobs":{"token_logprobs":[1e400]}}]}`, false},
		{"id as float", `{"choices":[{"token_ids":[1.0]}]}`, false},
		{"huge id", `{"choices":[{"token_ids":[99999999999999999999]}]}`, false},
		{"trailing garbage", `{"choices":[]} x`, false},
		{"trailing comma", `{"choices":[],}`, false},
		{"bad number", `{"choices":[],"created":01}`, false},
		{"control char", "{\"choices\":[{\"text\":\"a\x01\"}]}", false},
		{"text not a string", `{"choices":[{"text":5}]}`, false},
		{"deep skip", `{"x":` + nest(100) + `,"choices":[]}`, false},
		{"truncated", `{"choices":[{"text":"a"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decodeBoth[completionResponse](t, []byte(tc.in)); got != tc.fast {
				t.Fatalf("fast path taken = %v, want %v", got, tc.fast)
			}
		})
	}
}

func TestFastDecodeTokenize(t *testing.T) {
	sim, err := os.ReadFile("testdata/sim_tokenize.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, in string
		fast     bool
	}{
		{"vllm", vllmTokenize, true},
		{"simulator", string(sim), true},
		{"null tokens", `{"count":0,"tokens":null}`, true},
		{"negative and big", `{"tokens":[-2147483648,9223372036854775807,1234567890]}`, true},
		{"overflow", `{"tokens":[9223372036854775808]}`, false},
		{"exponent", `{"tokens":[1e3]}`, false},
		{"string id", `{"tokens":["1"]}`, false},
		{"not an object", `[1,2]`, false},
		{"empty", ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decodeBoth[tokenizeResponse](t, []byte(tc.in)); got != tc.fast {
				t.Fatalf("fast path taken = %v, want %v", got, tc.fast)
			}
		})
	}
}

func TestFastDecodeChat(t *testing.T) {
	var golden []string // both answers to the host's chat request (internal/simllm's TestAgainstVLLM writes them)
	for _, p := range []string{"testdata/vllm_chat.json", "testdata/sim_chat.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		golden = append(golden, string(b))
	}
	entry := `{"token":"a\"b","logprob":-0.5,"bytes":[97,34,98],"top_logprobs":[]}`
	for _, tc := range []struct {
		name, in string
		fast     bool
		parsed   bool // a server-side parser touched the message
	}{
		{"vllm", golden[0], true, false},
		{"simulator", golden[1], true, false},
		{"one token", `{"choices":[{"message":{"content":"a"},"token_ids":[7],"logprobs":{"content":[` + entry + `]}}],"prompt_token_ids":[1,2]}`, true, false},
		{"null content", `{"choices":[{"message":{"content":null,"tool_calls":[]}}]}`, true, false},
		{"empty bytes", `{"choices":[{"logprobs":{"content":[{"logprob":-1,"bytes":[]}]}}]}`, true, false},
		{"null logprob", `{"choices":[{"logprobs":{"content":[{"logprob":null,"bytes":null}]}}]}`, true, false},
		{"bytes with spaces", `{"choices":[{"logprobs":{"content":[{"bytes":[ 1 , 2 ]}]}}]}`, true, false},
		{"escapes in token", `{"choices":[{"logprobs":{"content":[{"token":"\u00e9\n\/","logprob":-1}]}}]}`, true, false},
		{"reasoning parsed", `{"choices":[{"message":{"content":"b","reasoning":"a"}}]}`, false, true},
		{"reasoning_content parsed", `{"choices":[{"message":{"content":"b","reasoning_content":""}}]}`, false, true},
		{"tool calls parsed", `{"choices":[{"message":{"content":null,"tool_calls":[{"id":"x","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}`, false, true},
		{"function call", `{"choices":[{"message":{"content":"","function_call":{"name":"f"}}}]}`, false, true},
		{"bad escape in token", `{"choices":[{"logprobs":{"content":[{"token":"\x"}]}}]}`, false, false},
		{"short unicode escape", `{"choices":[{"logprobs":{"content":[{"token":"\u12"}]}}]}`, false, false},
		{"leading zero byte", `{"choices":[{"logprobs":{"content":[{"bytes":[01]}]}}]}`, false, false},
		{"negative byte", `{"choices":[{"logprobs":{"content":[{"bytes":[-1]}]}}]}`, true, false},
		{"folded key", `{"choices":[{"message":{"Content":"a"}}]}`, false, false},
		{"duplicate prompt ids", `{"prompt_token_ids":[1],"prompt_token_ids":[2]}`, false, false},
		{"prompt id as string", `{"prompt_token_ids":["1"]}`, false, false},
		{"truncated", golden[0][:len(golden[0])/2], false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decodeBoth[chatResponse](t, []byte(tc.in)); got != tc.fast {
				t.Fatalf("fast path taken = %v, want %v", got, tc.fast)
			}
			var r chatResponse
			if err := json.Unmarshal([]byte(tc.in), &r); err == nil && len(r.Choices) > 0 && r.Choices[0].Message.Parsed != tc.parsed {
				t.Fatalf("parsed = %v, want %v", r.Choices[0].Message.Parsed, tc.parsed)
			}
		})
	}
}

// TestChatPromptRoom: the prompt's ids come with room for the answer's,
// which the agent appends in place (ChatGenerator); both golden answers
// write choices before prompt_token_ids, as vLLM does.
func TestChatPromptRoom(t *testing.T) {
	for _, p := range []string{"testdata/vllm_chat.json", "testdata/sim_chat.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var r chatResponse
		if !r.decodeFast(b) || len(r.Choices) != 1 {
			t.Fatalf("%s: not decoded", p)
		}
		if got, want := cap(r.PromptTokenIDs), len(r.PromptTokenIDs)+len(r.Choices[0].TokenIDs); got < want {
			t.Errorf("%s: prompt capacity %d, want at least %d", p, got, want)
		}
	}
}

func nest(n int) string {
	s := "1"
	for range n {
		s = "[" + s + "]"
	}
	return s
}

// unicodeEscapes are string bodies with \u escapes as servers write them
// (Go's for <, > and &; Python's for non-ASCII) and as they go wrong.
var unicodeEscapes = []string{`\u003cthink\u003e a \u0026 b`, `caf\u00e9 \u00E9`, `\ud83d\ude00 smile`, `\uD83D\uDE00`,
	`lone \ud83d end`, `lone \ud83d\n`, `\ud83d\u0041`, `\ude00\ud83d`, `\ud83d\ud83d\ude00`, `\u12`, `\u12zz`, `\u0000`, `\ud83d\u12`}

func TestUnescapeMatchesEncodingJSON(t *testing.T) {
	for _, body := range unicodeEscapes {
		var want string
		werr := json.Unmarshal([]byte(`"`+body+`"`), &want)
		got, ok := jsonscan.Unescape([]byte(body))
		if ok && (werr != nil || got != want) {
			t.Errorf("%s: got %q, encoding/json %q (%v)", body, got, want, werr)
		}
		if !ok && werr == nil {
			t.Errorf("%s: refused, encoding/json took it as %q", body, want)
		}
	}
}

// FuzzFastDecode: whatever the fast decoders accept, the generic decoder
// accepts with the same result.
func FuzzFastDecode(f *testing.F) {
	for _, s := range []string{vllmCompletion, vllmTokenize, `{"choices":[{"text":"a","token_ids":[1]}]}`, `{"tokens":[1,-2]}`} {
		f.Add([]byte(s))
	}
	for _, p := range []string{"testdata/sim_completion.json", "testdata/sim_tokenize.json", "testdata/vllm_chat.json", "testdata/sim_chat.json"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, text := range unicodeEscapes {
		f.Add([]byte(`{"choices":[{"text":"` + text + `","token_ids":[1]}]}`))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		decodeBoth[completionResponse](t, data)
		decodeBoth[tokenizeResponse](t, data)
		decodeBoth[chatResponse](t, data)
	})
}

func BenchmarkDecodeResponses(b *testing.B) {
	comp, err := os.ReadFile("testdata/sim_completion.json")
	if err != nil {
		b.Fatal(err)
	}
	tok, err := os.ReadFile("testdata/sim_tokenize.json")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("completion/fast", func(b *testing.B) {
		for b.Loop() {
			var r completionResponse
			if !r.decodeFast(comp) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("completion/generic", func(b *testing.B) {
		for b.Loop() {
			var r completionResponse
			if err := json.Unmarshal(comp, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	chat, err := os.ReadFile("testdata/sim_chat.json")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("chat/fast", func(b *testing.B) {
		for b.Loop() {
			var r chatResponse
			if !r.decodeFast(chat) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("tokenize/fast", func(b *testing.B) {
		for b.Loop() {
			var r tokenizeResponse
			if !r.decodeFast(tok) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("tokenize/generic", func(b *testing.B) {
		for b.Loop() {
			var r tokenizeResponse
			if err := json.Unmarshal(tok, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestMalformedAnswerNoPanic: goccy's decoder (the generic one before)
// panicked on this answer cut short, in about one decode of thirty
// depending on the memory around it. The host decodes backends' answers;
// a panic there stops the host.
func TestMalformedAnswerNoPanic(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"\`)) }))
	defer srv.Close()
	v := &VLLM{BaseURL: srv.URL}
	for range 1000 {
		if _, err := v.Generate(context.Background(), GenerateRequest{PromptIDs: []int{1}, MaxTokens: 1}); err == nil {
			t.Fatal("a malformed answer was taken")
		}
		if _, err := v.Render(context.Background(), nil, nil, tokenizer.RenderOptions{}); err == nil {
			t.Fatal("a malformed answer was taken")
		}
	}
}
