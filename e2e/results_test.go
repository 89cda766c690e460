package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prorl/prorl/sdk/sdktest"
)

// TestResultsStreamResumes follows /v1/results/stream with Chromium's
// EventSource, the reference SSE client, across a host restart: the
// browser reconnects by itself with the last event's id (Last-Event-ID)
// and must then receive the results finished after it, and none twice.
// With the memory store the restarted host's store is new: its results
// must still come after the id the browser kept.
func TestResultsStreamResumes(t *testing.T) {
	for _, driver := range []string{"bbolt", "memory"} {
		t.Run(driver, func(t *testing.T) { resultsStreamResumes(t, driver) })
	}
}

func resultsStreamResumes(t *testing.T, driver string) {
	nodeModules := sdktest.Reference(t, "../scripts/ref.py", "playwright")
	e := newEnv(t, envOpts{staticBackend: true, simArgs: []string{"--correct-rate", "1"}, extraTOML: fmt.Sprintf("[store]\ndriver = %q\n", driver)})
	e.startHost()
	before := e.submitMath(t, 4)
	for id := range before {
		e.wait(t, id)
	}
	arg, _ := json.Marshal(map[string]any{"base": e.host, "first": 4, "total": 8})
	cmd := browserScript(t, nodeModules, "results_stream.test.mjs", arg)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Let the script close its browser (killed, it leaves Chromium's
		// profile in /tmp): it ends once stdin does.
		_ = stdin.Close()
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	type event struct {
		EventID string `json:"event_id"`
		ID      string `json:"id"`
	}
	var state struct {
		Got    []event `json:"got"`
		Opens  int     `json:"opens"`
		Errors int     `json:"errors"`
		Error  string  `json:"error"`
	}
	read := func(what string) {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("%s: the browser script ended: %v\n%s", what, lines.Err(), tail(stderr.String(), 2000))
		}
		state.Got, state.Error = nil, ""
		if err := json.Unmarshal(lines.Bytes(), &state); err != nil || state.Error != "" {
			t.Fatalf("%s: %v %s\n%s", what, err, lines.Text(), tail(stderr.String(), 2000))
		}
	}
	ids := func() []string {
		var out []string
		for _, ev := range state.Got {
			out = append(out, ev.ID)
		}
		slices.Sort(out)
		return out
	}
	read("the results before the restart")
	if got, want := ids(), sortedIDs(before); !slices.Equal(got, want) {
		t.Fatalf("before the restart: %v, want %v", got, want)
	}
	// The same address again (the browser reconnects to the URL it had),
	// and four more results once it is back.
	addr := strings.TrimPrefix(e.host, "http://")
	e.stopHost()
	e.startHost("--listen", addr)
	after := e.submitMath(t, 4)
	for id := range after {
		e.wait(t, id)
	}
	if _, err := stdin.Write([]byte("go on\n")); err != nil {
		t.Fatal(err)
	}
	read("the results after the restart")
	want := sortedIDs(before, after)
	if got := ids(); !slices.Equal(got, want) {
		t.Fatalf("across the restart the browser received %d results %v, want each of %d once: %v", len(got), state.Got, len(want), want)
	}
	if state.Opens < 2 {
		t.Fatalf("the browser opened the stream %d times: it never reconnected", state.Opens)
	}
	t.Logf("%d results over %d connections (%d errors seen by the browser)", len(state.Got), state.Opens, state.Errors)
}

// TestResultsPagedByBytes: with server.max_page_bytes under one result's
// size, every GET /v1/results page holds one result, and following
// next_since returns each result once.
func TestResultsPagedByBytes(t *testing.T) {
	e := newEnv(t, envOpts{simArgs: []string{"--correct-rate", "1"}, serverTOML: "max_page_bytes = 1\n"})
	e.startHost()
	e.addBackend()
	submitted := e.submitMath(t, 6)
	for id := range submitted {
		e.wait(t, id)
	}
	type page struct {
		Results []struct {
			ID  string `json:"id"`
			Seq uint64 `json:"seq"`
		} `json:"results"`
		NextSince uint64 `json:"next_since"`
	}
	var got []string
	since := uint64(0)
	for range 10 {
		var p page
		e.do("GET", fmt.Sprintf("/v1/results?since=%d", since), nil).json(t, &p)
		if len(p.Results) == 0 {
			if p.NextSince != since {
				t.Fatalf("an empty page moved next_since from %d to %d", since, p.NextSince)
			}
			break
		}
		if len(p.Results) != 1 || p.NextSince != p.Results[0].Seq {
			t.Fatalf("page after %d: %+v, want one result and next_since its seq", since, p)
		}
		got = append(got, p.Results[0].ID)
		since = p.NextSince
	}
	if want := sortedIDs(submitted); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Fatalf("paged %v, want each of %v once", got, want)
	}
}

// sortedIDs are the ids of the sets, sorted.
func sortedIDs(sets ...map[string]bool) []string {
	var out []string
	for _, set := range sets {
		for id := range set {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}
