// Package identity is the deployment's identity: what each node holds of
// it (node states, identity.lua's view of a node), the check of the node
// list (judging a list: subsets, supersets, duplicates, mixed deployments,
// replicas), provisioning (a new deployment's uuid claims, roster and ids;
// checking a provisioned one), reprovisioning, and repair (O(1),
// conditional on the lost stamp; the delayed restart; the clients' online
// repair).
//
// A Deployment holds what one client knows of the identity (the last
// check of the node list, the uuids it saw, the lost stamps and the
// online repairs under way). The lease engine, which imports this package,
// asks it which votes an attempt counts (View) and tells it what the
// nodes' replies say of their identity.
//
// The package imports internal/verdict (a failed operation's Failure, the
// kinds no retry fixes), internal/round (the rounds), internal/nodescript
// (the scripts and the node keys) and internal/kind (the failure kinds);
// never the lease engine, nor the root package,
// which exports the public API (Provision, Repair, NodeIDs...) over it and
// builds its public errors from a verdict.Failure (Config.QuorumError).
package identity
