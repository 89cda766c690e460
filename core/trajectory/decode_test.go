package trajectory

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"testing"

	goccy "github.com/goccy/go-json"
)

// decodeTokensBoth decodes in into Tokens (through UnmarshalJSON, by
// encoding/json and by goccy as the store does) and into its plain form by
// encoding/json, each over the same earlier value, and fails unless all
// agree on the value and on whether it is an error. It reports whether the
// fast path took in.
func decodeTokensBoth(t *testing.T, in []byte) bool {
	t.Helper()
	type plain Tokens
	before := func() Tokens {
		return Tokens{IDs: []int{9}, LossMask: []int8{1}, Logprobs: []float64{-1}, PromptLen: 3}
	}
	want := before()
	werr := json.Unmarshal(in, (*plain)(&want))
	got := before()
	gerr := json.Unmarshal(in, &got)
	wrapped := struct{ T Tokens }{before()}
	cerr := goccy.Unmarshal(append(append([]byte(`{"T":`), in...), '}'), &wrapped)
	if (werr == nil) != (gerr == nil) || werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: got %+v (%v), encoding/json %+v (%v)", in, got, gerr, want, werr)
	}
	if werr == nil && (cerr != nil || !reflect.DeepEqual(wrapped.T, want)) {
		t.Fatalf("%q through goccy: got %+v (%v), encoding/json %+v", in, wrapped.T, cerr, want)
	}
	_, fast := fastTokens(in)
	return fast
}

func TestTokensUnmarshal(t *testing.T) {
	for _, tc := range []struct {
		in   string
		fast bool
	}{
		{`{"ids":[1,2,3],"loss_mask":[0,0,1],"logprobs":[0,0,-0.25],"prompt_len":2}`, true},
		{` { "ids" : [ 1 , 2 ] ,"loss_mask":[],"logprobs":null } `, true},
		{`{}`, true},
		{`{"logprobs":[-1.5e-7,1E+2,-0,0.0001,-0.8439571790596994]}`, true},
		{`{"ids":[-0,123456789012345678]}`, true},
		{`{"loss_mask":[127,-128]}`, true},
		{`null`, false},
		{`{"IDS":[1]}`, false},
		{`{"ids":[1],"ids":[2]}`, false},
		{`{"ids":[1.0]}`, false},
		{`{"ids":[1e2]}`, false},
		{`{"ids":[1234567890123456789]}`, false},
		{`{"ids":[99999999999999999999]}`, false},
		{`{"loss_mask":[128]}`, false},
		{`{"ids":[1,null]}`, false},
		{`{"ids":[01]}`, false},
		{`{"ids":[1,]}`, false},
		{`{"logprobs":[1e400]}`, false},
		{`{"logprobs":[1e-400]}`, true},
		{`{"logprobs":[.5]}`, false},
		{`{"prompt_len":null}`, false},
		{`{"prompt_len":"2"}`, false},
		{`{"other":1}`, false},
		{`{"ids":[1]`, false},
		{`{"ids":[1]}x`, false},
		{`{"ids":nul}`, false},
		{`{"\u0069ds":[1]}`, false},
	} {
		if got := decodeTokensBoth(t, []byte(tc.in)); got != tc.fast {
			t.Errorf("%s: fast path %v, want %v", tc.in, got, tc.fast)
		}
	}
}

// FuzzTokensUnmarshal: whatever the input, Tokens decodes as encoding/json
// decodes its plain form.
func FuzzTokensUnmarshal(f *testing.F) {
	for _, s := range []string{`{"ids":[1,2,3],"loss_mask":[0,0,1],"logprobs":[0,0,-0.25],"prompt_len":2}`, `{"ids":null}`, `{"logprobs":[1e-7]}`, `{}`, `null`, `{"ids":[1],"IDs":[2]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if json.Valid(in) {
			decodeTokensBoth(t, in)
		}
	})
}

// FuzzExactFloat: the fast path gives strconv.ParseFloat's value, sign of
// zero included, for every number token it takes.
func FuzzExactFloat(f *testing.F) {
	for _, s := range []string{"0", "-0", "-0.8439571790596994", "-1.2e-05", "1E+22", "123456789012345", "0.000000000000000000000001", "-0.0e5", "1e23"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s := numScan{b: []byte(in)}
		tok, ok := s.number()
		if !ok || s.i != len(in) {
			return
		}
		got, ok := exactFloat(tok)
		if !ok {
			return
		}
		want, err := strconv.ParseFloat(string(tok), 64)
		if err != nil || got != want || math.Signbit(got) != math.Signbit(want) {
			t.Fatalf("%s: %v, strconv %v (%v)", in, got, want, err)
		}
	})
}
