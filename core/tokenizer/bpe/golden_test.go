package bpe

import (
	"encoding/json"
	"fmt"
	"github.com/prorl/prorl/internal/testmodels"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

var goldenModels = []string{"qwen3", "llama3_1", "deepseek_v3"}

// encodeGoldenModels have token goldens (make golden): the three with
// chat goldens, the other byte-level families and the SentencePiece ones.
var encodeGoldenModels = append(slices.Clone(goldenModels), "gemma3", "llama2", "gemini", "gptoss", "gpt4o", "gpt35turbo", "llama3", "claude")

type encodeCase struct {
	Text string `json:"text"`
	IDs  []int  `json:"ids"`
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestEncodeMatchesReference(t *testing.T) {
	dir := testmodels.Dir(t)
	for _, m := range encodeGoldenModels {
		t.Run(m, func(t *testing.T) {
			tok, err := Load(filepath.Join(dir, m, "tokenizer.json"))
			if err != nil {
				t.Fatal(err)
			}
			var cases, special []encodeCase
			readJSON(t, filepath.Join("..", "testdata", "golden", m, "encode.json"), &cases)
			readJSON(t, filepath.Join("..", "testdata", "golden", m, "encode_special.json"), &special)
			bad := 0
			for i, c := range cases {
				got := tok.Encode(c.Text)
				if !slices.Equal(got, c.IDs) {
					bad++
					if bad <= 5 {
						t.Errorf("case %d %q:\ngot  %v\nwant %v", i, c.Text, got, c.IDs)
					}
					continue
				}
				// Decoding gives a byte-level model's text back (after normalisation).
				if dec := tok.Decode(got); tok.normalize == nil && tok.chars == nil && dec != c.Text {
					t.Errorf("case %d: decode %q, want %q", i, dec, c.Text)
				}
			}
			for i, c := range special {
				if got := tok.EncodeSpecial(c.Text); !slices.Equal(got, c.IDs) {
					t.Errorf("special case %d %q:\ngot  %v\nwant %v", i, c.Text, got, c.IDs)
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d cases differ", bad, len(cases))
			}
		})
	}
}

// FuzzEncodeDecode: encoding never panics, and decoding gives the input
// back for a tokenizer without a normalizer (Llama 3).
func FuzzEncodeDecode(f *testing.F) {
	dir := testmodels.Dir(f)
	tok, err := Load(filepath.Join(dir, "llama3_1", "tokenizer.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"hello world", "  \n\t x", "<|eot_id|>a", "😀 中文 123456"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		if got := string(tok.AppendBytes(nil, ids)); got != s {
			t.Fatalf("round trip %q -> %v -> %q", s, ids, got)
		}
	})
}

// TestConcurrentEncode: one tokenizer serves many rollouts at once; the
// shared pre-token cache must not mix their words up (run with -race).
func TestConcurrentEncode(t *testing.T) {
	tok, err := Load(filepath.Join(testmodels.Dir(t), "qwen3", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tok.cache = newCache(64) // tiny, so goroutines keep replacing each other's entries
	var cases []encodeCase
	readJSON(t, filepath.Join("..", "testdata", "golden", "qwen3", "encode.json"), &cases)
	errs := make(chan string, 4)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range cases {
				c := cases[(i+g*37)%len(cases)]
				if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
					errs <- fmt.Sprintf("%q: got %v want %v", c.Text, got, c.IDs)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestSegmentCache: text between added tokens comes from the segment
// cache the second time with the ids a cold encode gives (the goldens, and
// for long pieces — the goldens have none — an encoder without the cache),
// whatever the caller did to the ids it got the first time.
func TestSegmentCache(t *testing.T) {
	dir := testmodels.Dir(t)
	corpus := testmodels.MixedCorpus(t)
	for _, m := range goldenModels {
		t.Run(m, func(t *testing.T) {
			tok, err := Load(filepath.Join(dir, m, "tokenizer.json"))
			if err != nil {
				t.Fatal(err)
			}
			cold, err := Load(filepath.Join(dir, m, "tokenizer.json"))
			if err != nil {
				t.Fatal(err)
			}
			cold.WithoutSegmentCache()
			var cases []encodeCase
			readJSON(t, filepath.Join("..", "testdata", "golden", m, "encode.json"), &cases)
			special := tok.pieces[tok.added[0].ID]
			for at := 0; at+3000 < len(corpus) && at < 200000; at += 2999 {
				text := special + corpus[at:at+3000] + special + corpus[at:at+300]
				cases = append(cases, encodeCase{Text: text, IDs: cold.Encode(text)})
			}
			for _, c := range cases {
				first := tok.Encode(c.Text)
				for i := range first {
					first[i] = -1 // the cache must have kept its own copy
				}
				if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
					t.Fatalf("%.80q from the cache:\ngot  %v\nwant %v", c.Text, got, c.IDs)
				}
			}
			if len(tok.segs.m) < 10 {
				t.Fatalf("%d cached segments: the cache was not exercised", len(tok.segs.m))
			}
		})
	}
}
