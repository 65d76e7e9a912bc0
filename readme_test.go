package redlock_test

import (
	"os"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/mdsnippet"
)

// The README's Quick start is compiled and run: every line of its Go
// blocks, but the node list a reader fills in, is a line of
// example_test.go, in the same order, where Example runs it against real
// nodes. A Quick start edited without its example fails here.
func TestREADMEQuickStartIsTheExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, quick, ok := strings.Cut(string(readme), "## Quick start\n")
	if !ok {
		t.Fatal("README.md has no Quick start")
	}
	quick, _, _ = strings.Cut(quick, "\n## ")
	var want []string
	for _, block := range mdsnippet.GoBlocks(quick) {
		lines := mdsnippet.Lines(block)
		if len(lines) > 0 && strings.HasPrefix(lines[0], "nodes := ") {
			end := indexOf(lines, "}") // queue_hung_test.go
			if end < 0 {
				t.Fatalf("the Quick start's node list does not end:\n%s", block)
			}
			lines = lines[end+1:]
		}
		want = append(want, lines...)
	}
	if len(want) < 10 {
		t.Fatalf("the Quick start has %d lines of Go; its blocks were not found", len(want))
	}
	have := mdsnippet.Lines(string(example))
	i := 0
	for _, line := range want {
		for i < len(have) && have[i] != line {
			i++
		}
		if i == len(have) {
			t.Fatalf("README's Quick start line %q is not in example_test.go (in order)", line)
		}
		i++
	}
}
