package procguard

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// A parent that is stopped, not dead, gives the guardian no end-of-file:
// the deadline alone kills the job's group (review of issue 23's guardian).
// A later Deadline moves it.
func TestDeadlineKillsTheGroup(t *testing.T) {
	g, err := Start([]string{"sh", "-c", "sleep 300"})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.Run(os.Environ()); err != nil {
		t.Fatal(err)
	}
	if err := g.Deadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := g.Deadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	ws, err := g.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("wait status %#x, want SIGKILL", uint32(ws))
	}
}
