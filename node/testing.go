package node

import (
	"os"
	"testing"
)

// RequireDocker skips tb where no Docker engine runs, unless
// REDLOCK_REQUIRE_DOCKER=1 (as in this project's CI), where that fails it.
func RequireDocker(tb testing.TB) {
	tb.Helper()
	if _, err := DockerPool(); err != nil {
		if os.Getenv("REDLOCK_REQUIRE_DOCKER") == "1" {
			tb.Fatalf("REDLOCK_REQUIRE_DOCKER=1 but %v", err)
		}
		tb.Skipf("skipping container test: %v (set REDLOCK_REQUIRE_DOCKER=1 to make this a failure)", err)
	}
}
