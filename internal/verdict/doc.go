// Package verdict says what a round's replies mean for the operation that
// sent it: the Failure an operation on the quorum reports (the root package
// turns it into its *QuorumError), and the kinds of failure no retry fixes
// (PermanentKind, BlockingKind, Final).
//
// It sits below the lease engine and the deployment's identity, which
// both report failures: it imports internal/round (the tally) and
// internal/kind (the kinds), and nothing else of this module.
package verdict
