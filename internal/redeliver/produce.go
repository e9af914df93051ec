package redeliver

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/recreate"
)

// produced is the outcome of produceAll.
type produced struct {
	// errs is each record's error, nil when it was delivered.
	errs []error
	// recreated lists the topics the client found deleted and created again.
	recreated []string
}

// produceAll produces recs and waits for each outcome. A topic deleted and
// created again under the client fails every record with UNKNOWN_TOPIC_ID
// until it is purged from the client: the records that failed so (or that a
// purge by another batch dropped from the client's buffer) are produced once
// more, after the purge, to the new topic. Other failures are returned as
// they are.
func produceAll(ctx context.Context, cl *kgo.Client, resets *recreate.Resetter, recs []*kgo.Record) produced {
	res := produced{errs: make([]error, len(recs))}
	if len(recs) == 0 {
		return res
	}
	epochs := make(map[string]uint64)
	type original struct {
		partition int32
		timestamp time.Time
	}
	orig := make([]original, len(recs)) // what produce changes, to produce a record again as it was
	index := make(map[*kgo.Record]int, len(recs))
	for i, r := range recs {
		if _, ok := epochs[r.Topic]; !ok {
			epochs[r.Topic] = resets.Epoch(r.Topic)
		}
		orig[i] = original{r.Partition, r.Timestamp}
		index[r] = i
	}
	for _, pr := range cl.ProduceSync(ctx, recs...) {
		res.errs[index[pr.Record]] = pr.Err
	}
	var again []int
	for i, err := range res.errs {
		if err == nil {
			continue
		}
		topic := recs[i].Topic
		if recreate.Is(err) {
			if !slices.Contains(res.recreated, topic) {
				res.recreated = append(res.recreated, topic)
			}
			resets.Reset(topic, epochs[topic])
		}
		if recreate.Is(err) || resets.Epoch(topic) != epochs[topic] {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return res
	}
	retry := make([]*kgo.Record, len(again))
	at := make(map[*kgo.Record]int, len(again))
	for j, i := range again {
		r := recs[i]
		retry[j] = &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: r.Headers,
			Partition: orig[i].partition, Timestamp: orig[i].timestamp}
		at[retry[j]] = i
	}
	for _, pr := range cl.ProduceSync(ctx, retry...) {
		res.errs[at[pr.Record]] = pr.Err
	}
	return res
}
