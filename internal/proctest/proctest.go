// Package proctest is what the tests of process supervision (redlock exec,
// its guardian, redlock-chaos nodes) share: whether a process still runs,
// and the pids a test job wrote down.
package proctest

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Running reports whether pid is a live process. A zombie is not: it has
// run its course, and may wait for ever for a reaper that never comes
// (this sandbox's PID 1).
func Running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// ReadPids returns the pids written one per line in the file at path; none
// if it cannot be read yet.
func ReadPids(path string) []int {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var pids []int
	for s := bufio.NewScanner(f); s.Scan(); {
		if p, err := strconv.Atoi(strings.TrimSpace(s.Text())); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}
