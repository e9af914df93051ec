package service_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/service"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// wait blocks until n timers wait on clk, failing the test after 10 s.
func wait(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntil(ctx, n); err != nil {
		t.Fatalf("nothing waits on the clock: %v", err)
	}
}

// passes records the passes of a loop, one per receive.
type passes struct {
	ch   chan time.Time
	next func(n int) (service.Next, error)
	n    int
}

func (p *passes) pass(clk clock.Clock) func(context.Context) (service.Next, error) {
	return func(context.Context) (service.Next, error) {
		p.n++
		p.ch <- clk.Now()
		return p.next(p.n)
	}
}

func (p *passes) want(t *testing.T, at time.Time) {
	t.Helper()
	select {
	case got := <-p.ch:
		if !got.Equal(at) {
			t.Fatalf("a pass at %v, want %v", got, at)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no pass, want one at %v", at)
	}
}

func (p *passes) none(t *testing.T) {
	t.Helper()
	select {
	case got := <-p.ch:
		t.Fatalf("a pass at %v, want none", got)
	default:
	}
}

func TestLoopWaitsIntervalOrDueTimeOrWake(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	wake := service.NewWake()
	p := &passes{ch: make(chan time.Time, 10), next: func(n int) (service.Next, error) {
		switch n {
		case 1:
			return service.Next{More: true}, nil // more at once
		case 3:
			return service.Next{At: t0.Add(14 * time.Second)}, nil // due before the interval ends
		}
		return service.Next{}, nil
	}}
	s := service.NewLoop("test", &service.Loop{Clock: clk, Interval: 10 * time.Second, Wake: wake, Pass: p.pass(clk)})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop() }()
	p.want(t, t0)
	p.want(t, t0) // More: again at once
	wait(t, clk, 1)
	p.none(t)
	if d, _ := clk.UntilNext(); d != 10*time.Second {
		t.Fatalf("waits %v, want the interval", d)
	}
	clk.Advance(10 * time.Second)
	p.want(t, t0.Add(10*time.Second))
	wait(t, clk, 1)
	if d, _ := clk.UntilNext(); d != 4*time.Second {
		t.Fatalf("waits %v, want until the due time (4s)", d)
	}
	wake.Signal()
	p.want(t, t0.Add(10*time.Second)) // woken: at once
}

func TestLoopBacksOffAfterFailures(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	fail := errors.New("postgres is away")
	p := &passes{ch: make(chan time.Time, 10), next: func(n int) (service.Next, error) {
		if n <= 3 {
			return service.Next{}, fail
		}
		if n == 4 {
			return service.Next{Done: true}, nil
		}
		return service.Next{}, nil
	}}
	var reported []time.Duration
	var mu sync.Mutex
	s := service.NewLoop("test", &service.Loop{Clock: clk, Interval: time.Hour, Backoff: service.Backoff{Min: time.Second, Max: 3 * time.Second},
		Report: func(err error, retryIn time.Duration) {
			mu.Lock()
			reported = append(reported, retryIn)
			mu.Unlock()
		}, Pass: p.pass(clk)})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	at := t0
	p.want(t, at)
	for _, backoff := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
		wait(t, clk, 1)
		if d, _ := clk.UntilNext(); d != backoff {
			t.Fatalf("backs off %v, want %v", d, backoff)
		}
		clk.Advance(backoff)
		at = at.Add(backoff)
		p.want(t, at)
	}
	<-s.Done() // the fourth pass is done: the loop ends
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(reported, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}) {
		t.Fatalf("reported %v", reported)
	}
}

func TestLoopDelayHoldsTheFirstPass(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	p := &passes{ch: make(chan time.Time, 10), next: func(int) (service.Next, error) { return service.Next{}, nil }}
	s := service.NewLoop("test", &service.Loop{Clock: clk, Interval: time.Minute, Delay: true, Pass: p.pass(clk)})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop() }()
	wait(t, clk, 1)
	p.none(t)
	clk.Advance(time.Minute)
	p.want(t, t0.Add(time.Minute))
}

// svc is a service that records its starts and stops.
type svc struct {
	service.Base
	name     string
	startErr error
	workErr  error
	log      *[]string
	mu       *sync.Mutex
}

func (s *svc) Name() string { return s.name }

func (s *svc) note(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*s.log = append(*s.log, what+" "+s.name)
}

func (s *svc) Start(ctx context.Context) error {
	if s.startErr != nil {
		return s.startErr
	}
	s.note("start")
	return s.Go(ctx, func(ctx context.Context) error {
		if s.workErr != nil {
			return s.workErr
		}
		<-ctx.Done()
		return ctx.Err()
	})
}

func (s *svc) Stop() error {
	err := s.Base.Stop()
	s.note("release")
	return err
}

func TestAGroupThatFailsToStartStopsEverything(t *testing.T) {
	t.Parallel()
	var log []string
	var mu sync.Mutex
	mk := func(name string, startErr error) *svc {
		return &svc{name: name, startErr: startErr, log: &log, mu: &mu}
	}
	var g service.Group
	g.Add(mk("a", nil), mk("b", nil), mk("c", errors.New("address in use")), mk("d", nil))
	err := g.Start(context.Background())
	if err == nil || err.Error() != "start c: address in use" {
		t.Fatalf("Start = %v", err)
	}
	slices.Sort(log[2:])
	if want := []string{"start a", "start b", "release a", "release b", "release c", "release d"}; !slices.Equal(log, want) {
		t.Fatalf("%q, want %q: every service released, the started ones stopped", log, want)
	}
}

func TestAGroupReportsTheFirstFailure(t *testing.T) {
	t.Parallel()
	var log []string
	var mu sync.Mutex
	var g service.Group
	boom := errors.New("boom")
	g.Add(&svc{name: "ok", log: &log, mu: &mu}, &svc{name: "failing", workErr: boom, log: &log, mu: &mu})
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.Wait(context.Background()); !errors.Is(err, boom) || err.Error() != "failing: boom" {
		t.Fatalf("Wait = %v, want the failure", err)
	}
	if err := g.Stop(); !errors.Is(err, boom) {
		t.Fatalf("Stop = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var quiet service.Group
	quiet.Add(&svc{name: "ok", log: &log, mu: &mu})
	if err := quiet.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := quiet.Wait(ctx); err != nil {
		t.Fatalf("Wait at the end of the context = %v", err)
	}
	if err := quiet.Stop(); err != nil {
		t.Fatalf("a service stopped by its context reports %v", err)
	}
}

func TestStopWithoutStartAndTwice(t *testing.T) {
	t.Parallel()
	released := 0
	f := service.NewFunc("f", func(ctx context.Context) error { <-ctx.Done(); return nil }, func() { released++ })
	if err := f.Stop(); err != nil || released != 1 {
		t.Fatalf("Stop before Start = %v, released %d times", err, released)
	}
	g := service.NewFunc("g", func(ctx context.Context) error { <-ctx.Done(); return nil }, nil)
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); !errors.Is(err, service.ErrStarted) {
		t.Fatalf("second Start = %v", err)
	}
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.Done():
	default:
		t.Fatal("Done open after Stop")
	}
}
