package node

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// portClaims is one file that every test process of the machine locks a
// byte of for each port it hands out (a POSIX record lock at offset port).
// handedOut covers one process only; make test runs three test processes
// at once, and a node keeps its port across restarts: while it is down,
// another process's freePort could draw that port and start a node on it,
// and the restart would fail to bind. The locks end with the process,
// however it ends, so a crashed run leaves nothing claimed.
var portClaims struct {
	once sync.Once
	f    *os.File
}

// claimAcrossProcesses reports whether port is now this process's: no
// other process holds its lock. Where the file cannot be opened, every
// port is claimable, as before the claims.
func claimAcrossProcesses(port int) bool {
	portClaims.once.Do(func() {
		f, err := os.OpenFile(filepath.Join(os.TempDir(), "redlock-node-ports.lock"), os.O_RDWR|os.O_CREATE, 0o666)
		if err == nil {
			portClaims.f = f
		}
	})
	if portClaims.f == nil {
		return true
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: int64(port), Len: 1}
	return syscall.FcntlFlock(portClaims.f.Fd(), syscall.F_SETLK, &lk) == nil
}
