package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Clock faults: redis-server runs under libfaketime, whose offset is read
// from a file on every clock call, so a node's wall clock can be jumped
// while it runs. Redis expires keys by the wall clock: a forward jump ends
// locks early, a backward one makes them outlive their TTL.
//
// Debian's redis-server is linked with jemalloc, which deadlocks at start
// under libfaketime ("Unexpected recursive calls to clock_gettime()"). A
// stub libjemalloc.so.2 that defines only the symbols the server asks for
// makes it fall back to glibc malloc. valkey-server asks for one more,
// sdallocx (a sized free: the memory came from glibc, so free it is), and
// asserts that the statistics mallctl calls succeed (every 100 ms, in
// serverCron): those answer zeros, and a page size that is not zero.

const jemallocStub = `#include <stddef.h>
#include <stdlib.h>
#include <string.h>
int mallctl(const char *n, void *o, size_t *ol, void *nw, size_t nl) {
	if (strcmp(n, "epoch") != 0 && strncmp(n, "stats.", 6) != 0 && strncmp(n, "arenas.", 7) != 0) return 2;
	if (o && ol) memset(o, 0, *ol);
	if (o && ol && *ol == sizeof(size_t) && strcmp(n, "arenas.page") == 0) *(size_t *)o = 4096;
	return 0;
}
void malloc_stats_print(void (*cb)(void *, const char *), void *a, const char *o) {}
size_t nallocx(size_t size, int flags) { return size; }
void sdallocx(void *p, size_t size, int flags) { free(p); }
`

var libfaketimePaths = []string{
	"/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
	"/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
	"/usr/lib/faketime/libfaketime.so.1",
	"/usr/local/lib/faketime/libfaketime.so.1",
}

// ErrFakeTimeMissing: clock faults need libfaketime and a C compiler.
var ErrFakeTimeMissing = fmt.Errorf("node: clock faults need libfaketime and gcc; install them with " +
	"`sudo apt-get install -y faketime gcc` or run `make deps`")

// fakeTimeEnv builds the jemalloc stub in dir and returns the environment
// that runs redis-server under libfaketime with its offset in offsetFile.
func fakeTimeEnv(dir, offsetFile string) ([]string, error) {
	lib := ""
	for _, p := range libfaketimePaths {
		if _, err := os.Stat(p); err == nil {
			lib = p
			break
		}
	}
	if lib == "" {
		return nil, ErrFakeTimeMissing
	}
	stubDir := filepath.Join(dir, "jemalloc-stub")
	if err := os.MkdirAll(stubDir, 0o755); err != nil {
		return nil, err
	}
	src := filepath.Join(stubDir, "stub.c")
	if err := os.WriteFile(src, []byte(jemallocStub), 0o644); err != nil {
		return nil, err
	}
	out, err := exec.Command("gcc", "-shared", "-fPIC", "-Wl,-soname,libjemalloc.so.2",
		"-o", filepath.Join(stubDir, "libjemalloc.so.2"), src).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%w: building the jemalloc stub: %v: %s", ErrFakeTimeMissing, err, out)
	}
	if err := os.WriteFile(offsetFile, []byte("+0\n"), 0o644); err != nil {
		return nil, err
	}
	return []string{
		"LD_LIBRARY_PATH=" + stubDir,
		"LD_PRELOAD=" + lib,
		"FAKETIME_TIMESTAMP_FILE=" + offsetFile,
		"FAKETIME_NO_CACHE=1",
		// Faking the monotonic clock too stalls Redis's own timers.
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	}, nil
}
