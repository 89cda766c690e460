package layout

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// reference is an entry of scripts/references.toml, decoded strictly.
type reference struct {
	Kind          string            `toml:"kind"`
	Purpose       string            `toml:"purpose"`
	Requires      []string          `toml:"requires"`
	After         []string          `toml:"after"`
	Env           map[string]string `toml:"env"`
	Packages      []string          `toml:"packages"`
	Requirements  string            `toml:"requirements"`
	NoDeps        bool              `toml:"no_deps"`
	Local         string            `toml:"local"`
	Venv          string            `toml:"venv"`
	Spec          string            `toml:"spec"`
	File          string            `toml:"file"`
	SHA256        string            `toml:"sha256"`
	Dir           string            `toml:"dir"`
	IgnoreScripts bool              `toml:"ignore_scripts"`
	Version       string            `toml:"version"`
	Accept        string            `toml:"accept"`
	Versioned     []string          `toml:"versioned"`
	Build         string            `toml:"build"`
}

// TestReferencesManifest: every reference make test installs is an entry
// of scripts/references.toml, pinned, and every name the Makefile and the
// tests install is one of them; no install script of its own is left
// beside the installer (a source build's recipe aside).
func TestReferencesManifest(t *testing.T) {
	var refs map[string]reference
	md, err := toml.DecodeFile("../../scripts/references.toml", &refs)
	if err != nil {
		t.Fatal(err)
	}
	if un := md.Undecoded(); len(un) > 0 {
		t.Fatalf("unknown keys in scripts/references.toml: %v", un)
	}
	pinned := regexp.MustCompile(`^[^=@ ]+(==|@)[0-9][^ ]*$|^@[^@]+@[0-9][^ ]*$`)
	for name, r := range refs {
		if r.Purpose == "" {
			t.Errorf("[%s]: no purpose", name)
		}
		for _, p := range r.Packages {
			if r.Kind != "apt" && !pinned.MatchString(p) {
				t.Errorf("[%s]: %q is not pinned", name, p)
			}
		}
		for _, f := range append([]string{r.Requirements, r.Local, r.Build}, r.After[min(1, len(r.After)):]...) {
			if f == "" {
				continue
			}
			if _, err := os.Stat(filepath.Join("../..", f)); err != nil {
				t.Errorf("[%s]: %v", name, err)
			}
		}
		switch r.Kind {
		case "pypi":
			if len(r.Packages) == 0 && r.Requirements == "" {
				t.Errorf("[%s]: nothing to install", name)
			}
		case "wheel":
			if len(r.SHA256) != 64 || !pinned.MatchString(r.Spec) || r.File == "" {
				t.Errorf("[%s]: a wheel needs a pinned spec, its file and its sha256", name)
			}
		case "npm":
			if len(r.Packages) == 0 {
				t.Errorf("[%s]: no packages", name)
			}
		case "apt":
			if len(r.Packages) == 0 {
				t.Errorf("[%s]: no packages", name)
			}
		case "source":
			if r.Version == "" || r.Build == "" {
				t.Errorf("[%s]: a source build needs its version and build recipe", name)
			}
		default:
			t.Errorf("[%s]: unknown kind %q", name, r.Kind)
		}
		for _, dep := range r.Requires {
			if _, ok := refs[dep]; !ok {
				t.Errorf("[%s]: requires unknown %q", name, dep)
			}
		}
	}
	// The names installed: by the Makefile and by tests.
	used := map[string][]string{}
	install := regexp.MustCompile(`ref\.py install ([a-z0-9-]+)|ref\.py", "install", "([a-z0-9-]+)"|scripts/ref\.py", "([a-z0-9-]+)"\)`)
	err = filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "node_modules" || n == "bin" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") && d.Name() != "Makefile" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range install.FindAllStringSubmatch(string(b), -1) {
			for _, g := range m[1:] {
				for _, n := range strings.Fields(g) {
					used[n] = append(used[n], path)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(used) < 10 {
		t.Errorf("only %d references found installed: %v", len(used), used)
	}
	for n, where := range used {
		if _, ok := refs[n]; !ok {
			t.Errorf("%v install %q, which scripts/references.toml does not list", slices.Compact(where), n)
		}
	}
	scripts, _ := filepath.Glob("../../scripts/*/install*.sh")
	more, _ := filepath.Glob("../../scripts/install*.sh")
	for _, s := range append(scripts, more...) {
		if filepath.Base(s) != "install-apptainer.sh" {
			t.Errorf("%s: an install script beside scripts/ref.py; make it an entry of scripts/references.toml", s)
		}
	}
}
