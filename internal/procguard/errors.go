package procguard

import "errors"

// ErrGuardianLost is returned when the guardian ended before it reported
// what was asked (it was killed, or it could not read its pipes): the job,
// if it runs, is no longer watched.
var ErrGuardianLost = errors.New("procguard: the guardian process ended")

// StartError is a job that the guardian could not start (not found, not
// executable): Err is the guardian's reason, as text.
type StartError struct{ Err string }

func (e *StartError) Error() string { return "start: " + e.Err }
