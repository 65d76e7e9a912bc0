package redlock_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDocsCiteOnlyTestsThatExist: every test or example the docs name as
// the proof of a guarantee or the replay of a trap (`TestX` in README.md
// and docs/*.md) is a function of the module's test files. A test renamed
// or removed without its citation fails here (one had: the design page
// cited a gather test that had been merged into another).
func TestDocsCiteOnlyTestsThatExist(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "*_test.go").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout)", err)
	}
	defined := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Example)\w+)\(`)
	for _, f := range strings.Fields(string(out)) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
	}
	docs, _ := filepath.Glob("docs/*.md")
	cite := regexp.MustCompile("`((?:Test|Example)[A-Z_]\\w*)")
	cited := 0
	for _, f := range append(docs, "README.md") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cite.FindAllStringSubmatch(string(b), -1) {
			cited++
			if !defined[m[1]] {
				t.Errorf("%s cites %s, which no test file defines", f, m[1])
			}
		}
	}
	if cited == 0 {
		t.Fatal("no citation found: the pattern no longer matches the docs")
	}
}

// TestTheTestIndexListsEveryTestFile: docs/tests.md, the index of the
// root package's tests by what they pin, names every root test file, and
// only those.
func TestTheTestIndexListsEveryTestFile(t *testing.T) {
	b, err := os.ReadFile("docs/tests.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]int{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(\\w+_test\\.go)` \\| (\\d+) \\|").FindAllStringSubmatch(string(b), -1) {
		listed[m[1]], _ = strconv.Atoi(m[2])
	}
	funcs := regexp.MustCompile(`(?m)^func (Test|Example)\w*\(`)
	files, _ := filepath.Glob("*_test.go")
	for _, f := range files {
		n, ok := listed[f]
		if !ok {
			t.Errorf("docs/tests.md does not list %s", f)
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(funcs.FindAll(src, -1)); got != n {
			t.Errorf("docs/tests.md says %s has %d tests or examples; it has %d", f, n, got)
		}
		delete(listed, f)
	}
	for f := range listed {
		t.Errorf("docs/tests.md lists %s, which is not a test file here", f)
	}
}
