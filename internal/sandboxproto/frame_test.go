package sandboxproto

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

var key = []byte("0123456789abcdef0123456789abcdef")

func TestSealOpen(t *testing.T) {
	s, o := NewSealer(key, ToHost), NewOpener(key, ToHost)
	bodies := []string{`{"id":1}`, `{"id":2,"stdout":"aGk="}`, `{}`}
	var stream bytes.Buffer
	for _, b := range bodies {
		stream.Write(s.Seal([]byte(b)))
	}
	r := bufio.NewReader(&stream)
	for _, want := range bodies {
		f, _, err := ReadFrame(r, MaxFrame)
		if err != nil {
			t.Fatal(err)
		}
		got, err := o.Open(f)
		if err != nil || string(got) != want {
			t.Fatalf("%q %v, want %q", got, err, want)
		}
	}
}

func TestOpenRefuses(t *testing.T) {
	s := NewSealer(key, ToHost)
	first := s.Seal([]byte(`{"id":1}`))
	first = first[:len(first)-1]
	second := s.Seal([]byte(`{"id":2}`))
	second = second[:len(second)-1]
	other := NewSealer([]byte("another key, 32 bytes long......"), ToHost).Seal([]byte(`{"id":1}`))
	reflected := NewSealer(key, ToAgent).Seal([]byte(`{"id":1}`))
	tampered := append([]byte{}, first...)
	tampered[len(tampered)-2] = '2'
	cases := map[string][]byte{
		"wrong key":      other[:len(other)-1],
		"reflected":      reflected[:len(reflected)-1],
		"tampered":       tampered,
		"out of order":   second,
		"no MAC":         []byte(`{"id":1}`),
		"bad MAC digits": append([]byte(strings.Repeat("z", 32)), `{"id":1}`...),
		"empty":          nil,
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			o := NewOpener(key, ToHost)
			if _, err := o.Open(f); !errors.Is(err, ErrForged) {
				t.Fatalf("accepted: %v", err)
			}
			// A refused frame leaves the channel in step.
			if _, err := o.Open(first); err != nil {
				t.Fatalf("the genuine frame after a refused one: %v", err)
			}
		})
	}
	o := NewOpener(key, ToHost)
	if _, err := o.Open(first); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Open(first); !errors.Is(err, ErrForged) {
		t.Fatal("a replayed frame was accepted")
	}
}

func TestReadFrameCap(t *testing.T) {
	long := strings.Repeat("x", 100) + "\n" + "ok\n"
	r := bufio.NewReaderSize(strings.NewReader(long), 16)
	if _, n, err := ReadFrame(r, 50); !errors.Is(err, ErrTooLong) || n != 101 {
		t.Fatalf("%d %v", n, err)
	}
	if f, _, err := ReadFrame(r, 50); err != nil || string(f) != "ok" {
		t.Fatalf("the next frame after an oversized one: %q %v", f, err)
	}
	if _, _, err := ReadFrame(r, 50); err != io.EOF {
		t.Fatalf("%v", err)
	}
	if _, _, err := ReadFrame(bufio.NewReader(strings.NewReader("partial")), 50); err != io.ErrUnexpectedEOF {
		t.Fatalf("%v", err)
	}
}

// FuzzFrames: whatever arrives, ReadFrame keeps at most the cap and Open
// accepts only what the sealer made.
func FuzzFrames(f *testing.F) {
	s := NewSealer(key, ToHost)
	f.Add(s.Seal([]byte(`{"id":1}`)))
	f.Add([]byte("00\n\n" + strings.Repeat("a", 300)))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReaderSize(bytes.NewReader(data), 16)
		o := NewOpener(key, ToHost)
		for {
			frame, _, err := ReadFrame(r, 64)
			if err != nil {
				return
			}
			if len(frame) > 64 {
				t.Fatalf("kept %d bytes over a cap of 64", len(frame))
			}
			if body, err := o.Open(frame); err == nil && !bytes.Equal(body, []byte(`{"id":1}`)) {
				t.Fatalf("accepted %q", body)
			}
		}
	})
}
