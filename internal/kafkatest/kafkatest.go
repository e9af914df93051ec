// Package kafkatest starts an in-process Kafka (kfake) per test and builds
// clients tuned for tests against it.
package kafkatest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/testdate"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Partitions is how many partitions seeded topics get.
const Partitions = 3

// New starts a one-broker kfake cluster with the topics created and returns
// its seed addresses. The cluster closes when the test ends.
func New(t testing.TB, topics ...string) []string {
	t.Helper()
	return NewCluster(t, topics...).ListenAddrs()
}

// NewCluster is New, returning the cluster itself, for tests that inject
// broker behaviour (ControlKey).
func NewCluster(t testing.TB, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(Partitions), kfake.SeedTopics(Partitions, topics...))
	if err != nil {
		t.Fatalf("kafkatest: start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Recreate deletes topic and creates it again with partitions partitions: the
// same name, a new topic id, offsets from 0.
func Recreate(t testing.TB, brokers []string, topic string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(Client(t, brokers))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	del, err := adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = del.Err
	}
	if err != nil {
		t.Fatalf("kafkatest: delete topic %s: %v", topic, err)
	}
	for {
		created, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
		if err == nil {
			err = created.Err
		}
		if err == nil {
			return
		}
		if ctx.Err() != nil || !errors.Is(err, kerr.TopicAlreadyExists) {
			t.Fatalf("kafkatest: create topic %s again: %v", topic, err)
		}
		time.Sleep(10 * time.Millisecond) // the deletion is still under way
	}
}

// ClientOpts are options every test client wants: without a short fetch wait,
// data on newly assigned partitions waits for the in-flight long poll (up to 5 s);
// and the records it produces stamped with the tests' clock (testdate), not
// the machine's: a record without a failure time failed at its timestamp.
func ClientOpts(brokers []string) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.FetchMaxWait(250 * time.Millisecond), kgo.WithHooks(testClock{})}
}

// testClock restamps what a client produces with the tests' clock: franz-go
// stamps a record that has no timestamp with the machine's time.
type testClock struct{}

func (testClock) OnProduceRecordBuffered(r *kgo.Record) {
	r.Timestamp = testdate.Restamp(r.Timestamp).Truncate(time.Millisecond)
}

// Client returns a client on the brokers, closed when the test ends.
func Client(t testing.TB, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(ClientOpts(brokers), opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Produce writes records synchronously and fails the test on error.
func Produce(t testing.TB, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("kafkatest: produce: %v", err)
	}
}

// Consume reads n records from topic (from the start) and returns them; it
// fails the test if they do not arrive within the timeout.
func Consume(t testing.TB, brokers []string, topic string, n int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	cl := Client(t, brokers, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("kafkatest: consumed %d of %d records from %s before timeout", len(out), n, topic)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// Held reads topic from its start to the end it has when Held is called, and
// returns the key of each record by partition and offset.
func Held(t testing.TB, brokers []string, topic string) map[int32]map[int64]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := Client(t, brokers)
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("kafkatest: list end offsets of %s: %v", topic, err)
	}
	out := map[int32]map[int64]string{}
	todo := map[int32]int64{} // partition → its end offset, while not read up to it
	parts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		out[o.Partition] = map[int64]string{}
		if o.Offset > 0 {
			todo[o.Partition] = o.Offset
			parts[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(todo) == 0 {
		return out
	}
	cons, err := kgo.NewClient(append(ClientOpts(brokers), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))...)
	if err != nil {
		t.Fatalf("kafkatest: new client: %v", err)
	}
	defer cons.Close()
	for len(todo) > 0 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("kafkatest: read %s up to its end offsets %v: timed out", topic, todo)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition][r.Offset] = string(r.Key)
			if end, ok := todo[r.Partition]; ok && r.Offset+1 >= end {
				delete(todo, r.Partition)
			}
		})
	}
	return out
}

// CreateTopics creates topics (one partition each) on a running cluster, as
// an operator would after Redrive found them missing.
func CreateTopics(t testing.TB, brokers []string, topics ...string) {
	t.Helper()
	adm := kadm.NewClient(Client(t, brokers))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopics(ctx, 1, -1, nil, topics...)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("kafkatest: create topics %v: %v", topics, err)
	}
}
