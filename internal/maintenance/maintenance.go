// Package maintenance runs Redrive's background upkeep: the pruner (retention,
// OJS dead-letter spec §5 and §8, queue-config spec §6.3), the replay-rules
// engine (§7) and the gauges read from Postgres and Kafka (§11.2).
//
// Every service takes a clock.Clock and passes its time to SQL as a
// parameter, so tests drive time without sleeping; RunOnce does one pass, and
// each is a service.Service whose Start runs its passes until Stop. Work that must happen on one replica at a time holds a
// Postgres advisory lock for the pass. Services never touch Kafka offsets and
// never delete a record that waits for (re)delivery.
package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/metrics"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/store"
)

// Advisory lock keys ("redrive" and a service number), one per service that
// must run on one replica at a time.
const (
	lockPruner       int64 = 0x7265647269766501
	lockReplay       int64 = 0x7265647269766502
	lockFingerprints int64 = 0x7265647269766503
	lockSchemaDecode int64 = 0x7265647269766504
)

// asLeader runs pass on the connection holding the advisory lock key, unless
// another replica holds it (leader false: pass did not run), and counts the
// run in runs by its result: ok, error or not_leader.
func asLeader(ctx context.Context, st *store.Store, key int64, runs *metrics.CounterVec, pass func(db *store.Maint) error) (leader bool, err error) {
	lock, ok, err := st.TryAdvisoryLock(ctx, key)
	if err != nil {
		runs.WithLabelValues("error").Inc()
		return false, err
	}
	if !ok {
		runs.WithLabelValues("not_leader").Inc()
		return false, nil
	}
	defer lock.Release()
	if err := pass(lock.Maint()); err != nil {
		runs.WithLabelValues("error").Inc()
		return true, err
	}
	runs.WithLabelValues("ok").Inc()
	return true, nil
}

// PolicyFunc returns the effective policy of a queue (source topic).
type PolicyFunc func(queue string) policy.Topic

// DefaultPolicy resolves every queue to the system defaults.
func DefaultPolicy(queue string) policy.Topic {
	t := policy.DefaultTopic()
	t.Name = queue
	return t
}

// Deps are what the Pruner and the Replayer work on and report to, besides
// their own settings. Zero fields take the defaults noted.
type Deps struct {
	// Store is required.
	Store *store.Store
	// Policy gives each queue's effective policy. Default: system defaults.
	Policy PolicyFunc
	// Events receives the service's lifecycle events. Optional.
	Events *events.Publisher
	// Metrics counts what the service does. Default: a private, unregistered set.
	Metrics *metrics.DeadLetter
	// Clock is the time the service measures at and what Start waits on.
	// Default: clock.Wall.
	Clock  clock.Clock
	Logger *slog.Logger
}

func (d Deps) withDefaults() Deps {
	if d.Policy == nil {
		d.Policy = DefaultPolicy
	}
	if d.Metrics == nil {
		d.Metrics = metrics.NewDeadLetter(nil, nil)
	}
	d.Clock = clock.Or(d.Clock)
	d.Logger = orLogger(d.Logger)
	return d
}

func orLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}

// positiveOr is d, or def when d is not positive (a zero or negative
// interval or batch size takes the default).
func positiveOr[T int | time.Duration](d, def T) T {
	if d <= 0 {
		return def
	}
	return d
}
