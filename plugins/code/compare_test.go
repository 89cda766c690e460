package main

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"testing"
)

func TestOutputsMatch(t *testing.T) {
	for _, c := range []struct {
		got, want, mode string
		tol             float64
		ok              bool
	}{
		{"3\n", "3", "tokens", 0, true},
		{"  1  2\n\n3 ", "1 2 3\n", "tokens", 0, true},
		{"1 2", "1 3", "tokens", 0, false},
		{"1.0", "1", "tokens", 0, false},
		{"0.3333333333333333\n", "0.3333333333\n", "float", 0, true},
		{"0.3334\n", "0.3333333333\n", "float", 0, false},
		{"0.50\n", "0.5\n", "lines_decimal", 0, true},
		{"   7\n", "7\n", "lines_decimal", 0, true},
		{"0.3333333333333333\n", "0.3333333333\n", "lines_decimal", 0, false}, // LiveCodeBench's Decimal compare
		{"1 2\n3\n", "1 2 3\n", "lines_decimal", 0, false},
		{"1e3\n", "1000\n", "lines_decimal", 0, true},
		{"1/2\n", "0.5\n", "lines_decimal", 0, false},
		{"a\n\n b \n", "a\nb", "lines", 0, true},
		{"a b\n", "a\nb", "lines", 0, false},
		{"a\r\nb  \n\n", "a\nb", "exact", 0, true},
		{" a\nb", "a\nb", "exact", 0, false},
		{"1.001", "1", "tokens", 0.01, true},
		{"1000000001", "1000000000", "tokens", 0, false},
		{"1000000001", "1000000000", "float", 0, false}, // TACO would accept: integers compare exactly here
		{"2.0000001", "2", "float", 0, true},
	} {
		if got := outputsMatch(c.got, c.want, c.mode, c.tol); got != c.ok {
			t.Errorf("%s %q vs %q (tol %v): %v, want %v", c.mode, c.got, c.want, c.tol, got, c.ok)
		}
	}
}

// TestLCBPrivate: LiveCodeBench's compressed private cases, made by
// Python's own pickle, zlib and base64 as its releases make them.
func TestLCBPrivate(t *testing.T) {
	cases := `[{"input": "1\n", "output": "2\n", "testtype": "stdin"}]`
	for _, proto := range []string{"2", "3", "4", "5"} {
		out, err := exec.Command("python3", "-c", "import base64, pickle, sys, zlib; print(base64.b64encode(zlib.compress(pickle.dumps(sys.argv[1], protocol="+proto+"))).decode())", cases).Output()
		if err != nil {
			t.Skipf("python3: %v", err)
		}
		raw, _ := json.Marshal(string(bytes.TrimSpace(out)))
		got, err := lcbPrivate(raw)
		if err != nil || string(got) != cases {
			t.Fatalf("protocol %s: %s %v", proto, got, err)
		}
	}
	// A pickle that names a callable is refused, not run.
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	_, _ = w.Write([]byte("cos\nsystem\n(S'echo hi'\ntR."))
	w.Close()
	raw, _ := json.Marshal(base64.StdEncoding.EncodeToString(z.Bytes()))
	if _, err := lcbPrivate(raw); err == nil {
		t.Fatal("a pickle calling os.system was accepted")
	}
}

func FuzzPickledString(f *testing.F) {
	f.Add([]byte("\x80\x04\x95\x0b\x00\x00\x00\x00\x00\x00\x00\x8c\x07[1, 2]\x94."))
	f.Add([]byte("X\x02\x00\x00\x00ab."))
	f.Fuzz(func(t *testing.T, p []byte) {
		_, _ = pickledString(p)
	})
}

func FuzzOutputsMatch(f *testing.F) {
	f.Add("0.50\n", "0.5", "lines_decimal")
	f.Add("1 2", "1  2\n", "tokens")
	f.Add("1e400", "1e400", "float")
	f.Fuzz(func(t *testing.T, got, want, mode string) {
		_ = outputsMatch(got, want, mode, 0.5) // no panic on any input
		if (mode == "tokens" || mode == "lines" || mode == "float" || mode == "exact") && !outputsMatch(want, want, mode, 0) {
			t.Fatalf("%s: %q does not match itself", mode, want)
		}
	})
}
