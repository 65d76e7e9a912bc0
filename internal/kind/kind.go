// Package kind holds the kinds of failure that the machinery reports
// (a QuorumError's Kind, and the causes no retry fixes), so that every
// internal package can return them and errors.Is matches them. The root
// package exports each under the same name, with its documentation: that
// is where they are explained.
//
// It imports nothing of the library.
package kind

import "errors"

var (
	ErrLocked         = errors.New("redlock: held by another owner")
	ErrUnavailable    = errors.New("redlock: too few nodes answered")
	ErrNoValidity     = errors.New("redlock: acquired too late, no validity left")
	ErrExpired        = errors.New("redlock: lock expired before the operation")
	ErrReleased       = errors.New("redlock: lock already released")
	ErrSuperseded     = errors.New("redlock: a newer fencing token was committed meanwhile")
	ErrAmnesia        = errors.New("redlock: node lost its fencing state")
	ErrNotProvisioned = errors.New("redlock: the nodes hold no fencing identity (not provisioned, or a majority lost its data)")
	ErrWrongNodeList  = errors.New("redlock: the node list is not the deployment's")
	ErrWrongType      = errors.New("redlock: a key of the lock holds another type than a string")
	ErrAuth           = errors.New("redlock: nodes refused the credentials")
	ErrNoPermission   = errors.New("redlock: the ACL user lacks a permission the client needs")
	ErrScript         = errors.New("redlock: nodes failed the lock script")
	ErrLockLost       = errors.New("redlock: lock lost")
	ErrFencingNode    = errors.New("redlock: fencing needs standalone or Sentinel nodes, not Cluster or Ring clients; use WithoutFencing")
	ErrRepairTooSoon  = errors.New("node out for less than the longest TTL in use (delayed restart)")
	ErrTokenRange     = errors.New("redlock: token out of range")
	ErrNodeIDConflict = errors.New("redlock: conflicting node ids")
	ErrDuplicateNode  = errors.New("redlock: the same node given twice (one client twice, or two clients for one server)")
	ErrPermits        = errors.New("redlock: the nodes store another number of permits for the semaphore")
)
