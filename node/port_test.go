package node

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

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

// A port another test process handed out is not handed out here: make
// test's lanes are three processes, and a node down for a restart keeps
// its port. The child process claims a port and holds it until told.
func TestFreePortSkipsAPortAnotherProcessClaimed(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ports are claimed across processes on Linux only")
	}
	if os.Getenv("REDLOCK_PORT_CLAIM_CHILD") == "1" {
		port, err := freePort()
		if err != nil {
			os.Exit(2)
		}
		fmt.Println(port)
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // hold the claim until the parent is done
		os.Exit(0)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestFreePortSkipsAPortAnotherProcessClaimed$")
	child.Env = append(os.Environ(), "REDLOCK_PORT_CLAIM_CHILD=1")
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = child.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the child said no port: %v", err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the child said %q", line)
	}
	if claimAcrossProcesses(port) {
		t.Fatalf("port %d, held by another process, was claimable here", port)
	}
	stdin.Close()
	if err := child.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	// Its claim ended with it.
	if !claimAcrossProcesses(port) {
		t.Fatalf("port %d stayed claimed after the process that held it ended", port)
	}
}
