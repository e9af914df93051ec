package clock

import (
	"context"
	"sync"
	"time"
)

// Fake is a Clock a test sets: Now moves only when the test calls Advance
// or Set, and a timer fires when Now reaches its deadline. A test that waits
// for a service to wait (BlockUntil) and then advances the clock drives the
// service's sleeps, polls and backoffs without sleeping itself.
//
// A pinned Fake (NewPinned) also fires each timer after its duration of
// wall time: the time services read stays the test's, but nothing waits
// longer than on the real clock, so a whole processor keeps polling and
// retrying on its own while the test pins the time of what it stores.
//
// Safe for concurrent use.
type Fake struct {
	pinned bool

	mu      sync.Mutex
	now     time.Time
	timers  map[*fakeTimer]struct{}
	changed chan struct{} // closed and replaced when a timer is made, fires or stops
}

// NewFake returns a Fake stopped at now.
func NewFake(now time.Time) *Fake {
	return &Fake{now: now, timers: map[*fakeTimer]struct{}{}, changed: make(chan struct{})}
}

// NewPinned returns a Fake stopped at now whose timers also fire after their
// duration of wall time.
func NewPinned(now time.Time) *Fake {
	f := NewFake(now)
	f.pinned = true
	return f
}

// Now is the time the test set.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock forward by d and fires the timers now due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(f.now.Add(d))
}

// Set moves the clock to t (forward or back) and fires the timers now due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(t)
}

func (f *Fake) setLocked(t time.Time) {
	f.now = t
	for ft := range f.timers {
		if !ft.at.After(t) {
			f.fireLocked(ft)
		}
	}
}

// NewTimer returns a timer that fires when the clock reaches Now()+d (and,
// pinned, after d of wall time).
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft := &fakeTimer{f: f, at: f.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		ft.c <- f.now
		return ft
	}
	f.timers[ft] = struct{}{}
	if f.pinned {
		ft.wall = time.AfterFunc(d, func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if _, ok := f.timers[ft]; ok {
				f.fireLocked(ft)
			}
		})
	}
	f.notifyLocked()
	return ft
}

// Timers is how many timers are waiting to fire.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// BlockUntil waits until at least n timers are waiting to fire (services
// are asleep on the clock), or ctx ends.
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		waiting, changed := len(f.timers), f.changed
		f.mu.Unlock()
		if waiting >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// UntilNext is how far the clock must move for the next timer to fire;
// false when no timer is waiting.
func (f *Fake) UntilNext() (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var next time.Time
	for ft := range f.timers {
		if next.IsZero() || ft.at.Before(next) {
			next = ft.at
		}
	}
	if next.IsZero() {
		return 0, false
	}
	return max(next.Sub(f.now), 0), true
}

// fireLocked delivers the clock's time to ft and forgets it.
func (f *Fake) fireLocked(ft *fakeTimer) {
	delete(f.timers, ft)
	if ft.wall != nil {
		ft.wall.Stop()
	}
	select {
	case ft.c <- f.now:
	default:
	}
	f.notifyLocked()
}

func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

type fakeTimer struct {
	f    *Fake
	at   time.Time
	c    chan time.Time
	wall *time.Timer // pinned clocks only
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	if _, ok := t.f.timers[t]; !ok {
		return false
	}
	delete(t.f.timers, t)
	if t.wall != nil {
		t.wall.Stop()
	}
	t.f.notifyLocked()
	return true
}
