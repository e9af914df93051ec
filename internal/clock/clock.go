// Package clock is the time every Redrive service reads and waits on: Now,
// timers and Sleep, behind one small interface, so that a test drives time
// instead of sleeping. Wall is the real clock; Fake is the one tests set.
//
// Services take a Clock in their config and never call time.Now, time.After,
// time.NewTimer, time.NewTicker or time.Sleep themselves. The exceptions say
// so where they are: how long something took, for a metric (wall time is
// what is measured), and deadlines handed to the network or to a library.
// It imports nothing of Redrive.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once, after d (at once when d <= 0).
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer of a Clock.
type Timer interface {
	// C delivers the time the timer fired.
	C() <-chan time.Time
	// Stop stops the timer; it reports whether it stopped it before it fired.
	Stop() bool
}

// Wall is the real clock. Tests run at another date (internal/testdate)
// set it, once, before any test runs, to Shifted.
var Wall Clock = wall{}

// Shifted is the real clock moved by d: its time runs as the machine's
// does, d apart, and its timers are the machine's.
func Shifted(d time.Duration) Clock { return wall{shift: d} }

// Or returns c, or Wall when c is nil (for config defaults).
func Or(c Clock) Clock {
	if c == nil {
		return Wall
	}
	return c
}

type wall struct{ shift time.Duration }

func (w wall) Now() time.Time { return time.Now().Add(w.shift) }

func (wall) NewTimer(d time.Duration) Timer { return wallTimer{time.NewTimer(d)} }

type wallTimer struct{ t *time.Timer }

func (t wallTimer) C() <-chan time.Time { return t.t.C }
func (t wallTimer) Stop() bool          { return t.t.Stop() }

// Sleep waits d on c and reports whether it did: false when ctx ended first.
func Sleep(ctx context.Context, c Clock, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	if d <= 0 {
		return true
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// Since is the time elapsed on c since at.
func Since(c Clock, at time.Time) time.Duration { return c.Now().Sub(at) }
