package fence_test

import (
	"os"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/mdsnippet"
)

// The fence snippets of README.md and docs/fencing.md are compiled and
// run: each must be, line for line (indentation aside), a part of
// fence/example_test.go, where ExampleRedis_Set runs it against a real
// redis-server. Issue 23: the snippet used a holder it never defined.
func TestREADMEFenceSnippetIsAnExample(t *testing.T) {
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	have := mdsnippet.Lines(string(example))
	for _, doc := range []string{"../README.md", "../docs/fencing.md"} {
		md, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		var snippet []string
		for _, block := range mdsnippet.GoBlocks(string(md)) {
			if strings.Contains(block, "fence.NewRedis") {
				snippet = mdsnippet.Lines(block)
			}
		}
		if snippet == nil {
			t.Errorf("%s has no ```go block using fence.NewRedis", doc)
		} else if !contains(have, snippet) {
			t.Errorf("%s's fence snippet is not in fence/example_test.go:\n%s", doc, strings.Join(snippet, "\n"))
		}
	}
}

// contains reports whether lines holds part as consecutive lines.
func contains(lines, part []string) bool {
	for i := 0; i+len(part) <= len(lines); i++ {
		if equal(lines[i:i+len(part)], part) {
			return true
		}
	}
	return false
}

func equal(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}
