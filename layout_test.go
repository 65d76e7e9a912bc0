package redlock_test

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The layers of docs/design.md's package map: each package of the module
// may import only the packages listed for it (the module's own; the
// standard library and go-redis are not listed). Dependencies point one
// way, root -> lease engine -> deployment's identity -> verdict -> round
// engine, each of them -> node scripts, and no internal package imports
// the root. A package missing here fails the test: a new one takes its
// place in the map, and in docs/design.md.
var allowedImports = map[string][]string{
	".": {"internal/lease", "internal/round", "internal/nodescript", "internal/kind",
		"internal/identity", "internal/verdict", "internal/fairqueue", "internal/batch", "internal/waiting", "internal/slots"},
	"internal/waiting":     {"internal/fairqueue", "internal/lease", "internal/round", "internal/nodescript"},
	"internal/lease":       {"internal/identity", "internal/verdict", "internal/round", "internal/nodescript", "internal/kind"},
	"internal/slots":       {"internal/lease", "internal/round", "internal/nodescript"},
	"internal/identity":    {"internal/verdict", "internal/round", "internal/nodescript", "internal/kind"},
	"internal/verdict":     {"internal/round", "internal/kind"},
	"internal/fairqueue":   {"internal/round", "internal/nodescript"},
	"internal/round":       {"internal/batch"},
	"internal/batch":       {},
	"internal/nodescript":  {"internal/luascript"},
	"internal/kind":        {},
	"internal/luascript":   {},
	"internal/protomodel":  {"internal/hashset"},
	"internal/familymodel": {"internal/hashset"},
	"internal/hashset":     {},
	"internal/waitmodel":   {},
	"internal/procguard":   {},
	"internal/mdsnippet":   {},
	"internal/proctest":    {},
	"internal/pgserver":    {},
}

func TestPackagesImportOnlyTheirLayers(t *testing.T) {
	const module = "github.com/quorumlock/redlock"
	dirs := []string{"."}
	entries, err := os.ReadDir("internal")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.ToSlash(filepath.Join("internal", e.Name())))
		}
	}
	for _, dir := range dirs {
		allowed, ok := allowedImports[dir]
		if !ok {
			t.Errorf("%s: not in the package map (allowedImports here, and docs/design.md)", dir)
			continue
		}
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, imp := range pkg.Imports {
			own, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			own = strings.TrimPrefix(own, "/")
			if own == "" {
				own = "."
			}
			if !slices.Contains(allowed, own) {
				t.Errorf("%s imports %s, which its layer may not", dir, own)
			}
		}
	}
}
