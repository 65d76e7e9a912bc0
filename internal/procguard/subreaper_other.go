//go:build !linux

package procguard

// becomeSubreaper is Linux's: elsewhere orphans go to init, as usual.
func becomeSubreaper() {}
