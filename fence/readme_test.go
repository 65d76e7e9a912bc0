package fence_test

import (
	"os"
	"strings"
	"testing"
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
	have := trimmed(string(example))
	for _, doc := range []string{"../README.md", "../docs/fencing.md"} {
		md, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		var snippet []string
		for _, block := range goBlocks(string(md)) {
			if strings.Contains(block, "fence.NewRedis") {
				snippet = trimmed(block)
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

// goBlocks returns the bodies of the ```go blocks of a Markdown text.
func goBlocks(md string) []string {
	var blocks []string
	for {
		_, rest, ok := strings.Cut(md, "```go\n")
		if !ok {
			return blocks
		}
		body, after, _ := strings.Cut(rest, "```")
		blocks, md = append(blocks, body), after
	}
}

// trimmed is the non-empty lines of s, without their indentation.
func trimmed(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func equal(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}
