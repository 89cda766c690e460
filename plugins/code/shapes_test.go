package main

import (
	"os"
	"os/exec"
	"testing"

	"github.com/prorl/prorl/internal/datasets"
)

func readShapes(t *testing.T) []datasets.CodeShape {
	t.Helper()
	rows, err := datasets.CodeShapes("../../examples/code/shapes.jsonl")
	if err != nil {
		t.Fatal(err)
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
