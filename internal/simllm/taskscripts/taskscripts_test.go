package taskscripts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every bundled example file scripts (make run feeds them all to the
// simulator), and each row's right play states its answer.
func TestBundledExamples(t *testing.T) {
	files, _ := filepath.Glob("../../../examples/*/tasks.jsonl")
	if len(files) < 4 {
		t.Fatalf("found %v", files)
	}
	for _, f := range files {
		sc, err := Load(f, Options{ThinkTurns: 1})
		if err != nil || len(sc) == 0 {
			t.Errorf("%s: %d scripts, %v", f, len(sc), err)
		}
		for _, s := range sc {
			// The two plays differ in their answer or, for a repository
			// task, in the command that changes the files.
			if s.Final == "" || s.Wrong == nil || (s.Wrong.Final == s.Final && string(s.Wrong.Calls[0].Arguments) == string(s.Calls[0].Arguments)) {
				t.Errorf("%s: %q: right %q, wrong %+v", f, s.Key, s.Final, s.Wrong)
			}
		}
	}
}

// A row the loader cannot read is an error naming the line, not a task the
// simulator silently knows nothing about.
func TestUnknownShapes(t *testing.T) {
	for body, want := range map[string]string{
		`{"question": "q", "answer": "4"}`:             "",
		`{"question": "q", "gold": "4"}`:               ":1: no answer",
		`{"query": "q", "answer": "4"}`:                ":1: no question",
		"{\"question\": \"q\", \"answer\": 1}\n{nope}": ":2:",
	} {
		p := filepath.Join(t.TempDir(), "t.jsonl")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p, Options{})
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

func TestPlays(t *testing.T) {
	s := Script("What is 2+2?", "4", Options{PythonTurns: 1, ThinkTurns: 2})
	if len(s.Calls) != 3 || s.Calls[0].Tool != "python" || s.Calls[2].Tool != "think" || s.Final != `The answer is \boxed{4}.` || s.Wrong.Final != `The answer is \boxed{5}.` {
		t.Errorf("%+v", s)
	}
	s = Script("Fix it.", BashAnswer+"sed -i s/a/b/ f.py", Options{ThinkTurns: 2})
	if len(s.Calls) != 1 || s.Calls[0].Tool != "bash" || !strings.Contains(string(s.Calls[0].Arguments), "sed -i") || s.Final != "Done." {
		t.Errorf("%+v", s)
	}
}
