// Package kafkatest starts an in-process Kafka (kfake) per test and builds
// clients tuned for tests against it.
package kafkatest

import (
	"context"
	"errors"
	"testing"
	"time"

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
// data on newly assigned partitions waits for the in-flight long poll (up to 5 s).
func ClientOpts(brokers []string) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.FetchMaxWait(250 * time.Millisecond)}
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
