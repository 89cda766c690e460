package jsonscan

import (
	"encoding/json"
	"testing"
)

// FuzzStr: a string the scanner reads is the one encoding/json reads.
func FuzzStr(f *testing.F) {
	for _, s := range []string{`plain`, `\u003cthink\u003e`, `caf\u00e9`, `\ud83d\ude00`, `lone \ud83d end`, `\u12zz`, `tab\t\"q\"`, `\/`, `raw"quote`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		doc := []byte(`"` + body + `"`)
		var want string
		werr := json.Unmarshal(doc, &want)
		var got string
		if s := New(doc); s.Str(&got) && s.End() && (werr != nil || got != want) {
			t.Errorf("%q: got %q, encoding/json %q (%v)", doc, got, want, werr)
		}
	})
}

// FuzzScanner: a document the scanner skips whole is valid JSON, and the
// integers it reads are encoding/json's.
func FuzzScanner(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,3],"b":"x"}`, `[1,-2,3e1]`, `{"a":{"b":null}}`, `[`, `{"a":1,}`, ` [ 1 , 2 ] `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if s := New(b); s.Skip(0) && s.End() && !json.Valid(b) {
			t.Errorf("%q: skipped as a document, which encoding/json finds invalid", b)
		}
		var ids []int
		if s := New(b); s.Ints(&ids) && s.End() {
			var want []int
			if err := json.Unmarshal(b, &want); err != nil || len(want) != len(ids) {
				t.Fatalf("%q: ints %v, encoding/json %v (%v)", b, ids, want, err)
			}
			for i := range ids {
				if ids[i] != want[i] {
					t.Fatalf("%q: ints %v, encoding/json %v", b, ids, want)
				}
			}
		}
	})
}
