package jsonw

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"testing"
)

// FuzzScalars: strings and floats come out as encoding/json writes them.
func FuzzScalars(f *testing.F) {
	for _, s := range []string{"", "<a&b>", "\u2028\xff\x00", "é 😀 \\ \""} {
		f.Add(s, 1.5)
	}
	f.Add("x", 1e-7)
	f.Add("y", 1e21)
	f.Add("z", math.Copysign(0, -1))
	for _, x := range []float64{1, -1, 2, 1e15 - 1, 1e15, 1e15 + 2, -1e20, 1e21, 0.5, 123456789} {
		f.Add("n", x)
	}
	f.Fuzz(func(t *testing.T, s string, x float64) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s want %s", s, got, want)
		}
		want, err := json.Marshal(x)
		got, ok := AppendFloat(nil, x)
		if (err == nil) != ok || ok && !bytes.Equal(got, want) {
			t.Fatalf("%v: got %s (%v) want %s (%v)", x, got, ok, want, err)
		}
	})
}

// FuzzInts: id arrays come out as encoding/json writes them.
func FuzzInts(f *testing.F) {
	f.Add([]byte{0, 1, 9, 10, 99, 100, 255})
	f.Fuzz(func(t *testing.T, raw []byte) {
		var v []int
		for i := 0; i+3 < len(raw); i += 4 {
			n := int(int32(uint32(raw[i]) | uint32(raw[i+1])<<8 | uint32(raw[i+2])<<16 | uint32(raw[i+3])<<24))
			v = append(v, n, n>>8, n>>16, n>>24, -n, n*1000003)
		}
		if len(raw)%2 == 1 {
			v = append(v, 1<<62, -1<<63, 9999999, 10000000, 99999999, 100000000)
		}
		want, _ := json.Marshal(v)
		w := &Writer{B: []byte("x")}
		w.Ints(v)
		if !bytes.Equal(w.B[1:], want) {
			t.Fatalf("%v: got %s want %s", v, w.B[1:], want)
		}
	})
}

func BenchmarkInts(b *testing.B) {
	ids := make([]int, 500)
	for i := range ids {
		ids[i] = (i * 7919 * 31) % 151000 // Qwen-sized vocabulary: mostly 5-6 digits
	}
	ids[0], ids[1], ids[2] = 0, 7, 42
	w := &Writer{}
	for b.Loop() {
		w.B = w.B[:0]
		w.Ints(ids)
	}
	b.SetBytes(int64(len(w.B)))
}

// Ints at every digit-count boundary, where the in-place writer picks its
// width, and past it to the slow path, as encoding/json writes them.
func TestIntsBoundaries(t *testing.T) {
	var v []int
	for p := 1; p > 0 && p <= math.MaxInt/10; p *= 10 {
		v = append(v, p-1, p, p+1, -p, 1-p)
	}
	v = append(v, math.MaxInt, math.MinInt)
	for i := range v {
		want, _ := json.Marshal(v[i:]) // every start: the room grown differs
		w := &Writer{}
		w.Ints(v[i:])
		if !bytes.Equal(w.B, want) {
			t.Fatalf("got %s want %s", w.B, want)
		}
	}
}

// BenchmarkRawJSONUnique: a plugin's info, different in every rollout.
func BenchmarkRawJSONUnique(b *testing.B) {
	w := &Writer{}
	n := 0
	for b.Loop() {
		n++
		w.B = w.B[:0]
		w.RawJSON(json.RawMessage(`{"extracted_answer":"` + strconv.Itoa(n) + `","extraction":"boxed","ground_truth":"5"}`))
	}
}

// BenchmarkFloatWhole: a temperature of 1, a reward.
func BenchmarkFloatWhole(b *testing.B) {
	var buf []byte
	for b.Loop() {
		buf, _ = AppendFloat(buf[:0], 1)
	}
}

// FuzzRawJSON: raw messages come out as encoding/json writes them (the
// ones already compact without a copy, the rest compacted), and invalid
// ones are errors.
func FuzzRawJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a": 1}`, `[1,"<b>"]`, `"\u2028"`, "\"\u2028\"", `"a\"b"`, `{"a":"x y"}`, `"\\"`, `{"a":"\\"} `,
		`{"a":`, ``, `nul`, `"\xff"`, `[1,2]` + "\n", `{"k":[true,false,null,-1.5e3]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, m []byte) {
		want, werr := json.Marshal(json.RawMessage(m))
		for range 2 { // the second time from the cache, where it went there
			w := &Writer{}
			w.RawJSON(m)
			if (werr == nil) != (w.Err == nil) || werr == nil && !bytes.Equal(w.B, want) {
				t.Fatalf("%q: got %q (%v) want %q (%v)", m, w.B, w.Err, want, werr)
			}
		}
	})
}
