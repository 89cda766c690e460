package layout

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestFrontDoor: the README is a front door (at most 200 lines) that links
// every page of docs/; no page recounts the development history (which
// working session measured or changed what), and every relative link of a
// page leads to a file that exists.
func TestFrontDoor(t *testing.T) {
	r := root(t)
	readme, err := os.ReadFile(filepath.Join(r, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > 200 {
		t.Errorf("README.md is %d lines, over 200: move the detail into docs/", n)
	}
	pages, _ := filepath.Glob(filepath.Join(r, "docs", "*.md"))
	if len(pages) == 0 {
		t.Fatal("no docs/*.md")
	}
	for _, p := range pages {
		if !strings.Contains(string(readme), "](docs/"+filepath.Base(p)+")") {
			t.Errorf("README.md does not link docs/%s", filepath.Base(p))
		}
	}
	history := regexp.MustCompile(`(?i)\bsessions? [0-9]+`)
	link := regexp.MustCompile(`\]\(([^)#:\s]+)(#[^)]*)?\)`)
	for _, p := range append(pages, filepath.Join(r, "README.md")) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(r, p)
		if m := history.FindString(string(b)); m != "" {
			t.Errorf("%s mentions %q: development history goes in commit messages and issue notes", rel, m)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			if _, err := os.Stat(filepath.Join(filepath.Dir(p), m[1])); err != nil {
				t.Errorf("%s links %s, which does not exist", rel, m[1])
			}
		}
	}
}
