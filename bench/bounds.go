package main

// bounds explains what limits the figures of this library against the
// floors and peers, target by target, for the targets a run may miss. It
// states mechanisms, not figures: the figures are in the tables.
func (r *report) bounds(p func(string, ...any)) {
	p("\n## What bounds the targets that are missed\n\n")
	p("Where a target above is missed, this is what holds it back. Each is a cost of a guarantee the floors and redsync do not give.\n\n")
	p("- **The unfenced acquisition is a script, not a SET.** It refuses a value whose release marker exists (a SET that was ")
	p("still in flight when its attempt was rolled back, landing later, would otherwise hold the node for a full TTL) and ")
	p("a lock promised to a queued waiter (the fair handoff). Neither check can ride on a plain `SET NX`. Each node therefore runs two ")
	p("scripts per cycle where the floors run a SET and one script: about 3x the floors' script time per op (the script-time row). ")
	p("In the cells where the nodes' CPU is what runs out (many goroutines on a shared client), goodput follows it. ")
	p("It is also the whole gap in time to acquire with nodes paused: timed on the same nodes, one round of the bare ")
	p("acquisition script takes longer than one round of SET NX, and TryLock adds nothing measurable to the bare round.\n")
	p("- **A fenced cycle is three rounds that write, against two.** Round 1 sets the lock and mints token candidates, round 2 ")
	p("commits the token on a majority (Kleppmann's fencing needs both before the token is used), and Unlock releases. On ")
	p("`appendfsync always` every round that writes waits for an fsync on a majority, so a fenced cycle's latency is at least ")
	p("1.5x the floor's before any CPU is spent, and a fenced acquisition (two rounds) at least twice redsync's (one round). ")
	p("Every fenced call also checks the node's identity (INFO replication inside the script: a promoted replica or a ")
	p("restarted master must not count), which makes the fenced scripts several times the floors' script time and, where the ")
	p("CPU runs out, caps fenced goodput near half the floor's.\n")
	p("- **redsync's contended figures come from polling.** With a 1 ms retry delay and FailFast its waiters poll the nodes; ")
	p("this library's waiters sleep until a release promises them the lock, and take it in arrival order (see least share ")
	p("of fair). A fenced handoff is three fsync rounds (release, round 1, commit) against redsync's two, so fenced ")
	p("acquisitions/s and worst waits sit near the targets and move with the run.\n")
}
