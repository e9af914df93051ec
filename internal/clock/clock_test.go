package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/testdate"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func fired(tm clock.Timer) bool {
	select {
	case <-tm.C():
		return true
	default:
		return false
	}
}

func TestFakeTimersFireWhenTheClockReachesThem(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(t0)
	a, b := f.NewTimer(time.Second), f.NewTimer(time.Minute)
	if now := f.Now(); !now.Equal(t0) {
		t.Fatalf("Now = %v, want %v", now, t0)
	}
	if n := f.Timers(); n != 2 {
		t.Fatalf("%d timers waiting, want 2", n)
	}
	if d, ok := f.UntilNext(); !ok || d != time.Second {
		t.Fatalf("UntilNext = %v, %v; want 1s", d, ok)
	}
	f.Advance(999 * time.Millisecond)
	if fired(a) || fired(b) {
		t.Fatal("a timer fired early")
	}
	f.Advance(time.Millisecond)
	select {
	case at := <-a.C():
		if !at.Equal(t0.Add(time.Second)) {
			t.Fatalf("fired at %v", at)
		}
	default:
		t.Fatal("the 1s timer did not fire at 1s")
	}
	if fired(b) || a.Stop() || !b.Stop() || f.Timers() != 0 {
		t.Fatal("Stop: want the fired timer gone and the waiting one stopped")
	}
	f.Set(t0.Add(time.Hour))
	if fired(b) {
		t.Fatal("a stopped timer fired")
	}
	if z := f.NewTimer(0); !fired(z) {
		t.Fatal("a timer of 0 did not fire at once")
	}
}

func TestBlockUntilWaitsForSleepers(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(t0)
	slept := make(chan bool)
	go func() { slept <- clock.Sleep(context.Background(), f, time.Hour) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.Advance(time.Hour)
	if !<-slept {
		t.Fatal("Sleep reported a cancelled context")
	}
	short, cancelShort := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancelShort()
	if err := f.BlockUntil(short, 1); err == nil {
		t.Fatal("BlockUntil returned with no timer waiting")
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(t0)
	ctx, cancel := context.WithCancel(context.Background())
	slept := make(chan bool)
	go func() { slept <- clock.Sleep(ctx, f, time.Hour) }()
	cancel()
	if <-slept {
		t.Fatal("Sleep reported a whole wait on a cancelled context")
	}
	if f.Timers() != 0 {
		t.Fatal("the cancelled Sleep left its timer")
	}
}

func TestPinnedTimersAlsoFireInWallTime(t *testing.T) {
	t.Parallel()
	f := clock.NewPinned(t0)
	tm := f.NewTimer(10 * time.Millisecond)
	select {
	case at := <-tm.C():
		if !at.Equal(t0) {
			t.Fatalf("fired at %v: a pinned clock's time moves only when the test moves it", at)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a pinned timer did not fire after its duration of wall time")
	}
	if !f.Now().Equal(t0) {
		t.Fatal("the pinned clock moved")
	}
}

func TestWallSleeps(t *testing.T) {
	t.Parallel()
	start := testdate.Now()
	if !clock.Sleep(context.Background(), clock.Wall, 5*time.Millisecond) || testdate.Since(start) < 5*time.Millisecond {
		t.Fatal("the wall clock did not sleep")
	}
	if clock.Or(nil) != clock.Wall {
		t.Fatal("Or(nil) is not the wall clock")
	}
}
