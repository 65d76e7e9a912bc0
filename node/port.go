package node

import (
	"errors"
	"net"
	"sync"
)

// handedOut holds every port freePort has returned in this process. A port
// is closed again before its node binds it, so without this two nodes
// started at once can draw the same one (the kernel may reuse it), and
// Docker then refuses the second container with "port is already
// allocated". A node keeps its port across restarts, so none is reused;
// other test processes skip it too (claimAcrossProcesses).
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

func freePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut.ports[port] && claimAcrossProcesses(port) {
			handedOut.ports[port] = true
			return port, nil
		}
	}
	return 0, errors.New("node: no free loopback port that was not handed out already")
}
