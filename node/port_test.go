package node

import "testing"

// Nodes started together must not draw the same port: the kernel hands a
// closed port out again, and Docker refuses a second container on it.
func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 300 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
	}
}
