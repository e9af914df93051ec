package app_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
)

// consumeGroup runs a consumer of orders in group through the client
// library until the test ends, committing what Process reports done. It
// returns the registry of the library's metrics.
func consumeGroup(t *testing.T, brokers []string, group string, h redrive.Handler, ropts []redrive.Opt, opts ...kgo.Opt) *prometheus.Registry {
	t.Helper()
	cl := kafkatest.Client(t, brokers, append([]kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics("orders"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	reg := prometheus.NewRegistry()
	dl, err := redrive.New(cl, append([]redrive.Opt{redrive.Registerer(reg)}, ropts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			done, err := dl.Process(ctx, cl.PollFetches(ctx), h)
			if len(done) > 0 {
				_ = cl.CommitRecords(ctx, done...)
			}
			if err != nil && ctx.Err() == nil {
				t.Errorf("group %s: %v", group, err)
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return reg
}

func skipped(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "redrive_client_redeliveries_skipped_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}

// TestRedeliveryReachesOnlyTheGroupThatFailed: billing and email consume
// orders through the client library; billing fails the record, email
// handles it. Redrive redelivers it (the default target: group) and
// exactly one more handler call happens, in billing; email skips the
// redelivery and counts it.
func TestRedeliveryReachesOnlyTheGroupThatFailed(t *testing.T) {
	b := setup(t)
	var billing, email atomic.Int32
	billingReg := consumeGroup(t, b.brokers, "billing", func(context.Context, *kgo.Record) error {
		if billing.Add(1) == 1 {
			return redrive.Retry("ledger.down", errors.New("ledger unreachable"))
		}
		return nil
	}, nil)
	emailReg := consumeGroup(t, b.brokers, "email", func(context.Context, *kgo.Record) error {
		email.Add(1)
		return nil
	}, nil)
	kafkatest.Produce(t, kafkatest.Client(t, b.brokers), &kgo.Record{Topic: "orders", Key: []byte("order-1"), Value: []byte(`{"id":1}`)})

	eventually.True(t, "billing handles the redelivery and email skips it", func() bool {
		return billing.Load() == 2 && skipped(t, emailReg) == 1
	})
	rec := b.waitFor(t, "queue=orders", 1).Items[0]
	if rec.Source.Group != "billing" {
		t.Errorf("record's source group %q, want billing", rec.Source.Group)
	}
	// email's skip of the redelivery is committed past: the handler saw
	// the record once, when it was first produced.
	if n := email.Load(); n != 1 {
		t.Errorf("email handled the record %d times, want once: a redelivery for billing must not reach it", n)
	}
	if n := billing.Load(); n != 2 {
		t.Errorf("billing handled the record %d times, want 2 (the failure and its redelivery)", n)
	}
	if n := testutil.CollectAndCount(billingReg, "redrive_client_redeliveries_skipped_total"); n != 1 || skipped(t, billingReg) != 0 {
		t.Errorf("billing skipped %v redeliveries, want 0", skipped(t, billingReg))
	}
}
