package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	env "github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/kafkatest"
)

type activityJSON struct {
	Name     string  `json:"name"`
	OldestAt *string `json:"oldest_at"`
	LastHour struct {
		Added   int `json:"added"`
		Retried int `json:"retried"`
	} `json:"last_hour"`
}

func (q activityJSON) String() string {
	at := "null"
	if q.OldestAt != nil {
		at = *q.OldestAt
	}
	return fmt.Sprintf("%s oldest_at %s, %d added, %d retried", q.Name, at, q.LastHour.Added, q.LastHour.Retried)
}

// A queue shows when its oldest record was created and, over the last hour,
// the failures ingest stored (new records and repeat failures) and the
// records the scheduler redelivered — through the real ingest and
// redelivery paths, in the list and for one queue alike.
func TestQueueShowsItsAgeAndLastHour(t *testing.T) {
	b := setup(t)
	// One attempt: failures are final, so only operators' retries redeliver.
	for _, q := range []string{"orders", "billing"} {
		wantStatus(t, b.send(t, http.MethodPut, "/ojs/v1/queues/"+q+"/config",
			map[string]any{"retry": map[string]any{"max_attempts": 1, "on_exhaustion": "dead_letter"}}, nil), http.StatusOK)
	}
	cl := kafkatest.Client(t, b.brokers)
	fail := func(src *kgo.Record) *kgo.Record {
		return env.Encode(src, env.FailureInfo{DLQTopic: dlqTopic, ErrorType: "db.down", Message: "down"})
	}
	for i := range 3 {
		kafkatest.Produce(t, cl, fail(&kgo.Record{Topic: "orders", Key: fmt.Appendf(nil, "k%d", i), Value: []byte(`{}`)}))
	}
	kafkatest.Produce(t, cl, fail(&kgo.Record{Topic: "billing", Key: []byte("b"), Value: []byte(`{}`)}))
	var l listJSON
	eventually(t, "4 records stored", 30*time.Second, func() bool {
		l = listJSON{}
		b.get(t, "/ojs/v1/dead-letter?state=discarded&limit=10", &l)
		return len(l.Items) == 4
	})
	var orders []recordJSON
	for _, r := range l.Items {
		if r.Queue == "orders" {
			orders = append(orders, r)
		}
	}
	// Newest first: the last is the oldest.
	var oldest struct {
		CreatedAt string `json:"created_at"`
	}
	b.get(t, "/ojs/v1/dead-letter/"+orders[2].ID, &oldest)

	// An operator retries two orders records; the scheduler redelivers them.
	for _, r := range orders[:2] {
		wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+r.ID+"/retry", nil, nil), http.StatusOK)
	}
	redelivered := kafkatest.Consume(t, b.brokers, "orders", 2, 30*time.Second)
	// The consumer fails one of them again: a repeat failure.
	kafkatest.Produce(t, cl, fail(redelivered[0]))

	queue := func(name string) activityJSON {
		t.Helper()
		var q activityJSON
		wantStatus(t, b.get(t, "/ojs/v1/queues/"+name, &q), http.StatusOK)
		return q
	}
	eventually(t, "orders: 4 added, 2 retried", 30*time.Second, func() bool {
		q := queue("orders")
		return q.LastHour.Added == 4 && q.LastHour.Retried == 2
	})
	check := func(when string) {
		t.Helper()
		var list struct {
			Items []activityJSON `json:"items"`
		}
		wantStatus(t, b.get(t, "/ojs/v1/queues", &list), http.StatusOK)
		byName := map[string]activityJSON{}
		for _, q := range list.Items {
			byName[q.Name] = q
		}
		for _, name := range []string{"orders", "billing", "payments"} {
			if one := queue(name); one.String() != byName[name].String() {
				t.Errorf("%s: %s alone = %v, in the list %v", when, name, one, byName[name])
			}
		}
		o, bl, p := byName["orders"], byName["billing"], byName["payments"]
		if o.OldestAt == nil || *o.OldestAt != oldest.CreatedAt || o.LastHour.Added != 4 || o.LastHour.Retried != 2 {
			t.Errorf("%s: orders = %v, want oldest_at %s, 4 added, 2 retried", when, o, oldest.CreatedAt)
		}
		if bl.OldestAt == nil || bl.LastHour.Added != 1 || bl.LastHour.Retried != 0 {
			t.Errorf("%s: billing = %v, want 1 added", when, bl)
		}
		// payments has a policy file entry and no records.
		if p.Name != "payments" || p.OldestAt != nil || p.LastHour.Added != 0 || p.LastHour.Retried != 0 {
			t.Errorf("%s: payments = %v, want no records and no activity", when, p)
		}
	}
	check("as written")
	if err := b.store.CompactActivity(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	check("compacted")
}
