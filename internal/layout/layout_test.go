// Package layout checks the house rules of docs/architecture.md: the
// arrows between packages that must never exist, and the sizes of packages
// and functions. What does not hold yet is listed here, by name: a list
// that may only shrink. A new violation fails; so does a listed one that
// no longer occurs (take it off the list).
package layout

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/prorl/prorl/"

// Known exceptions, each a gap docs/architecture.md names.
var (
	// "importer -> imported" arrows that break a rule today (none: keep it so).
	knownArrows = []string{}
	// Packages of core/ over maxPackageLines of non-test Go.
	knownLargePackages = []string{"core/api", "core/pipeline", "core/sandbox"}
	// Functions over maxFuncLines, as "dir.Func".
	knownLongFuncs = []string{}
)

const (
	maxPackageLines = 1500
	maxFuncLines    = 150
)

// layers orders the host's packages: one may import its own layer or lower.
var layers = []struct {
	name string
	pkgs []string
}{
	{"contract", []string{"sdk/proto", "sdk/wire"}},
	{"plumbing", []string{"core/jsonw", "core/jsonscan", "core/httpc", "core/baseurl", "core/reqbody", "core/egress", "core/flightcache", "core/dirlock",
		"core/rundir", "core/lengthhist", "core/openapi", "core/metrics", "internal/sandboxproto", "internal/seccomp", "internal/syncbuf", "internal/profiling"}},
	{"values", []string{"core/trajectory", "core/config", "core/tally"}},
	{"engines", []string{"core/tokenizer", "core/toolcall", "core/engine", "core/backend", "core/sandbox", "core/images", "core/store", "core/pluginhost", "core/dataset"}},
	{"turns", []string{"core/agent", "core/gateway", "core/policy", "core/groups", "core/sessions", "core/failover"}},
	{"line", []string{"core/pipeline"}},
	{"services", []string{"core/coord"}},
	{"front", []string{"core/api", "core/ui", "core/batch"}},
	{"assembly", []string{"core/host", "cmd/"}},
}

// layerOf is a package's layer index (a package in a listed one's subtree
// shares its layer), or -1.
func layerOf(p string) int {
	for i, l := range layers {
		for _, q := range l.pkgs {
			if p == q || strings.HasPrefix(p, strings.TrimSuffix(q, "/")+"/") {
				return i
			}
		}
	}
	return -1
}

// testOnly are packages only tests and the simulator's binary may import.
var testOnly = []string{"internal/simllm", "internal/testvllm", "internal/harnessplay", "internal/datasets", "internal/hammer", "internal/testmodels", "internal/testbin", "internal/apitest"}

type pkg struct {
	path    string   // relative to the module root
	imports []string // this repository's, relative
	dir     string
	files   []string // non-test Go files
}

// listPackages lists the packages of the module in dir (relative paths
// prefixed with prefix).
func listPackages(t *testing.T, dir, prefix string) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \",\"}}|{{.Dir}}|{{join .GoFiles \",\"}}", "./...")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v", dir, err)
	}
	var ps []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "|")
		if len(f) != 4 || !strings.HasPrefix(f[0], mod) {
			continue
		}
		p := pkg{path: prefix + strings.TrimPrefix(f[0], mod), dir: f[2]}
		for _, im := range strings.Split(f[1], ",") {
			if strings.HasPrefix(im, mod) {
				p.imports = append(p.imports, strings.TrimPrefix(im, mod))
			}
		}
		if f[3] != "" {
			p.files = strings.Split(f[3], ",")
		}
		ps = append(ps, p)
	}
	return ps
}

func root(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func allPackages(t *testing.T) []pkg {
	r := root(t)
	ps := listPackages(t, r, "")
	// The SDK is a module of its own at sdk/ (module path .../sdk).
	return append(ps, listPackages(t, filepath.Join(r, "sdk"), "")...)
}

func under(p string, prefixes ...string) bool {
	for _, q := range prefixes {
		if p == q || strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}

// violation says which rule an arrow breaks ("" if none).
func violation(from, to string) string {
	switch {
	case under(from, "sdk") && under(to, "core", "internal", "plugins"):
		return "1: sdk/ imports nothing of core/, internal/ or plugins/"
	case under(from, "plugins") && !under(to, "sdk") && !(under(to, "plugins") && strings.SplitN(to, "/", 3)[1] == strings.SplitN(from, "/", 3)[1]):
		return "2: a plugin imports only sdk/"
	case under(from, "core", "cmd") && under(to, "plugins"):
		return "3/4: the host imports no plugin"
	case under(from, "core", "cmd") && under(to, "sdk") && !under(to, "sdk/proto", "sdk/wire"):
		return "3: core/ imports only the SDK's contract"
	case under(from, "core", "cmd") && to == "sdk/proto" && from != "core/pluginhost":
		return "5: generated types stop at core/pluginhost"
	case !strings.HasPrefix(from, "cmd/prorl-simllm") && !under(from, "internal/simllm", "internal/testvllm", "internal/harnessplay", "e2e", "bench") && under(to, testOnly...):
		return "7: product code imports no test-only package"
	}
	if lf, lt := layerOf(from), layerOf(to); lf >= 0 && lt > lf {
		return fmt.Sprintf("6: %s (%s) imports a higher layer, %s (%s)", from, layers[lf].name, to, layers[lt].name)
	}
	return ""
}

// TestArrows: no package imports across a forbidden arrow but the listed ones.
func TestArrows(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range allPackages(t) {
		if under(p.path, "e2e", "bench", "internal/layout") {
			continue
		}
		if under(p.path, "core") && layerOf(p.path) < 0 {
			t.Errorf("%s is in no layer: add it to layers (and docs/architecture.md)", p.path)
		}
		for _, im := range p.imports {
			why := violation(p.path, im)
			if why == "" {
				continue
			}
			arrow := p.path + " -> " + im
			seen[arrow] = true
			if !slices.Contains(knownArrows, arrow) {
				t.Errorf("%s breaks rule %s (docs/architecture.md)", arrow, why)
			}
		}
	}
	for _, a := range knownArrows {
		if !seen[a] {
			t.Errorf("%s no longer occurs: take it off knownArrows", a)
		}
	}
}

// TestSizes: no package of core/ over maxPackageLines, no function over
// maxFuncLines, but the listed ones.
func TestSizes(t *testing.T) {
	large, long := map[string]bool{}, map[string]bool{}
	fset := token.NewFileSet()
	for _, p := range allPackages(t) {
		lines := 0
		for _, name := range p.files {
			path := filepath.Join(p.dir, name)
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(src[:min(len(src), 200)], []byte("Code generated")) {
				continue
			}
			lines += bytes.Count(src, []byte("\n"))
			f, err := parser.ParseFile(fset, path, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
					name := p.path + "." + fd.Name.Name
					long[name] = true
					if !slices.Contains(knownLongFuncs, name) {
						t.Errorf("%s is %d lines, over %d", name, n, maxFuncLines)
					}
				}
			}
		}
		if under(p.path, "core") && !under(p.path, "core/tokenizer/bpe", "core/tokenizer/regex", "core/tokenizer/jinja", "core/tokenizer/harmony") && lines > maxPackageLines {
			large[p.path] = true
			if !slices.Contains(knownLargePackages, p.path) {
				t.Errorf("%s is %d lines of non-test Go, over %d", p.path, lines, maxPackageLines)
			}
		}
	}
	for _, p := range knownLargePackages {
		if !large[p] {
			t.Errorf("%s is no longer over %d lines: take it off knownLargePackages", p, maxPackageLines)
		}
	}
	for _, f := range knownLongFuncs {
		if !long[f] {
			t.Errorf("%s is no longer over %d lines: take it off knownLongFuncs", f, maxFuncLines)
		}
	}
}
