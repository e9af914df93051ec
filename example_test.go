package redrive_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive"
)

// errOutOfStock is a business failure that retrying will not fix.
var errOutOfStock = errors.New("out of stock")

// handleOrder is the application's handler.
func handleOrder(_ context.Context, r *kgo.Record) error {
	switch order := string(r.Value); {
	case strings.Contains(order, "sku-404"):
		return redrive.DeadLetter("inventory.out_of_stock", fmt.Errorf("order %s: %w", r.Key, errOutOfStock))
	case strings.Contains(order, "flaky"):
		return errors.New("database timeout") // retried by Redrive per the topic's policy
	}
	fmt.Printf("processed %s\n", r.Key)
	return nil
}

// Example consumes a topic with manual commits: a record's offset is
// committed only once the wrapped handler says it is done — handled, or
// dead-lettered and acknowledged by the broker.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// An in-process Kafka for the example; use your brokers instead.
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", redrive.DefaultDLQTopic))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	seed := kgo.SeedBrokers(cluster.ListenAddrs()...)
	producer, err := kgo.NewClient(seed)
	if err != nil {
		panic(err)
	}
	defer producer.Close()
	for _, v := range []string{"order-1:sku-1", "order-2:sku-404", "order-3:flaky", "order-4:sku-2"} {
		key, _, _ := strings.Cut(v, ":")
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte(key), Value: []byte(v)}).FirstErr(); err != nil {
			panic(err)
		}
	}

	cl, err := kgo.NewClient(seed,
		kgo.ConsumerGroup("billing"),
		kgo.ConsumeTopics("orders"),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(250*time.Millisecond),
		kgo.RecordDeliveryTimeout(10*time.Second), // a DLQ outage surfaces as an error
	)
	if err != nil {
		panic(err)
	}
	defer cl.Close()

	dl, err := redrive.New(cl, redrive.InlineRetries(1, 10*time.Millisecond))
	if err != nil {
		panic(err)
	}
	handle := dl.Wrap(handleOrder)

	for seen := 0; seen < 4; {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			panic(ctx.Err())
		}
		for _, r := range fetches.Records() {
			if err := handle(ctx, r); err != nil {
				// The DLQ is unreachable: the record is not done. Do not
				// commit it; stop, and a restart resumes here.
				fmt.Println("stopping:", err)
				return
			}
			if err := cl.CommitRecords(ctx, r); err != nil {
				panic(err)
			}
			seen++
		}
	}

	// What Redrive will ingest from the DLQ topic.
	reader, err := kgo.NewClient(seed,
		kgo.ConsumeTopics(redrive.DefaultDLQTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(250*time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer reader.Close()
	for n := 0; n < 2; {
		for _, r := range reader.PollFetches(ctx).Records() {
			h := map[string]string{}
			for _, kv := range r.Headers {
				h[kv.Key] = string(kv.Value)
			}
			fmt.Printf("dead letter %s from %s@%s: %s %s %q\n", r.Key,
				h["redrive.source.topic"], h["redrive.source.offset"],
				h["redrive.error.code"], h["redrive.error.type"], h["redrive.error.message"])
			n++
		}
	}

	// Output:
	// processed order-1
	// processed order-4
	// dead letter order-2 from orders@1: DEAD_LETTER inventory.out_of_stock "order order-2: out of stock"
	// dead letter order-3 from orders@2: RETRY error "database timeout"
}

// ExampleDeadLetterer_Process handles a whole poll at a time and commits what
// is done.
func ExampleDeadLetterer_Process() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "payments", redrive.DefaultDLQTopic))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	seed := kgo.SeedBrokers(cluster.ListenAddrs()...)
	cl, err := kgo.NewClient(seed,
		kgo.ConsumerGroup("ledger"),
		kgo.ConsumeTopics("payments"),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(250*time.Millisecond),
	)
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	for _, v := range []string{"pay-1", "pay-2:card_declined", "pay-3"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "payments", Value: []byte(v)}).FirstErr(); err != nil {
			panic(err)
		}
	}

	dl, err := redrive.New(cl) // group "ledger" is taken from the client
	if err != nil {
		panic(err)
	}
	handler := func(_ context.Context, r *kgo.Record) error {
		if strings.HasSuffix(string(r.Value), "card_declined") {
			return redrive.Discard("payment.card_declined", errors.New("card declined"))
		}
		return nil
	}

	for total := 0; total < 3; {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			panic(ctx.Err())
		}
		done, err := dl.Process(ctx, fetches, handler)
		if cerr := cl.CommitRecords(ctx, done...); cerr != nil {
			panic(cerr)
		}
		if err != nil {
			fmt.Println("stopping:", err)
			return
		}
		total += len(done)
	}
	fmt.Println("all payments done")

	// The DLQ topic holds the one that failed.
	reader, err := kgo.NewClient(seed, kgo.ConsumeTopics(redrive.DefaultDLQTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(250*time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer reader.Close()
	for found := false; !found; {
		fetches := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			panic(ctx.Err())
		}
		for _, r := range fetches.Records() {
			h := map[string]string{}
			for _, kv := range r.Headers {
				h[kv.Key] = string(kv.Value)
			}
			fmt.Printf("in the DLQ: %s (%s %s, group %s)\n", r.Value, h["redrive.error.code"], h["redrive.error.type"], h["redrive.source.group"])
			found = true
		}
	}

	// Output:
	// all payments done
	// in the DLQ: pay-2:card_declined (DISCARD payment.card_declined, group ledger)
}
