package jsonw

import (
	"bytes"
	"encoding/json"
	"math"
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
