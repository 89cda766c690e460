package datasets

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

// CodeShape is a row of examples/code/shapes.jsonl (scripts/code/shapes.py):
// a task in a dataset's published shape, answers with the verdict its
// reference harness gives them, and what the simulator needs to play it.
type CodeShape struct {
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
	Sim *struct {
		Question string `json:"question"`
		Solution string `json:"solution"`
	} `json:"sim"`
}

// CodeShapes reads the table.
func CodeShapes(path string) ([]CodeShape, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []CodeShape
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r CodeShape
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, len(rows)+1, err)
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}
