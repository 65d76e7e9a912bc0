//go:build !linux

package node

// claimAcrossProcesses claims nothing outside Linux: handedOut alone keeps
// one process's nodes apart (port_claim_linux.go).
func claimAcrossProcesses(int) bool { return true }
