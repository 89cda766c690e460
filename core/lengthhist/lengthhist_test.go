package lengthhist

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestExpect(t *testing.T) {
	tests := []struct {
		name string
		obs  []int
		want int
	}{
		{"unseen", nil, 0},
		{"one", []int{1200}, 1200},
		{"mean of the first", []int{1000, 2000, 3000}, 2000},
		{"rounded", []int{1, 2}, 2},
		{"moving average past the window", []int{100, 100, 100, 100, 100, 100, 100, 100, 900}, 200},
		{"negative ignored", []int{-5, 400}, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New(16)
			k := KeyOf("math", []byte(`{"q":1}`))
			for _, n := range tc.obs {
				m.Observe(k, n)
			}
			if got := m.Expect(k); got != tc.want {
				t.Fatalf("Expect = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestKeyOf(t *testing.T) {
	base := KeyOf("math", []byte(`{"question":"1+1","answer":"2"}`))
	tests := []struct {
		name   string
		domain string
		task   string
		same   bool
	}{
		{"whitespace", "math", "{ \"question\": \"1+1\",\n  \"answer\": \"2\" }", true},
		{"other domain", "stem", `{"question":"1+1","answer":"2"}`, false},
		{"other task", "math", `{"question":"1+2","answer":"3"}`, false},
		{"space inside a string counts", "math", `{"question":"1 + 1","answer":"2"}`, false},
		{"not JSON, hashed as is", "math", `{"question":`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := KeyOf(tc.domain, []byte(tc.task)) == base; got != tc.same {
				t.Fatalf("same key = %v, want %v", got, tc.same)
			}
		})
	}
}

// TestCapacity: the memo never holds more than its capacity; the tasks
// seen lately survive, the oldest go first.
func TestCapacity(t *testing.T) {
	m := New(8)
	key := func(i int) Key { return KeyOf("d", []byte{byte('a' + i)}) }
	for i := range 20 {
		m.Observe(key(i), 100+i)
		if n := m.Len(); n > 8 {
			t.Fatalf("%d tasks held, capacity 8", n)
		}
		if i > 0 {
			m.Observe(key(0), 100) // task 0 is seen every time: kept
		}
	}
	if got := m.Expect(key(0)); got != 100 {
		t.Fatalf("the task seen throughout: Expect = %d, want 100", got)
	}
	if got := m.Expect(key(19)); got != 119 {
		t.Fatalf("the latest task: Expect = %d, want 119", got)
	}
	if got := m.Expect(key(1)); got != 0 {
		t.Fatalf("an old task still held: Expect = %d", got)
	}
}

func TestNilIsOff(t *testing.T) {
	for _, c := range []int{0, 1, -3} {
		m := New(c)
		if m != nil {
			t.Fatalf("New(%d) is on", c)
		}
		m.Observe(1, 10)
		if m.Expect(1) != 0 || m.Len() != 0 {
			t.Fatal("a nil memo remembered")
		}
	}
}

// FuzzKeyOf: any input hashes without panicking, and JSON compacts to the
// same key as its re-encoding.
func FuzzKeyOf(f *testing.F) {
	f.Add([]byte(`{"question":"What is 17 + 25?","answer":"42"}`))
	f.Add([]byte(`[1, 2, {"a": null}]`))
	f.Add([]byte("\xff{"))
	f.Fuzz(func(t *testing.T, task []byte) {
		k := KeyOf("math", task)
		var v any
		if json.Unmarshal(task, &v) != nil {
			return
		}
		var indented bytes.Buffer
		if json.Indent(&indented, task, "", "  ") != nil {
			return
		}
		if KeyOf("math", indented.Bytes()) != k {
			t.Fatalf("%q and its indented form %q differ", task, indented.Bytes())
		}
	})
}
