// Package eventually is how Redrive's tests wait for what happens in the
// background — a record stored, a task finished, a metric moved: it polls a
// condition and fails the test, saying what it waited for, when the
// condition does not hold in time. It is the tests' one polling helper;
// time a test can set (due times, retention, backoffs) goes through a
// clock.Fake instead, never through a wait here.
//
// It is for tests only and imports nothing of Redrive.
package eventually

import (
	"errors"
	"testing"
	"time"
)

// Timeout is how long a wait lasts unless Within says otherwise: long
// enough for a loaded CI machine, and only ever reached when a test fails.
const Timeout = 30 * time.Second

// poll is how often the condition is checked.
const poll = 10 * time.Millisecond

// Option changes a wait.
type Option func(*wait)

type wait struct{ within time.Duration }

// Within makes the wait last d instead of Timeout.
func Within(d time.Duration) Option { return func(w *wait) { w.within = d } }

// True waits until cond returns true; it fails t with what after the
// timeout.
func True(t testing.TB, what string, cond func() bool, opts ...Option) {
	t.Helper()
	Nil(t, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}, opts...)
}

// Nil waits until cond returns nil; after the timeout it fails t with what
// and the last error, which should say what was seen instead.
func Nil(t testing.TB, what string, cond func() error, opts ...Option) {
	t.Helper()
	w := wait{within: Timeout}
	for _, o := range opts {
		o(&w)
	}
	deadline := time.Now().Add(w.within)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			if err == errNotYet {
				t.Fatalf("timed out after %s waiting for %s", w.within, what)
			}
			t.Fatalf("timed out after %s waiting for %s: %v", w.within, what, err)
		}
		<-tick.C
	}
}

var errNotYet = errors.New("not yet")
