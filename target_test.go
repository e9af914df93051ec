package redrive

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/envelope"
)

// A redelivery for one consumer group reaches the handler in that group
// only: elsewhere it is done at once, never handled, never dead-lettered
// nor acknowledged, and counted. A record without the header (a redelivery
// for the whole topic, or any other record) is handled in every group.
func TestWrapSkipsRedeliveriesForAnotherGroup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	forBilling := consumed("k", "v",
		kgo.RecordHeader{Key: envelope.HeaderID, Value: []byte(testID)},
		kgo.RecordHeader{Key: envelope.HeaderAttempt, Value: []byte("1")},
		kgo.RecordHeader{Key: envelope.HeaderTargetGroup, Value: []byte(testGroup)})
	forAll := consumed("k", "v",
		kgo.RecordHeader{Key: envelope.HeaderID, Value: []byte(testID)},
		kgo.RecordHeader{Key: envelope.HeaderAttempt, Value: []byte("1")})

	for _, c := range []struct {
		group          string
		rec            *kgo.Record
		handled, skips int
	}{
		{testGroup, forBilling, 1, 0},
		{"email", forBilling, 0, 1},
		{"", forBilling, 0, 1}, // a consumer without a group is not the group that failed it
		{"email", forAll, 1, 0},
		{testGroup, forAll, 1, 0},
	} {
		reg := prometheus.NewRegistry()
		d, err := New(b.cl, Group(c.group), Registerer(reg), AckCompletions())
		if err != nil {
			t.Fatal(err)
		}
		handled := 0
		err = d.Wrap(func(context.Context, *kgo.Record) error {
			handled++
			return Fail("x", nil) // a handled record would be dead-lettered
		})(context.Background(), c.rec)
		if err != nil {
			t.Fatalf("group %q: %v", c.group, err)
		}
		skips := testutil.ToFloat64(d.skips)
		if handled != c.handled || skips != float64(c.skips) {
			t.Errorf("group %q, target %q: handled %d, skipped %v; want %d, %d", c.group, envelope.TargetGroupOf(c.rec), handled, skips, c.handled, c.skips)
		}
		if n, err := testutil.GatherAndCount(reg, "redrive_client_redeliveries_skipped_total"); err != nil || n != 1 {
			t.Errorf("registered skip counters: %d, %v", n, err)
		}
	}
	// Only the three handled records were dead-lettered: a skipped one
	// produces nothing, not even an acknowledgement.
	if n := b.dlqSize(t); n != 3 {
		t.Errorf("DLQ holds %d records, want 3 (the handled ones)", n)
	}
}
