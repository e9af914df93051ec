package redrive_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive"
)

// paymentsAPI stands for what a handler depends on: it answers two calls,
// is then down for five, and is back after that.
type paymentsAPI struct {
	mu             sync.Mutex
	calls, charged int
}

func (p *paymentsAPI) charge(order string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.calls > 2 && p.calls <= 7 {
		return redrive.Retry("payments.unavailable",
			fmt.Errorf("charge %s: unexpected status 503 from http://10.1.2.3:8080", order))
	}
	p.charged++
	return nil
}

// ExampleFloodGuard: the payments API goes down. The first failures are
// dead-lettered while the guard decides (those alike are marked
// redrive.flood); then it trips and holds the records in Kafka, uncommitted,
// probes after a backoff, and resumes when a probe succeeds. Every record is
// processed or dead-lettered once, and the held ones are not dead letters.
func ExampleFloodGuard() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", redrive.DefaultDLQTopic))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	seed := kgo.SeedBrokers(cluster.ListenAddrs()...)
	cl, err := kgo.NewClient(seed,
		kgo.ConsumerGroup("billing"),
		kgo.ConsumeTopics("orders"),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(250*time.Millisecond),
	)
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	const orders = 12
	for i := range orders {
		cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: fmt.Appendf(nil, "order-%d", i)})
	}

	dl, err := redrive.New(cl, redrive.FloodGuard(redrive.FloodGuardConfig{
		MinFailures:  4,                     // default 20
		ProbeBackoff: 10 * time.Millisecond, // default 1s
		OnChange: func(ev redrive.FloodEvent) {
			switch {
			case ev.State == redrive.FloodTripped && ev.FailedProbes == 0:
				fmt.Printf("tripped at %s@%d: %d of %d records failed with %s %q; probe in %v\n",
					ev.Topic, ev.Offset, ev.Failures, ev.Records, ev.ErrorType, ev.Message, ev.Backoff)
			case ev.State == redrive.FloodTripped:
				fmt.Printf("probe %s@%d failed; next probe in %v\n", ev.Topic, ev.Offset, ev.Backoff)
			case ev.State == redrive.FloodProbing:
				fmt.Println("probing")
			default:
				fmt.Printf("resumed: probe %s@%d succeeded after %d failed\n", ev.Topic, ev.Offset, ev.FailedProbes)
			}
		},
	}))
	if err != nil {
		panic(err)
	}
	api := &paymentsAPI{}
	handle := dl.Wrap(func(_ context.Context, r *kgo.Record) error {
		return api.charge(string(r.Key))
	})

	for done := 0; done < orders; {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			panic(ctx.Err())
		}
		for _, r := range fetches.Records() {
			err := handle(ctx, r)
			if errors.Is(err, redrive.ErrFlooded) {
				continue // held in Kafka: do not commit; it comes back after the guard resumes
			}
			if err != nil {
				fmt.Println("stopping:", err) // the DLQ is unreachable
				return
			}
			if err := cl.CommitRecords(ctx, r); err != nil {
				panic(err)
			}
			done++
		}
	}
	api.mu.Lock()
	fmt.Printf("all %d orders done: %d charged in %d calls\n", orders, api.charged, api.calls)
	api.mu.Unlock()

	reader, _ := kgo.NewClient(seed,
		kgo.ConsumeTopics(redrive.DefaultDLQTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(250*time.Millisecond))
	defer reader.Close()
	for n := 0; n < 3; {
		for _, r := range reader.PollFetches(ctx).Records() {
			flood := "-"
			for _, h := range r.Headers {
				if h.Key == redrive.FloodHeader {
					flood = "marked"
				}
			}
			fmt.Printf("dead letter %s (%s %s)\n", r.Key, redrive.FloodHeader, flood)
			n++
		}
	}
	// Output:
	// tripped at orders@5: 4 of 6 records failed with payments.unavailable "charge order-5: unexpected status 503 from http://10.1.2.3:8080"; probe in 10ms
	// probing
	// probe orders@5 failed; next probe in 20ms
	// probing
	// resumed: probe orders@5 succeeded after 1 failed
	// all 12 orders done: 9 charged in 14 calls
	// dead letter order-2 (redrive.flood -)
	// dead letter order-3 (redrive.flood marked)
	// dead letter order-4 (redrive.flood marked)
}
