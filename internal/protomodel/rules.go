package protomodel

// Rules selects how a repair decides that it may write, and what its writes
// are conditional on: today's code (Old) or the fix (New), and the broken
// variants that show the checker is not vacuous; and, in its last fields,
// the rules of issue 32 for a holder's extensions (extend.go, unheard.go)
// and for Reprovision (reprovision.go).
type Rules struct {
	Name string

	// UptimeCounts: the restart delay is TTL - max(now - stamp, uptime), as
	// restartDelay in repair.go at 5e7ef93: a node emptied while running
	// has a long uptime, so it is repaired at once.
	UptimeCounts bool
	// StampAge: the target's stamp must be at least TTL old by the node's
	// clock (the only delay when UptimeCounts is off).
	StampAge bool
	// RepairerClock: the repairer itself first saw that same stamp (time and
	// nonce) at least TTL ago by its own clock.
	RepairerClock bool
	// FreshReads: every read of the round whose G values the repair uses
	// was made once the repairer's delay had passed (the round began at
	// least TTL after the repairer first saw the stamp).
	FreshReads bool
	// StampedWrites: the uuid swap and the repair script write only if the
	// node still holds the stamp the repairer read (time and nonce).
	// Without it the swap is conditional on the uuid read and the repair
	// script on the uuid claimed, as swap_uuid.lua and repair.lua are.
	StampedWrites bool
	// WritePrelude: the swap and the repair script run the identity
	// prelude first, as the fenced scripts do, so that a stamp brought back
	// by a restart from an older copy of the data (it names an earlier
	// run) is replaced before it is compared.
	WritePrelude bool

	// UnheardTTLs: a successful extension counts each granted node for
	// no longer than the shortest TTL of the client's extension calls
	// still unheard there (internal/lease/unheard.go); without it, for
	// the TTL it applied.
	UnheardTTLs bool
	// UnheardAtStart: the unheard calls that cut a node are those unheard
	// when the extension began, not when it is decided (not in the
	// library: a late call heard during the extension may have run after
	// the granted call there).
	UnheardAtStart bool
	// PullDeadline: a failed extension pulls the validity back to where
	// its success would have put it, if that is earlier (pullDeadline).
	PullDeadline bool
	// PullAtStart: a shortening pulls the validity back to its start
	// plus its TTL as it begins, before any call is sent (not in the
	// library: its calls may land at once, and the round may wait longer
	// than the shorter TTL before it fails). It makes PullDeadline moot.
	PullAtStart bool

	// ProvDelay: Reprovision waits out the restart delay of every node
	// that is not intact, as a repair does (StampAge, RepairerClock and
	// FreshReads for each such node), before it decides.
	ProvDelay bool
	// ProvConditional: each node's reset script writes only if the node
	// still holds the uuid, the id and the stamp it was read with
	// (reset.lua).
	ProvConditional bool
	// ProvSameRun: the reset script also writes only if the node still
	// serves under the run (replication id) it was read in.
	ProvSameRun bool
}

// Old is the code at 5e7ef93 (before an Extend could shorten the TTL, and
// before Reprovision waited: do not search it with extensions or
// reprovisions).
var Old = Rules{Name: "old", UptimeCounts: true, StampAge: true}

// New is the library's rules: the delay runs from the loss stamp only, by
// the node's clock and by the repairer's, the G values come from a round
// read after it, and every repair write is conditional on the stamp. With
// it, the rules of issue 32: an Extend counts each granted node for no
// longer than the shortest TTL unheard there when it began, and a
// shortening pulls the validity back as it begins; Reprovision waits out
// the delay and resets a node only if it holds what was read, in the run
// it was read in.
var New = Rules{Name: "new", StampAge: true, RepairerClock: true, FreshReads: true, StampedWrites: true,
	UnheardTTLs: true, PullDeadline: true, PullAtStart: true, UnheardAtStart: true,
	ProvDelay: true, ProvConditional: true, ProvSameRun: true}

// NewPrelude is New whose repair writes also run the identity prelude.
var NewPrelude = variant(New, "new+prelude", func(r *Rules) { r.WritePrelude = true })

// NewWritesNotStamped is New whose writes are conditional on the uuid only
// (broken on purpose).
var NewWritesNotStamped = Rules{Name: "new-writes-not-stamped", StampAge: true, RepairerClock: true, FreshReads: true}

// NewNoDelay is New without any delay (broken on purpose): the stamped
// writes remain.
var NewNoDelay = Rules{Name: "new-no-delay", StampedWrites: true}

// NewStaleReads is New whose G values may come from reads made before the
// delay had passed (broken on purpose): the node's and the repairer's
// delays are checked on the target's read only.
var NewStaleReads = Rules{Name: "new-stale-reads", StampAge: true, RepairerClock: true, StampedWrites: true}

// The rules of issue 32 before their last fixes, and the broken variants
// of the rules the library has (extend_test.go, reprovision_test.go).

// variant is r renamed, changed by f.
func variant(r Rules, name string, f func(*Rules)) Rules {
	r.Name = name
	f(&r)
	return r
}

// NewPullOnFailure is the library at 467e4dd (broken, as the model found):
// a shortening pulls the validity back only once it has failed, and the
// unheard calls that cut a node are those still unheard when the Extend
// is decided.
var NewPullOnFailure = variant(New, "new-pull-on-failure", func(r *Rules) { r.PullAtStart, r.UnheardAtStart = false, false })

// NewUnheardAtEnd is New whose unheard calls are those still unheard when
// the Extend is decided (broken on purpose).
var NewUnheardAtEnd = variant(New, "new-unheard-at-end", func(r *Rules) { r.UnheardAtStart = false })

// NewNoUnheard is New without UnheardTTLs (broken on purpose): the late
// shortening of issue 32.
var NewNoUnheard = variant(New, "new-no-unheard", func(r *Rules) { r.UnheardTTLs = false })

// NewProvAtOnce is New whose Reprovision neither waits nor writes
// conditionally (broken on purpose: reset.lua and Reprovision before
// issue 32).
var NewProvAtOnce = variant(New, "new-prov-at-once", func(r *Rules) { r.ProvDelay, r.ProvConditional, r.ProvSameRun = false, false, false })

// NewProvNoDelay is New whose Reprovision does not wait (broken on
// purpose); its resets stay conditional.
var NewProvNoDelay = variant(New, "new-prov-no-delay", func(r *Rules) { r.ProvDelay = false })

// NewProvUnconditional is New whose Reprovision waits but resets each node
// whatever it holds now (broken on purpose).
var NewProvUnconditional = variant(New, "new-prov-unconditional", func(r *Rules) { r.ProvConditional, r.ProvSameRun = false, false })

// NewProvAnyRun is New whose resets do not check the run read (broken on
// purpose: reset.lua before 828f8b1).
var NewProvAnyRun = variant(New, "new-prov-any-run", func(r *Rules) { r.ProvSameRun = false })

// delayPassed tells whether repairer r, whose round of reads just
// completed at global time now, may go on to write its target.
func (ru *Rules) delayPassed(r *Repairer, now, ttl int) bool {
	t := &r.Tgt
	age := -1 // the stamp's age by the node's clock at the read
	if t.Stamp.Set {
		age = int(t.Now) - int(t.Stamp.T)
	}
	if ru.UptimeCounts {
		// restartDelay: out = now - lostAt; for a node without an id
		// (every node that is not intact, here) out = max(out, uptime).
		out := max(age, 0)
		if t.ID < 0 {
			out = max(out, int(t.Uptime))
		}
		if ttl-out > 0 {
			return false
		}
	} else if ru.StampAge && age < ttl {
		return false
	}
	if ru.RepairerClock && (r.Seen != t.Stamp || now-int(r.SeenAt) < ttl) {
		return false
	}
	if ru.FreshReads && int(r.RoundStart) < int(r.SeenAt)+ttl {
		return false
	}
	return true
}

// writeStamp is the stamp a repair write is conditional on, nil for none.
func (ru *Rules) writeStamp(r *Repairer) *Stamp {
	if ru.StampedWrites {
		return &r.Want
	}
	return nil
}

// usesUptime: the restart epoch is part of the state only under rules that
// read it (a canonical form for the others).
func (ru *Rules) usesUptime() bool { return ru.UptimeCounts }

// usesSeen: the repairer's memory of the stamp matters.
func (ru *Rules) usesSeen() bool { return ru.RepairerClock || ru.FreshReads }
