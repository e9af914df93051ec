package redeliver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/dlq"
)

// newProducer creates the Kafka client the scheduler and the archiver produce
// with. A produce that cannot finish fails within timeout, and a topic the
// brokers say does not exist fails after one metadata retry instead of four,
// so one record that cannot be delivered never holds a batch for long.
// Batches are compressed with snappy when they compress (probingCompressor).
func newProducer(brokers []string, timeout time.Duration, opts ...kgo.Opt) (*kgo.Client, error) {
	compressor, err := newProbingCompressor()
	if err != nil {
		return nil, err
	}
	return kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.RecordDeliveryTimeout(timeout),
		kgo.UnknownTopicRetries(1),
		kgo.ProducerLinger(0),
		kgo.WithCompressor(compressor),
	}, opts...)...)
}

// classify names why a produce failed, as stored on the record and in metrics.
func classify(err error) string {
	switch {
	case errors.Is(err, errInvalidTopic), errors.Is(err, kerr.InvalidTopicException):
		return dlq.ReasonInvalidTopic
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		return dlq.ReasonUnknownTopic
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return dlq.ReasonTooLarge
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed),
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed), errors.Is(err, kerr.SaslAuthenticationFailed):
		return dlq.ReasonAuthorization
	case errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, kerr.RequestTimedOut):
		return dlq.ReasonTimeout
	}
	return dlq.ReasonBroker
}

// errInvalidTopic fails a record whose target is no legal Kafka topic name
// before it is produced.
var errInvalidTopic = errors.New("invalid topic name")

// checkTopic fails a target that is no legal Kafka topic name.
func checkTopic(name string) error {
	if problem := dlq.TopicNameProblem(name); problem != "" {
		return fmt.Errorf("%w %q: %s", errInvalidTopic, name, problem)
	}
	return nil
}

// Backoff of a record whose produce keeps failing, apart from its retry
// policy: first wait, doubling per failure up to the cap.
type Backoff struct {
	// Min is the wait after the first failure. Default: 5s.
	Min time.Duration
	// Max caps the wait. Default: 10m.
	Max time.Duration
}

func (b Backoff) withDefaults() Backoff {
	if b.Min <= 0 {
		b.Min = 5 * time.Second
	}
	if b.Max <= 0 {
		b.Max = 10 * time.Minute
	}
	b.Max = max(b.Max, b.Min)
	return b
}

// after is the wait after the nth failure in a row (n >= 1).
func (b Backoff) after(n int) time.Duration {
	d := b.Min
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// failure describes the nth failure in a row of a produce at now.
func (b Backoff) failure(err error, n int, now time.Time) dlq.DeliveryFailure {
	return dlq.DeliveryFailure{Reason: classify(err), Message: err.Error(), FailedAt: now, Failures: n,
		NextAttemptAt: now.Add(b.after(n))}
}

// failureLog logs failed produces at most once a minute per queue and reason,
// with how many failed since, so a poison record never floods the log.
type failureLog struct {
	log      *slog.Logger
	clock    clock.Clock
	interval time.Duration

	mu   sync.Mutex
	seen map[[2]string]*logged
}

type logged struct {
	at     time.Time
	missed int
}

func newFailureLog(log *slog.Logger, clk clock.Clock) *failureLog {
	return &failureLog{log: log, clock: clk, interval: time.Minute, seen: map[[2]string]*logged{}}
}

// due reports whether n more records of queue and reason are to be logged
// now, and how many went unlogged since the last line; otherwise it counts
// them.
func (l *failureLog) due(queue, reason string, n int) (missed int, ok bool) {
	key := [2]string{queue, reason}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e, seen := l.seen[key]
	if seen && now.Sub(e.at) < l.interval {
		e.missed += n
		return 0, false
	}
	if seen {
		missed = e.missed
	}
	l.seen[key] = &logged{at: now}
	return missed, true
}

// failed logs (or counts) n failed records of queue; f is one of them.
func (l *failureLog) failed(msg, queue, topic, id string, n int, f *dlq.DeliveryFailure) {
	missed, ok := l.due(queue, f.Reason, n)
	if !ok {
		return
	}
	attrs := []any{"queue", queue, "topic", topic, "reason", f.Reason, "records", n, "example_id", id}
	if !f.NextAttemptAt.IsZero() {
		attrs = append(attrs, "retry_in", f.NextAttemptAt.Sub(f.FailedAt))
	}
	l.log.Warn(msg, append(attrs, "failed_since_last_log", missed, "err", f.Message)...)
}
