package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/redrive/redrive/internal/clock"
)

// Next is what a pass says about the next one.
type Next struct {
	// More: there is more to do right now; the next pass runs at once.
	More bool
	// At, when set, is when the next work is due, if before Interval ends.
	At time.Time
	// Done: the work is finished; the loop ends.
	Done bool
}

// Backoff is the wait after a failed pass: Min, doubling with each failure
// in a row up to Max. A pass that succeeds starts it again at Min.
type Backoff struct {
	Min, Max time.Duration
}

// Loop runs a service's work in passes until its context ends: the next
// pass at once while a pass says there is more to do, otherwise after
// Interval, at the time the pass says the next work is due if that is
// sooner, or when woken; after a failed pass, after the backoff.
type Loop struct {
	// Clock times the waits. Default: clock.Wall.
	Clock clock.Clock
	// Logger logs failed passes; it carries the service's component.
	// Default: slog.Default().
	Logger *slog.Logger
	// What names a pass in the log ("scheduler pass"): a failed pass is
	// logged as "<What> failed; retrying".
	What string
	// Interval is the longest wait between passes. Zero: only a wake-up
	// (or a due time) starts the next pass.
	Interval time.Duration
	// Wake, when it delivers, cuts a wait short (a Wake's Signal). Optional.
	Wake <-chan struct{}
	// Delay holds the first pass until Interval has passed (or a wake-up),
	// for work done once already before the service started.
	Delay bool
	// Backoff is the wait after a failed pass. Zero: Interval.
	Backoff Backoff
	// Severe logs failed passes as errors rather than warnings.
	Severe bool
	// Report, when set, reports a failed pass instead of the log line.
	Report func(err error, retryIn time.Duration)
	// Pass does one pass of the work.
	Pass func(ctx context.Context) (Next, error)
}

// Wake asks a Loop for its next pass now: give it to Loop.Wake and call
// Signal. Signals that come while one is pending make one pass; with
// several loops on one Wake, a signal wakes one of them.
type Wake chan struct{}

// NewWake returns a Wake that holds one pending signal.
func NewWake() Wake { return make(Wake, 1) }

// Signal asks for a pass now. It never blocks.
func (w Wake) Signal() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// forever is a wait that only a wake-up or the context ends.
const forever = time.Duration(-1)

// Run runs the loop until ctx ends or a pass says the work is done.
func (l *Loop) Run(ctx context.Context) error {
	clk := clock.Or(l.Clock)
	log := l.Logger
	if log == nil {
		log = slog.Default()
	}
	interval := l.Interval
	if interval <= 0 {
		interval = forever
	}
	wait := time.Duration(0)
	if l.Delay {
		wait = interval
	}
	backoff := l.Backoff.Min
	for {
		if !l.wait(ctx, clk, wait) {
			return nil
		}
		next, err := l.Pass(ctx)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case err != nil:
			wait = interval
			if l.Backoff.Min > 0 {
				wait, backoff = backoff, min(backoff*2, max(l.Backoff.Max, l.Backoff.Min))
			}
			l.report(ctx, log, err, wait)
			continue
		case next.Done:
			return nil
		case next.More:
			wait = 0
		default:
			wait = interval
			if !next.At.IsZero() {
				due := max(next.At.Sub(clk.Now()), time.Millisecond)
				if wait == forever || due < wait {
					wait = due
				}
			}
		}
		backoff = l.Backoff.Min
	}
}

// wait waits d (forever: until woken) and reports whether ctx is still live.
func (l *Loop) wait(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	if d == 0 {
		return ctx.Err() == nil
	}
	var fire <-chan time.Time
	if d != forever {
		t := clk.NewTimer(d)
		defer t.Stop()
		fire = t.C()
	}
	select {
	case <-ctx.Done():
		return false
	case <-l.Wake:
	case <-fire:
	}
	return true
}

func (l *Loop) report(ctx context.Context, log *slog.Logger, err error, retryIn time.Duration) {
	if l.Report != nil {
		l.Report(err, retryIn)
		return
	}
	level := slog.LevelWarn
	if l.Severe {
		level = slog.LevelError
	}
	attrs := []any{"err", err}
	if retryIn != forever {
		attrs = append([]any{"retry_in", retryIn}, attrs...)
	}
	log.Log(ctx, level, l.What+" failed; retrying", attrs...)
}

// Looping is a Service that runs a Loop.
type Looping struct {
	Base
	name string
	loop *Loop
}

// NewLoop returns a Service named name that runs l.
func NewLoop(name string, l *Loop) *Looping { return &Looping{name: name, loop: l} }

// Name implements Service.
func (s *Looping) Name() string { return s.name }

// Start implements Service.
func (s *Looping) Start(ctx context.Context) error { return s.Go(ctx, s.loop.Run) }
