package main

import (
	"archive/zip"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prorl/prorl/sdk/sdktest"
)

// TestOtherRepository builds this example as a plugin in a module of its
// own that requires the SDK by version, no replace directive, the SDK being
// served by a module proxy (a file proxy holding the SDK of this checkout,
// in the layout proxy.golang.org serves), then runs the conformance suite
// against the binary as the host would start it.
func TestOtherRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module from a proxy")
	}
	const version = "v0.1.0"
	sdkDir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	out, err := exec.Command(goBin, "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(strings.TrimSpace(string(out)), "cache", "download")

	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	writeModule(t, filepath.Join(proxy, "github.com/prorl/prorl/sdk/@v"), sdkDir, "github.com/prorl/prorl/sdk", version)

	mod := filepath.Join(tmp, "countdown")
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.MkdirAll(mod, 0o755))
	must(t, os.WriteFile(filepath.Join(mod, "main.go"), src, 0o644))
	must(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/countdown\n\ngo 1.26.0\n\nrequire github.com/prorl/prorl/sdk "+version+"\n"), 0o644))

	env := append(os.Environ(),
		"GOPROXY=file://"+proxy+",file://"+cache, // the SDK from "the proxy", its dependencies from this machine's cache
		"GOSUMDB=off", "GOWORK=off", "GOFLAGS=-mod=mod -modcacherw",
		"GOMODCACHE="+filepath.Join(tmp, "modcache"))
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", "countdown", "."}} {
		cmd := exec.Command(goBin, args...)
		cmd.Dir, cmd.Env = mod, env
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	gomod, _ := os.ReadFile(filepath.Join(mod, "go.mod"))
	if strings.Contains(string(gomod), "replace") {
		t.Fatalf("go.mod has a replace:\n%s", gomod)
	}
	sdktest.Conformance(t, sdktest.Suite{
		Command: []string{filepath.Join(mod, "countdown")},
		Config:  json.RawMessage(`{"max_turns": 4}`),
		Cases:   []sdktest.Case{{Task: json.RawMessage(task), Right: "<answer>(3 + 5) * 2</answer>", Wrong: "<answer>3 + 5 + 2</answer>"}},
	})
}

// writeModule writes a module version in the GOPROXY protocol's layout
// (list, .info, .mod, .zip with every file under module@version/), leaving
// out what a module zip leaves out: nested modules, VCS and cache dirs.
func writeModule(t *testing.T, dir, src, path, version string) {
	must(t, os.MkdirAll(dir, 0o755))
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "list"), []byte(version+"\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, version+".info"), []byte(`{"Version":"`+version+`","Time":"2026-11-22T00:00:00Z"}`), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, version+".mod"), gomod, 0o644))
	f, err := os.Create(filepath.Join(dir, version+".zip"))
	must(t, err)
	zw := zip.NewWriter(f)
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			name := d.Name()
			if p != src && (strings.HasPrefix(name, ".") || name == "__pycache__" || name == "node_modules" || exists(filepath.Join(p, "go.mod"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasSuffix(rel, ".pyc") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		w, err := zw.Create(path + "@" + version + "/" + filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
	must(t, err)
	must(t, zw.Close())
	must(t, f.Close())
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
