package kafkatest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Load produces records one after the other, until stopped, and remembers
// when the broker acknowledged each: for tests that delete and create a
// topic again under load. Its client takes a recreated topic up anew, as
// Redrive's producers do.
type Load struct {
	mu    sync.Mutex
	acked map[string]time.Time // key → when the broker acknowledged it
	stop  chan struct{}
	done  chan struct{}
}

// StartLoad produces record(key) for the keys "load-0", "load-1", … in turn,
// each until the broker acknowledges it, pausing for pause after each
// acknowledgement. It stops when Stop is called or the test ends.
func StartLoad(t testing.TB, brokers []string, pause time.Duration, record func(i int, key string) *kgo.Record) *Load {
	t.Helper()
	cl := Client(t, brokers, kgo.RecordDeliveryTimeout(2*time.Second), kgo.MetadataMinAge(100*time.Millisecond))
	l := &Load{acked: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			default:
			}
			key := fmt.Sprintf("load-%d", i)
			rec := record(i, key)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			err := cl.ProduceSync(ctx, rec).FirstErr()
			cancel()
			if err != nil {
				cl.PurgeTopicsFromClient(rec.Topic) // the topic may have been recreated
				time.Sleep(5 * time.Millisecond)
				continue
			}
			l.mu.Lock()
			l.acked[key] = time.Now()
			l.mu.Unlock()
			time.Sleep(pause)
		}
	}()
	t.Cleanup(l.Stop)
	return l
}

// Stop stops producing and waits for the record in flight. It may be called
// more than once.
func (l *Load) Stop() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// AckedIn lists the keys acknowledged within one of the spans [from, to].
func (l *Load) AckedIn(spans ...[2]time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k, at := range l.acked {
		for _, s := range spans {
			if !at.Before(s[0]) && !at.After(s[1]) {
				out = append(out, k)
				break
			}
		}
	}
	return out
}
