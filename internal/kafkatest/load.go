package kafkatest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/testdate"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Load produces records one after the other, until stopped, and remembers
// when and where the broker acknowledged each: for tests that delete and
// create a topic again under load. Its client takes a recreated topic up
// anew, as Redrive's producers do.
//
// When an acknowledgement comes back says nothing of which incarnation of a
// recreated topic gave it: a produce that reaches the broker in the instant
// before the deletion is acknowledged by the old topic (and deleted with it)
// and may return after the new topic exists. OnTopicNow tells them apart.
type Load struct {
	mu    sync.Mutex
	acked map[string]Ack // by key
	stop  chan struct{}
	done  chan struct{}
}

// Ack is how one record of a Load was acknowledged.
type Ack struct {
	// Sent is when the produce that succeeded began, At when it returned.
	Sent, At  time.Time
	Topic     string
	Partition int32
	Offset    int64
}

// StartLoad produces record(key) for the keys "load-0", "load-1", … in turn,
// pausing for pause after each acknowledgement. A key whose produce fails is
// not produced again (the broker may or may not have written it): the next
// key is. It stops when Stop is called or the test ends.
func StartLoad(t testing.TB, brokers []string, pause time.Duration, record func(i int, key string) *kgo.Record) *Load {
	t.Helper()
	cl := Client(t, brokers, kgo.RecordDeliveryTimeout(2*time.Second), kgo.MetadataMinAge(100*time.Millisecond))
	l := &Load{acked: map[string]Ack{}, stop: make(chan struct{}), done: make(chan struct{})}
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
			sent := testdate.Now()
			err := cl.ProduceSync(ctx, rec).FirstErr()
			cancel()
			if err != nil {
				cl.PurgeTopicsFromClient(rec.Topic) // the topic may have been recreated
				time.Sleep(5 * time.Millisecond)
				continue
			}
			l.mu.Lock()
			l.acked[key] = Ack{Sent: sent, At: testdate.Now(), Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset}
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

// AckedIn lists the keys acknowledged (their produce returned) within one of
// the spans [from, to].
func (l *Load) AckedIn(spans ...[2]time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k, a := range l.acked {
		for _, s := range spans {
			if !a.At.Before(s[0]) && !a.At.After(s[1]) {
				out = append(out, k)
				break
			}
		}
	}
	return out
}

// OnTopicNow lists the keys acknowledged by the topic as it is now: those
// it holds at the partition and offset they were acknowledged at. A key
// acknowledged by an incarnation of the topic deleted since is not listed
// (its place, if the new topic has reached it, holds another key: the load
// produces each key once). Every key the load had acknowledged when
// OnTopicNow was called is considered.
func (l *Load) OnTopicNow(t testing.TB, brokers []string) []string {
	t.Helper()
	l.mu.Lock()
	acks := make(map[string]Ack, len(l.acked))
	maps.Copy(acks, l.acked)
	l.mu.Unlock()
	var topics []string
	for _, a := range acks {
		if !slices.Contains(topics, a.Topic) {
			topics = append(topics, a.Topic)
		}
	}
	held := map[string]map[int32]map[int64]string{}
	for _, topic := range topics {
		held[topic] = Held(t, brokers, topic)
	}
	var out []string
	for k, a := range acks {
		if held[a.Topic][a.Partition][a.Offset] == k {
			out = append(out, k)
		}
	}
	return out
}

// Acked returns how key was acknowledged, if it was.
func (l *Load) Acked(key string) (Ack, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.acked[key]
	return a, ok
}
