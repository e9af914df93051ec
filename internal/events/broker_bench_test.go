package events

import (
	"fmt"
	"testing"

	"github.com/redrive/redrive/internal/metrics"
)

// BenchmarkPublishFilteredSubscribers publishes to a broker with 200
// subscribers filtering on 7,000 topics each (the shape that once pinned a
// core: filters were scanned per event), plus one subscriber of every queue.
// Publishing costs O(matching subscribers), whatever the filters' size.
func BenchmarkPublishFilteredSubscribers(b *testing.B) {
	br := newBroker(metrics.NewEvents(nil), StreamConfig{}, HistoryConfig{})
	for i := range 200 {
		qs := make([]string, 7000)
		for j := range qs {
			qs[j] = fmt.Sprintf("topic-%d-%d", i, j)
		}
		s := br.Subscribe(Filter{Queues: qs})
		go func() {
			for range s.C {
			}
		}()
	}
	all := br.Subscribe(Filter{})
	go func() {
		for range all.C {
		}
	}()
	ev := Event{Type: DeadLetterAdded, Queue: "orders", Subject: "x"}
	data := []byte(`{}`)
	b.ReportAllocs()
	for b.Loop() {
		br.publish(&ev, data)
	}
	b.StopTimer()
	br.closeAll()
}
