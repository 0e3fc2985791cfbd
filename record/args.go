package record

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The argument checks below are the stores': every Store refuses the same arguments with the same
// errors before it touches its data, and keeps leases and TTLs in the same unit.

// CheckArgs returns the first fault in the arguments of a Store method that names an owner (Claim,
// Reclaim, Renew, Commit, MarkUnknown, Release), for the store to refuse the call with: an empty
// key, an empty owner, the first non-nil error of durations (each a Positive), or else ctx's error.
func CheckArgs(ctx context.Context, key, owner string, durations ...error) error {
	if key == "" {
		return errors.New("empty key")
	}
	if owner == "" {
		return errors.New("empty owner")
	}
	for _, err := range durations {
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// CheckKeyArg is CheckArgs for the Store methods that name no owner (Get, Delete): it refuses an
// empty key, then a done context.
func CheckKeyArg(ctx context.Context, key string) error {
	if key == "" {
		return errors.New("empty key")
	}
	return ctx.Err()
}

// Positive refuses a duration d, named name in the error, that is not positive.
func Positive(name string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%s %s is not positive", name, d)
	}
	return nil
}

// NotNegative refuses a duration d, named name in the error, that is negative.
func NotNegative(name string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%s %s is negative", name, d)
	}
	return nil
}

// Millis returns d in whole milliseconds, rounded up so that a positive duration stays positive:
// the unit in which the stores keep leases and TTLs.
func Millis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}
