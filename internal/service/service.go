// Package service is the start/stop contract of Redrive's background parts
// (ingest, the scheduler and the archiver, the task runner, the maintenance
// services, the refreshers, the HTTP server) and the loop most of them run.
//
// Start puts a service's work in the background; Stop ends it, waits for it
// and releases what the service holds (its Kafka client), whether or not it
// was started. A Group starts a list of services in order and stops them all,
// so that a start that fails half-way stops what it started. A Loop runs a
// service's passes: at once while there is more to do, otherwise after an
// interval, a due time or a wake-up, with backoff after failures, on a
// clock.Clock.
//
// It never decides what a service does, and it reads time only through the
// clock it is given.
package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Service is a background part of the processor.
type Service interface {
	// Name names the service in errors.
	Name() string
	// Start starts the service's work in the background and returns; an
	// error means the work could not begin. The work ends when ctx does or
	// at Stop.
	Start(ctx context.Context) error
	// Stop ends the work, waits for it and releases what the service holds.
	// It may be called without Start and more than once. It returns the
	// error the work ended with (nil when it was stopped).
	Stop() error
	// Done is closed when the work has ended, on its own or by Stop.
	Done() <-chan struct{}
	// Err is the error the work ended with, once Done is closed.
	Err() error
}

// ErrStarted is returned by a second Start.
var ErrStarted = errors.New("service already started")

// Base runs a service's work on a goroutine of its own between Start and
// Stop. Services embed it, call Go from their Start, and get Stop, Done and
// Err; a service that holds resources wraps Stop to release them after the
// work ended.
type Base struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Go starts work on its own goroutine with a context that ends with ctx or
// at Stop. A work that returns context.Canceled because it was stopped ended
// without error.
func (b *Base) Go(ctx context.Context, work func(context.Context) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cancel != nil {
		return ErrStarted
	}
	ctx, b.cancel = context.WithCancel(ctx)
	done := b.doneLocked()
	go func() {
		defer close(done)
		err := work(ctx)
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			err = nil
		}
		b.mu.Lock()
		b.err = err
		b.mu.Unlock()
	}()
	return nil
}

func (b *Base) doneLocked() chan struct{} {
	if b.done == nil {
		b.done = make(chan struct{})
	}
	return b.done
}

// Stop ends the work and waits for it. Without Go it returns at once.
func (b *Base) Stop() error {
	b.mu.Lock()
	cancel, done := b.cancel, b.done
	b.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	<-done
	return b.Err()
}

// Done is closed when the work has ended.
func (b *Base) Done() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.doneLocked()
}

// Err is the error the work ended with.
func (b *Base) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Func is a Service whose work is a function, with an optional release.
type Func struct {
	Base
	name    string
	work    func(context.Context) error
	release func()
	once    sync.Once
}

// NewFunc returns a Service named name that runs work; release, when not
// nil, runs once at Stop, after the work ended (or without it).
func NewFunc(name string, work func(context.Context) error, release func()) *Func {
	return &Func{name: name, work: work, release: release}
}

// Name implements Service.
func (f *Func) Name() string { return f.name }

// Start implements Service.
func (f *Func) Start(ctx context.Context) error { return f.Go(ctx, f.work) }

// Stop implements Service.
func (f *Func) Stop() error {
	err := f.Base.Stop()
	if f.release != nil {
		f.once.Do(f.release)
	}
	return err
}

// Group starts and stops services as one.
type Group struct {
	services []Service
}

// Add appends services, in the order they start. Add a service as soon as
// it holds anything, so that a later failure releases it.
func (g *Group) Add(s ...Service) { g.services = append(g.services, s...) }

// Start starts the services in order. When one fails to start, every
// service is stopped (those never started release what they hold) and the
// error is returned.
func (g *Group) Start(ctx context.Context) error {
	for _, s := range g.services {
		if err := s.Start(ctx); err != nil {
			err = fmt.Errorf("start %s: %w", s.Name(), err)
			return errors.Join(err, g.Stop())
		}
	}
	return nil
}

// Wait returns when ctx ends (nil) or when the work of a service ended on
// its own with an error (that error).
func (g *Group) Wait(ctx context.Context) error {
	failed := make(chan error, len(g.services))
	stop := make(chan struct{})
	defer close(stop)
	for _, s := range g.services {
		go func() {
			select {
			case <-s.Done():
				if err := s.Err(); err != nil {
					failed <- fmt.Errorf("%s: %w", s.Name(), err)
				}
			case <-stop:
			}
		}()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-failed:
		return err
	}
}

// Stop stops every service at once, as one context ending them all would,
// and waits for all of them. It returns their errors.
func (g *Group) Stop() error {
	errs := make([]error, len(g.services))
	var wg sync.WaitGroup
	for i, s := range g.services {
		wg.Go(func() {
			if err := s.Stop(); err != nil {
				errs[i] = fmt.Errorf("%s: %w", s.Name(), err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// WithRelease returns s, with release run once at Stop after s has stopped:
// for something s uses but does not own (the client it produces with).
func WithRelease(s Service, release func()) Service {
	return &released{Service: s, release: release}
}

type released struct {
	Service
	release func()
	once    sync.Once
}

func (r *released) Stop() error {
	err := r.Service.Stop()
	r.once.Do(r.release)
	return err
}
