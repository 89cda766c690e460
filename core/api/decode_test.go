package api

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestBodyTimeout: a client dripping its body cannot hold the server.
func TestBodyTimeout(t *testing.T) {
	old := bodyTimeout
	bodyTimeout = 300 * time.Millisecond
	defer func() { bodyTimeout = old }()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		if e := Decode(w, r, 1<<20, &v); e != nil {
			WriteError(w, e)
			return
		}
		w.WriteHeader(200)
	}))
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	t0 := time.Now()
	go func() {
		for i := 0; i < 20; i++ {
			time.Sleep(100 * time.Millisecond)
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	n, _ := c.Read(buf)
	if took := time.Since(t0); !strings.Contains(string(buf[:n]), "408") || took > 2*time.Second {
		t.Fatalf("after %v: %q", took, buf[:n])
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		in          string
		code        int
		errCode     string
		field       string
		validateErr string
	}{
		{`{"task":{"domain":"math"},"n":2}`, 0, "", "", ""},
		{`{"task":{},"sampling":{"top_k":-2}}`, 0, "", "", "sampling.top_k"},
		{`{"task":{},"max_turns":0}`, 0, "", "", "max_turns"},
		{`{"task":{},"timeout":0}`, 0, "", "", "timeout"},
		{`{"task":{},"priority":101}`, 0, "", "", "priority"},
		{`{"task":{},"priority":-1}`, 0, "", "", "priority"},
		{`{"task":{},"expected_tokens":-5}`, 0, "", "", "expected_tokens"},
		{`{"task":{},"expected_tokens":4000,"n":8}`, 0, "", "", ""},
		{`{"task":{},"priority":100,"n":4,"early_stop_min_usable":4}`, 0, "", "", ""},
		{`{"task":{},"n":4,"early_stop_min_usable":5}`, 0, "", "", "early_stop_min_usable"},
		{`{"task":{},"early_stop_min_usable":0}`, 0, "", "", "early_stop_min_usable"},
		{`{"task":{},"timeout":"1s"}`, 0, "", "", ""},
		{`{"task":{},"sampling":{"max_tokens_per_turn":-1}}`, 0, "", "", "sampling.max_tokens_per_turn"},
		{`{"task":{},"sampling":{"stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}}`, 0, "", "", "sampling.stop"},
		{`{"task":{},"sampling":{"seed":"x"}}`, 400, "invalid_type", "sampling.seed", ""},
		{`{"task":{},"timeout":true}`, 422, "invalid_field", "timeout", ""},
		{`{"task":{}} x`, 400, "malformed_json", "", ""},
		{`  `, 400, "empty_body", "", ""},
		{`[]`, 400, "invalid_type", "", ""},
		{`{"task":{},"n":"four"}`, 400, "invalid_type", "n", ""},
	}
	for _, tt := range tests {
		var sr SubmitRequest
		e := decodeBytes([]byte(tt.in), &sr)
		if tt.code != 0 {
			if e == nil || e.Status != tt.code || e.Code != tt.errCode || e.Field != tt.field {
				t.Errorf("%s: %+v", tt.in, e)
			}
			// Errors speak JSON, never Go.
			if e != nil && (strings.Contains(e.Message, "api.") || strings.Contains(e.Message, "int64") || strings.Contains(e.Message, "struct")) {
				t.Errorf("%s: the message names a Go type: %s", tt.in, e.Message)
			}
			continue
		}
		if e != nil {
			t.Errorf("%s: decode: %+v", tt.in, e)
			continue
		}
		ve := sr.validate("", 64)
		switch {
		case tt.validateErr == "" && ve != nil:
			t.Errorf("%s: validate: %+v", tt.in, ve)
		case tt.validateErr != "" && (ve == nil || ve.Field != tt.validateErr || ve.Status != http.StatusUnprocessableEntity):
			t.Errorf("%s: validate = %+v, want field %s", tt.in, ve, tt.validateErr)
		}
	}
}

func FuzzDecodeSubmit(f *testing.F) {
	for _, s := range []string{`{"task":{"domain":"math","question":"q","answer":"1"},"n":4,"sampling":{"temperature":1,"seed":3}}`,
		`{"requests":[{"task":{}}]}`, `{"task":{},"timeout":"30s","metadata":{"a":[1,2]}}`, `{"task":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var sr SubmitRequest
		if e := decodeBytes(data, &sr); e != nil {
			if e.Status < 400 || e.Status > 499 || e.Message == "" {
				t.Fatalf("decode error %+v is not a 4xx with a message", e)
			}
			return
		}
		if ve := sr.validate("", 64); ve == nil {
			if sr.N != nil && (*sr.N < 1 || *sr.N > 64) {
				t.Fatalf("n %d passed validation", *sr.N)
			}
			if sr.Sampling.Temperature != nil && *sr.Sampling.Temperature < 0 {
				t.Fatal("negative temperature passed validation")
			}
			if _, e := readTask(sr.Task, "task"); e == nil {
				if !json.Valid(sr.Task) {
					t.Fatal("invalid task JSON accepted")
				}
			}
		}
		var br BatchRequest
		_ = decodeBytes(data, &br)
	})
}
