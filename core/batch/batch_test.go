package batch

import (
	"math"
	"strings"
	"testing"
)

func TestPassAtK(t *testing.T) {
	tests := []struct {
		n, c, k int
		want    float64
	}{
		{4, 0, 1, 0}, {4, 4, 1, 1}, {4, 1, 1, 0.25}, {4, 1, 4, 1}, {4, 2, 2, 1 - 1.0/6}, {1, 1, 1, 1},
	}
	for _, tt := range tests {
		if got := passAtK(tt.n, tt.c, tt.k); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("pass@%d(n=%d,c=%d) = %v, want %v", tt.k, tt.n, tt.c, got, tt.want)
		}
	}
}

func TestReadTasks(t *testing.T) {
	in := `{"question":"1+1?","answer":"2"}
# a comment
{"task":{"domain":"math","question":"q","answer":"a"},"n":3}
{"data_source":"deepscaler","prompt":[{"role":"user","content":"x"}],"reward_model":{"ground_truth":"1"}}
`
	reqs, err := readTasks(strings.NewReader(in), Options{N: 2, Domain: "math"})
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 3 || reqs[1].N != 3 || reqs[0].N != 2 || !strings.Contains(string(reqs[0].Task), `"domain":"math"`) || strings.Contains(string(reqs[2].Task), `"domain"`) {
		t.Fatalf("%+v", reqs)
	}
	if _, err := readTasks(strings.NewReader(`{"question":"q"}`), Options{}); err == nil || !strings.Contains(err.Error(), "--domain") {
		t.Fatalf("no domain: %v", err)
	}
	if _, err := readTasks(strings.NewReader(`{bad`), Options{}); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("bad json: %v", err)
	}
}
