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
	"log/slog"

	"github.com/redrive/redrive/internal/policy"
)

// Advisory lock keys ("redrive" and a service number), one per service that
// must run on one replica at a time.
const (
	lockPruner       int64 = 0x7265647269766501
	lockReplay       int64 = 0x7265647269766502
	lockFingerprints int64 = 0x7265647269766503
	lockSchemaDecode int64 = 0x7265647269766504
)

// PolicyFunc returns the effective policy of a queue (source topic).
type PolicyFunc func(queue string) policy.Topic

// DefaultPolicy resolves every queue to the system defaults.
func DefaultPolicy(queue string) policy.Topic {
	t := policy.DefaultTopic()
	t.Name = queue
	return t
}

func orLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}
