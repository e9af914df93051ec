package kafkatest_test

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/testdate"
)

// OnTopicNow lists the keys the topic as it is now acknowledged, and none
// that an incarnation deleted since acknowledged, though the new topic holds
// other keys at their partitions and offsets.
func TestOnTopicNowTellsTheIncarnationsApart(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.New(t, "t")
	gate := make(chan struct{})
	load := kafkatest.StartLoad(t, brokers, 0, func(i int, key string) *kgo.Record {
		if i == 6 {
			<-gate // the old topic acknowledged load-0 to load-5
		}
		return &kgo.Record{Topic: "t", Key: []byte(key)}
	})
	all := func() []string { return load.AckedIn([2]time.Time{{}, testdate.Now().Add(time.Hour)}) }
	eventually.True(t, "6 records acknowledged", func() bool { return len(all()) == 6 })
	old := all()
	kafkatest.Recreate(t, brokers, "t", 3)
	close(gate)
	// Until the new topic holds a record at each place the old one
	// acknowledged a key at.
	eventually.True(t, "the old topic's places taken in the new one", func() bool {
		held := kafkatest.Held(t, brokers, "t")
		return !slices.ContainsFunc(old, func(key string) bool {
			a, _ := load.Acked(key)
			_, taken := held[a.Partition][a.Offset]
			return !taken
		})
	})
	load.Stop()

	got, want := load.OnTopicNow(t, brokers), slices.DeleteFunc(all(), func(k string) bool { return slices.Contains(old, k) })
	slices.Sort(got)
	slices.Sort(want)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("OnTopicNow = %v, want %v (the new topic's; the old one acknowledged %v)", got, want, old)
	}
}
