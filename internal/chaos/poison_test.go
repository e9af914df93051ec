package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/testdate"
)

// The poison phase mixes into the load the records that once stopped
// ingest or made serve write into its own topics: keys and values Postgres
// cannot index or parse, and forged envelopes whose source is serve's own
// DLQ or events topic, or a Kafka internal topic, with a retry policy of a
// millisecond and two billion attempts. None may pause ingest (outside the
// suite's Postgres stops), be lost, or be produced anywhere by serve.
const (
	// qPoison is the source topic of the poison records that name a real
	// one: they are dead-lettered at once and kept (policiesYAML).
	qPoison = "poison"
	// poisonPrefix starts every poison key; the workload's own checks
	// leave such records out.
	poisonPrefix = "poison-"
	eventsTopic  = dlqTopic + ".events"
	// forgedEvent is the value of the record forged to be redelivered into
	// the events topic; it must never appear there.
	forgedEvent = `{"specversion":"1.0","type":"dead_letter.retried","id":"forged-by-the-chaos-suite"}`
)

// selfLoop is the retry policy a forged record asks for.
var selfLoop = json.RawMessage(`{"max_attempts":2000000000,"initial_interval":"PT0.001S","backoff_coefficient":1,"max_interval":"PT0.001S","jitter":false}`)

// poisonKinds make round n's poison records.
var poisonKinds = []func(n int) *kgo.Record{
	func(n int) *kgo.Record {
		return poisonRecord(qPoison, poisonKey(n, "long-key", 3000), "{}", envelope.FailureInfo{})
	},
	func(n int) *kgo.Record {
		return poisonRecord(qPoison, poisonKey(n, "huge-key", 900_000), "{}", envelope.FailureInfo{})
	},
	func(n int) *kgo.Record {
		return poisonRecord(qPoison, poisonKey(n, "deep-array", 0), nest("[", "]", 20_000), envelope.FailureInfo{})
	},
	func(n int) *kgo.Record {
		return poisonRecord(qPoison, poisonKey(n, "deep-object", 0), nest(`{"a":`, "}", 10_000), envelope.FailureInfo{})
	},
	func(n int) *kgo.Record {
		return poisonRecord(qPoison, poisonKey(n, "numbers", 0), `{"n":1e400,"s":"\ud800"}`, envelope.FailureInfo{})
	},
	func(n int) *kgo.Record {
		return poisonRecord(qPoison, poisonKey(n, "long-type", 0), "{}", envelope.FailureInfo{
			Type: strings.Repeat("t", 10_000), ErrorType: strings.Repeat("e", 10_000)})
	},
	func(n int) *kgo.Record {
		return poisonRecord(strings.Repeat("q", 3000), poisonKey(n, "long-topic", 0), "{}", envelope.FailureInfo{})
	},
	func(n int) *kgo.Record {
		return poisonRecord(dlqTopic, poisonKey(n, "self-loop", 0), "{}", envelope.FailureInfo{Retry: selfLoop})
	},
	func(n int) *kgo.Record {
		return poisonRecord(eventsTopic, poisonKey(n, "forged-event", 0), forgedEvent, envelope.FailureInfo{Retry: selfLoop})
	},
	func(n int) *kgo.Record {
		return poisonRecord("__consumer_offsets", poisonKey(n, "internal", 0), "{}", envelope.FailureInfo{Retry: selfLoop})
	},
	func(n int) *kgo.Record {
		// A real topic, a forged retry policy: the bounds on redrive.retry
		// hold it to the ceiling and floor.
		return poisonRecord(qPoison, poisonKey(n, "fast-retry", 0), "{}", envelope.FailureInfo{Retry: selfLoop})
	},
}

func poisonKey(n int, kind string, pad int) string {
	k := fmt.Sprintf("%s%03d-%s", poisonPrefix, n, kind)
	if pad > len(k) {
		k += "-" + strings.Repeat("k", pad-len(k)-1)
	}
	return k
}

func nest(open, close string, depth int) string {
	return strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth)
}

func poisonRecord(source, key, value string, info envelope.FailureInfo) *kgo.Record {
	info.DLQTopic = dlqTopic
	if info.ErrorType == "" {
		info.ErrorType = "chaos.poison"
	}
	info.Message = "poison record " + key[:min(len(key), 40)]
	if info.Code == "" && len(info.Retry) == 0 && source == qPoison {
		info.Code = dlq.CodeDeadLetter
	}
	return envelope.Encode(&kgo.Record{Topic: source, Key: []byte(key), Value: []byte(value), Timestamp: testdate.Now()}, info)
}

// poisoner produces rounds of poison records, spread over the run.
type poisoner struct {
	cl *kgo.Client

	mu   sync.Mutex
	sent []string // keys acknowledged by the broker
}

// run produces one round of every poison kind every d/rounds.
func (p *poisoner) run(ctx context.Context, rounds int, d time.Duration) error {
	start := testdate.Now()
	for n := range rounds {
		if err := sleepUntil(ctx, start.Add(d*time.Duration(n)/time.Duration(rounds))); err != nil {
			return err
		}
		for _, kind := range poisonKinds {
			rec := kind(n)
			if err := p.cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
				return fmt.Errorf("produce poison %.40s: %w", rec.Key, err)
			}
			p.mu.Lock()
			p.sent = append(p.sent, string(rec.Key))
			p.mu.Unlock()
		}
	}
	return nil
}

func (p *poisoner) keys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.sent...)
}

// poisonStored lists, of keys, those with no record in Postgres.
func poisonMissing(ctx context.Context, dbURL string, keys []string) ([]string, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	bkeys := make([][]byte, len(keys))
	for i, k := range keys {
		bkeys[i] = []byte(k)
	}
	rows, err := conn.Query(ctx, `SELECT k FROM unnest($1::bytea[]) AS k
		WHERE NOT EXISTS (SELECT 1 FROM redrive_record r WHERE r.key = k)`, bkeys)
	if err != nil {
		return nil, err
	}
	missing, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var b []byte
		err := r.Scan(&b)
		return string(b[:min(len(b), 40)]), err
	})
	return missing, err
}

// poisonWatch is what the observer saw serve do with poison records on its
// own topics.
type poisonWatch struct {
	looped []string // poison records serve produced to its DLQ topic
	forged int      // forged events on the events topic
}

// watchOwnTopic records what serve produced to its own DLQ and events
// topics: a poison record there carrying redrive.id was produced by serve.
func (o *observer) watchOwnTopic(r *kgo.Record) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case r.Topic == eventsTopic && string(r.Value) == forgedEvent:
		o.poison.forged++
	case r.Topic == dlqTopic && strings.HasPrefix(string(r.Key), poisonPrefix) && header(r, envelope.HeaderID) != "":
		o.poison.looped = append(o.poison.looped, string(r.Key[:min(len(r.Key), 40)]))
	}
}

// pausedOutsideStops lists the times ingest reported itself paused with no
// Postgres stop to explain it (a stop, and a few seconds after it while
// the pool reconnects).
func pausedOutsideStops(paused []time.Time, ds []disruption) []string {
	var out []string
	for _, at := range paused {
		explained := false
		for _, d := range ds {
			if d.kind == "postgres stop" && !at.Before(d.at.Add(-time.Second)) && !at.After(d.end.Add(15*time.Second)) {
				explained = true
				break
			}
		}
		if !explained {
			out = append(out, stamp(at))
		}
	}
	return out
}
