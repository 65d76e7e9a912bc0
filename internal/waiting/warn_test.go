package waiting

import (
	"fmt"
	"testing"
	"time"
)

// One warning per name every warnEvery; other names are not held back.
func TestOneWarningPerNameEveryPeriod(t *testing.T) {
	var w limiter
	now := time.Unix(1000, 0)
	if !w.allow("a", now) || !w.allow("b", now) {
		t.Fatal("the first warning of a name was held back")
	}
	if w.allow("a", now.Add(warnEvery-time.Millisecond)) {
		t.Fatal("a second warning within the period")
	}
	if !w.allow("a", now.Add(warnEvery)) {
		t.Fatal("no warning a period later")
	}
}

// The limiter remembers at most maxWarnedNames names: past that, warnings
// about new names are dropped until entries age out, so an outage over
// many names costs bounded memory.
func TestTheLimiterIsBounded(t *testing.T) {
	var w limiter
	now := time.Unix(1000, 0)
	for i := range maxWarnedNames {
		if !w.allow(fmt.Sprint(i), now) {
			t.Fatalf("name %d held back below the bound", i)
		}
	}
	if w.allow("one more", now) {
		t.Fatal("a name past the bound was let through while every entry is fresh")
	}
	if len(w.last) != maxWarnedNames {
		t.Fatalf("%d names remembered, want %d", len(w.last), maxWarnedNames)
	}
	if !w.allow("one more", now.Add(warnEvery)) || len(w.last) != 1 {
		t.Fatalf("after the period: %d names remembered, want the new one alone", len(w.last))
	}
}
