// Package mdsnippet reads the Go code blocks of the project's Markdown
// docs, so that tests can hold each snippet to the example that compiles
// and runs it.
package mdsnippet

import "strings"

// GoBlocks returns the bodies of the ```go blocks of a Markdown text.
func GoBlocks(md string) []string {
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

// Lines returns the non-empty lines of s, without their indentation.
func Lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
