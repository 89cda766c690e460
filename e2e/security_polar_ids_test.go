package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// TestLongPathIDs: Polar's DELETE /rollout/task/{id}?register_if_missing
// took ids of any length from the path (submit caps them at 512), kept
// each as a cancel marker swept only by a later submit, and logged the ids
// the store refused whole: 200 requests with 900 KB ids added 410 MB of
// memory and 184 MB of log. Ids from paths are now capped like ids in
// bodies, and what is logged of an id is cut short.
func TestLongPathIDs(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.startHost()
	long := strings.Repeat("a", 900<<10)
	logBefore := e.hostP.stderr.Len()
	for range 20 {
		r := e.do("DELETE", "/rollout/task/"+long+"?register_if_missing=true", nil)
		if r.code != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), `"string_too_long"`) {
			t.Fatalf("900 KB id: %d %.200s", r.code, r.body)
		}
	}
	for _, path := range []string{"/rollout/task/" + long, "/tasks/" + long + "/sessions"} {
		if r := e.do("GET", path, nil); r.code != http.StatusUnprocessableEntity {
			t.Fatalf("GET %.40s…: %d %.200s", path, r.code, r.body)
		}
	}
	if r := e.do("GET", "/v1/rollouts/r-"+long, nil); r.code != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), `"field":"id"`) {
		t.Fatalf("v1 id: %d %.200s", r.code, r.body)
	}
	if grew := e.hostP.stderr.Len() - logBefore; grew > 64<<10 {
		t.Fatalf("the host logged %d bytes for 23 refused requests", grew)
	}
	// An id at the limit still works as Polar's: its marker keeps a late
	// submit of the same id out.
	id := strings.Repeat("b", 512)
	if r := e.do("DELETE", "/rollout/task/"+id+"?register_if_missing=true", nil); r.code != http.StatusOK {
		t.Fatalf("512-character id: %d %s", r.code, r.body)
	}
	if r := e.do("POST", "/rollout/task/submit", polarTask(id, 1, nil)); r.code != http.StatusConflict {
		t.Fatalf("submit after the cancel marker: %d %s", r.code, r.body)
	}
}
