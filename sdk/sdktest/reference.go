package sdktest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// RequireRefs is the environment variable that makes a missing reference
// a failure instead of a skip: make test sets it, so CI never skips one.
const RequireRefs = "PRORL_REQUIRE_REFS"

// RefsRequired reports whether every reference must be present.
func RefsRequired() bool { return os.Getenv(RequireRefs) == "1" }

// Missing reports that something a test compares against or runs on (a
// registry package, an image, a dataset, a binary) is not here: what says
// how to provide it. The test is skipped, or fails when RefsRequired.
func Missing(t testing.TB, what string, err error) {
	t.Helper()
	if RefsRequired() {
		t.Fatalf("%s: %v", what, err)
	}
	t.Skipf("%s: %v", what, err)
}

// Reference installs a reference by name with installer, a program run as
// `python3 installer install NAME` that prints where it is (this
// repository's scripts/ref.py, over scripts/references.toml): a venv's
// python, a wheel, a node_modules directory. Where it cannot: Missing.
func Reference(t testing.TB, installer, name string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command("python3", installer, "install", name)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		Missing(t, fmt.Sprintf("install the reference %s (python3 %s install %s)", name, installer, name), fmt.Errorf("%w: %s", err, lastLines(stderr.String(), 5)))
	}
	return strings.TrimSpace(string(out))
}

// lastLines is the end of a command's output, for an error.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// ReferencePython runs the install script of a reference implementation a
// domain is tested against (a registry package in a pinned venv); the
// script prints the venv's python. Where it cannot install: Missing. An
// environment variable named in require, when set, makes it required too
// (the way of earlier versions, still honoured).
func ReferencePython(t testing.TB, installScript string, require ...string) string {
	t.Helper()
	py, err := exec.Command("bash", installScript).Output()
	if err != nil {
		for _, env := range require {
			if os.Getenv(env) != "" {
				t.Fatalf("install the reference (%s): %v", installScript, err)
			}
		}
		Missing(t, "install the reference ("+installScript+")", err)
	}
	return strings.TrimSpace(string(py))
}

// RunJSONLines feeds a reference script one JSON line per input and
// returns its output, one JSON line per input, in order. procs processes
// share the inputs (references in Python are slow; one per core).
func RunJSONLines[T any](python, script string, in []T, procs int) ([]json.RawMessage, error) {
	procs = max(1, min(procs, len(in)))
	size := (len(in) + procs - 1) / procs
	results := make([][]json.RawMessage, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for c := range procs {
		lo, hi := min(c*size, len(in)), min((c+1)*size, len(in))
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[c], errs[c] = runJSONLines(python, script, in[lo:hi])
		}()
	}
	wg.Wait()
	var out []json.RawMessage
	for c := range procs {
		if errs[c] != nil {
			return nil, errs[c]
		}
		out = append(out, results[c]...)
	}
	return out, nil
}

func runJSONLines[T any](python, script string, in []T) ([]json.RawMessage, error) {
	var stdin, stderr bytes.Buffer
	for _, v := range in {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		stdin.Write(append(b, '\n'))
	}
	cmd := exec.Command(python, script)
	cmd.Stdin, cmd.Stderr = &stdin, &stderr
	stdout, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", script, err, stderr.Bytes())
	}
	var out []json.RawMessage
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		out = append(out, json.RawMessage(bytes.Clone(sc.Bytes())))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) != len(in) {
		return nil, fmt.Errorf("%s: %d output lines for %d inputs", script, len(out), len(in))
	}
	return out, nil
}
