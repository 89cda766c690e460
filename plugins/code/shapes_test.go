package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
)

// shapeRow is a row of examples/code/shapes.jsonl (scripts/code/shapes.py):
// a task in a dataset's published shape and answers with the verdict its
// reference harness gives them.
type shapeRow struct {
	Name    string          `json:"name"`
	Task    json.RawMessage `json:"task"`
	Answers []struct {
		Name     string  `json:"name"`
		Response string  `json:"response"`
		Verdict  string  `json:"verdict"`
		Reward   float64 `json:"reward"`
		// SandboxOnly holds only inside a sandbox (no capabilities).
		SandboxOnly bool `json:"sandbox_only"`
	} `json:"answers"`
}

func readShapes(t *testing.T) []shapeRow {
	t.Helper()
	f, err := os.Open("../../examples/code/shapes.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []shapeRow
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r shapeRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestShapes judges every answer of every real-shape row on this machine's
// toolchains (the fake host runs commands here; e2e runs the same table in
// real sandboxes).
func TestShapes(t *testing.T) {
	h := startWith(t, `{"time_limit": 6, "memory_mb": 256, "workers": 2}`)
	for _, row := range readShapes(t) {
		t.Run(row.Name, func(t *testing.T) {
			if _, err := ParseTask(row.Task); err != nil {
				t.Fatalf("refused: %v", err)
			}
			for _, a := range row.Answers {
				if a.SandboxOnly && os.Geteuid() == 0 {
					t.Logf("%s: holds only in a sandbox (root here has CAP_SYS_PTRACE); e2e runs it", a.Name)
					continue
				}
				if lang := langOfResponse(a.Response); lang != "python" && !haveToolchain(lang) {
					t.Logf("%s: no %s toolchain here", a.Name, lang)
					continue
				}
				j := evaluate(t, h, string(row.Task), a.Response)
				if j.reward != a.Reward || j.info["verdict"] != a.Verdict {
					t.Errorf("%s: reward %v verdict %v, want %v %s; info %v", a.Name, j.reward, j.info["verdict"], a.Reward, a.Verdict, j.info)
				}
			}
		})
	}
}

func langOfResponse(resp string) string {
	a, _ := lastCodeBlock(resp, "")
	return a.lang
}

func haveToolchain(lang string) bool {
	bin := map[string]string{"cpp": "g++", "c": "gcc", "java": "javac", "javascript": "node"}[lang]
	_, err := exec.LookPath(bin)
	return err == nil
}
