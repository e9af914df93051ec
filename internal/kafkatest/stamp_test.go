package kafkatest_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/testdate"
)

// A test client stamps the records it produces with the tests' clock (make
// test-dates moves it), and keeps a timestamp a record was given.
func TestProducedRecordsCarryTheTestsTime(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.New(t, "stamps")
	given := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	kafkatest.Produce(t, kafkatest.Client(t, brokers),
		&kgo.Record{Topic: "stamps", Value: []byte("now")}, &kgo.Record{Topic: "stamps", Value: []byte("given"), Timestamp: given})
	got := kafkatest.Consume(t, brokers, "stamps", 2, 10*time.Second)
	for _, r := range got {
		switch string(r.Value) {
		case "now":
			if d := testdate.Since(r.Timestamp); d < 0 || d > 5*time.Second {
				t.Errorf("a record produced without a timestamp carries %v, %v from the tests' now", r.Timestamp, d)
			}
		case "given":
			if !r.Timestamp.Equal(given) {
				t.Errorf("a record produced at %v carries %v", given, r.Timestamp)
			}
		}
	}
}
