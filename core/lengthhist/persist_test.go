package lengthhist

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func filled(capacity int, tasks map[string][]int) *Memo {
	m := New(capacity)
	for q, obs := range tasks {
		for _, n := range obs {
			m.Observe(KeyOf("math", []byte(q)), n)
		}
	}
	return m
}

func TestSaveLoad(t *testing.T) {
	tasks := map[string][]int{`{"q":1}`: {1200}, `{"q":2}`: {100, 300}, `{"q":3}`: {5, 5, 5, 5, 5, 5, 5, 5, 805}}
	src := filled(16, tasks)
	path := filepath.Join(t.TempDir(), "prorl.db.lengths")
	if err := src.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if !src.Saved() {
		t.Fatal("saved memo reports unsaved changes")
	}
	dst := New(16)
	n, err := dst.ReadFile(path)
	if err != nil || n != len(tasks) {
		t.Fatalf("ReadFile = %d, %v; want %d entries", n, err, len(tasks))
	}
	for q := range tasks {
		k := KeyOf("math", []byte(q))
		if got, want := dst.Expect(k), src.Expect(k); got != want {
			t.Errorf("task %s: loaded %d, saved %d", q, got, want)
		}
	}
	// The window continues where it was: one more observation moves the
	// average as it would have without the restart.
	k := KeyOf("math", []byte(`{"q":3}`))
	src.Observe(k, 1000)
	dst.Observe(k, 1000)
	if src.Expect(k) != dst.Expect(k) {
		t.Fatalf("after a restart the average moved to %d, without one to %d", dst.Expect(k), src.Expect(k))
	}
	if dst.Saved() {
		t.Fatal("an observation after loading is not saved yet")
	}
}

func TestLoadMissingFile(t *testing.T) {
	n, err := New(4).ReadFile(filepath.Join(t.TempDir(), "none"))
	if n != 0 || err != nil {
		t.Fatalf("missing file: %d, %v", n, err)
	}
}

// TestLoadKeepsNewest: a memo loaded into a smaller one keeps the most
// recently seen tasks, as the running memo would have.
func TestLoadKeepsNewest(t *testing.T) {
	src := New(8)
	for i := range 8 {
		src.Observe(Key(i), 100*(i+1))
	}
	dst := New(4)
	if _, err := dst.Load(src.AppendBinary(nil)); err != nil {
		t.Fatal(err)
	}
	if dst.Len() > 4 {
		t.Fatalf("loaded %d tasks into a memo of 4", dst.Len())
	}
	if dst.Expect(Key(7)) != 800 {
		t.Fatal("the newest task was dropped")
	}
}

func TestLoadRejects(t *testing.T) {
	good := filled(16, map[string][]int{`{"q":1}`: {1200}, `{"q":2}`: {7}}).AppendBinary(nil)
	reseal := func(b []byte) []byte { // a valid checksum over damaged content
		b = b[:len(b)-4]
		return binary.LittleEndian.AppendUint32(b, crcOf(b))
	}
	entry := len(magic) + 1 // the first entry
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"other file", []byte("PK\x03\x04 a zip file, not ours")},
		{"truncated", good[:len(good)-5]},
		{"one byte flipped", flip(good, entry+3)},
		{"count says more", reseal(set(good, len(magic), 3))},
		{"n zero", reseal(set(good, entry+16, 0))},
		{"n past the window", reseal(set(good, entry+16, window+1))},
		{"mean NaN", reseal(setMean(good, entry, math.NaN()))},
		{"mean negative", reseal(setMean(good, entry, -1))},
		{"mean huge", reseal(setMean(good, entry, 1e300))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New(16)
			n, err := m.Load(tc.data)
			if !errors.Is(err, ErrFormat) || n != 0 || m.Len() != 0 {
				t.Fatalf("Load = %d, %v with %d tasks; want ErrFormat and nothing loaded", n, err, m.Len())
			}
		})
	}
	path := filepath.Join(t.TempDir(), "lengths")
	if err := os.WriteFile(path, good[:10], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(4).ReadFile(path); !errors.Is(err, ErrFormat) {
		t.Fatalf("ReadFile of a damaged file: %v", err)
	}
}

func flip(b []byte, i int) []byte { c := bytes.Clone(b); c[i] ^= 0x40; return c }

func set(b []byte, i int, v byte) []byte { c := bytes.Clone(b); c[i] = v; return c }

func setMean(b []byte, entry int, v float64) []byte {
	c := bytes.Clone(b)
	binary.LittleEndian.PutUint64(c[entry+8:], math.Float64bits(v))
	return c
}

// FuzzLoad: Load never panics, and what it accepts saves back to data
// that loads to the same expectations.
func FuzzLoad(f *testing.F) {
	f.Add(filled(8, map[string][]int{`{"q":1}`: {1200, 90}}).AppendBinary(nil))
	f.Add(New(4).AppendBinary(nil))
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := New(1 << 10)
		n, err := m.Load(data)
		if err != nil {
			return
		}
		again := New(1 << 10)
		if k, err := again.Load(m.AppendBinary(nil)); err != nil || k != m.Len() {
			t.Fatalf("reloading %d of %d tasks: %v", k, n, err)
		}
	})
}
