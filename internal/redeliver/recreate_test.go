package redeliver_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/redeliver"
)

// TestRecreatedSourceTopicGetsItsRedeliveries: a source topic deleted and
// created again while the scheduler runs (its client knew the old topic) gets
// every later redelivery, at once: none fails, none waits for a restart.
func TestRecreatedSourceTopicGetsItsRedeliveries(t *testing.T) {
	b := setup(t, "orders")
	ctx := context.Background()
	// Metadata is refreshed on errors at most every MetadataMinAge (5s by
	// default): that is how soon a client notices the recreation.
	s := b.scheduler(t, nil, func(c *redeliver.Config) {
		c.ClientOpts = append(c.ClientOpts, kgo.MetadataMinAge(100*time.Millisecond))
	})
	b.due(t, "orders", 10)
	if n, err := s.RunOnce(ctx); err != nil || n != 10 {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}

	kafkatest.Recreate(t, b.brokers, "orders", 2)
	after := b.due(t, "orders", 20)
	if n, err := s.RunOnce(ctx); err != nil || n != 20 {
		t.Fatalf("RunOnce after the recreation = %d, %v", n, err)
	}
	for _, rec := range after {
		r, err := b.store.Get(ctx, rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != dlq.StateCompleted || r.RedeliveryFailure != nil {
			t.Fatalf("record %s after the recreation: %s, failure %+v; want redelivered", r.ID, r.State, r.RedeliveryFailure)
		}
	}
	var got []string
	for _, r := range kafkatest.Consume(t, b.brokers, "orders", len(after), 10*time.Second) {
		got = append(got, header(r, "redrive.id"))
	}
	for _, rec := range after {
		if !slices.Contains(got, rec.ID) {
			t.Fatalf("record %s is not on the new orders topic (it holds %d records)", rec.ID, len(got))
		}
	}
}

// TestRecreatedArchiveTopicGetsItsCopiesAgain: the copies on an archive topic
// that is deleted and created again are gone with it. Before the pruner
// deletes their records, the copies are made due again; the archiver makes
// them on the new topic, and only then are the records pruned.
func TestRecreatedArchiveTopicGetsItsCopiesAgain(t *testing.T) {
	const archiveTopic = dlqTopic + ".archive"
	b := setup(t)
	ctx := context.Background()
	var dead []dlq.Record
	for range 5 {
		dead = append(dead, b.discardedWith(t, "orders", []byte(`{"n":1}`)))
	}
	a := b.archiver(t, func(c *redeliver.ArchiverConfig) {
		c.DLQTopics = []string{dlqTopic}
		c.ClientOpts = append(c.ClientOpts, kgo.MetadataMinAge(100*time.Millisecond)) // see above
	})
	if n, err := a.RunOnce(ctx); err != nil || n != len(dead) {
		t.Fatalf("archiver RunOnce = %d, %v", n, err)
	}

	kafkatest.Recreate(t, b.brokers, archiveTopic, 1) // the 5 copies are gone

	set := policies(t, "topics:\n  orders:\n    dead_letter: {retention: {max_age: PT1H}}\n")
	p := b.pruner(t, a, set)
	b.clock.Advance(2 * time.Hour) // every dead letter is past its retention
	if res, err := p.RunOnce(ctx); err != nil || res.Total() != 0 {
		t.Fatalf("prune after the recreation = %+v, %v; want nothing pruned: the copies are gone", res, err)
	}
	for _, d := range dead {
		r, err := b.store.Get(ctx, d.ID)
		if err != nil {
			t.Fatalf("record %s: %v", d.ID, err)
		}
		if r.Archive == nil || r.Archive.State != dlq.ArchivePending || r.ArchivedAt != nil {
			t.Fatalf("record %s archive %+v archived_at %v, want its copy due again", d.ID, r.Archive, r.ArchivedAt)
		}
	}

	if n, err := a.RunOnce(ctx); err != nil || n != len(dead) {
		t.Fatalf("archiver RunOnce after the recreation = %d, %v", n, err)
	}
	var got []string
	for _, r := range kafkatest.Consume(t, b.brokers, archiveTopic, len(dead), 10*time.Second) {
		got = append(got, header(r, "redrive.id"))
	}
	for _, d := range dead {
		if !slices.Contains(got, d.ID) {
			t.Fatalf("record %s has no copy on the new archive topic (%v)", d.ID, got)
		}
	}
	if res, err := p.RunOnce(ctx); err != nil || res.Total() != int64(len(dead)) {
		t.Fatalf("prune once the copies exist = %+v, %v; want all %d pruned", res, err, len(dead))
	}
}

// TestPrunerKeepsEverythingWhileAnArchiveTopicIsMissing: with the archive
// topic deleted (and not created again), whether the copies on it exist
// cannot be known: the pruner deletes nothing and says why.
func TestPrunerKeepsEverythingWhileAnArchiveTopicIsMissing(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	d := b.discardedWith(t, "orders", []byte(`{"n":1}`))
	a := b.archiver(t, func(c *redeliver.ArchiverConfig) { c.DLQTopics = []string{dlqTopic} })
	if n, err := a.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("archiver RunOnce = %d, %v", n, err)
	}
	adm := kafkatest.Client(t, b.brokers)
	if _, err := kadmDelete(ctx, adm, dlqTopic+".archive"); err != nil {
		t.Fatal(err)
	}
	set := policies(t, "topics:\n  orders:\n    dead_letter: {retention: {max_age: PT1H}}\n")
	p := b.pruner(t, a, set)
	b.clock.Advance(2 * time.Hour)
	if res, err := p.RunOnce(ctx); err == nil || res.Total() != 0 {
		t.Fatalf("prune = %+v, %v; want an error and nothing pruned", res, err)
	}
	if _, err := b.store.Get(ctx, d.ID); err != nil {
		t.Fatalf("record %s was pruned while its archive topic is missing: %v", d.ID, err)
	}
}

// kadmDelete deletes topic.
func kadmDelete(ctx context.Context, cl *kgo.Client, topic string) (kadm.DeleteTopicResponse, error) {
	r, err := kadm.NewClient(cl).DeleteTopic(ctx, topic)
	if err == nil {
		err = r.Err
	}
	return r, err
}

// TestPrunerPrunesWhileAnArchiveTopicNeverSeenIsMissing: an archive topic
// that does not exist yet and never did (a first start, before serve has
// created it) holds no copies to lose: the pruner goes on.
func TestPrunerPrunesWhileAnArchiveTopicNeverSeenIsMissing(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	adm := kafkatest.Client(t, b.brokers)
	if _, err := kadmDelete(ctx, adm, dlqTopic+".archive"); err != nil {
		t.Fatal(err)
	}
	b.discardedWith(t, "orders", []byte(`{"n":1}`))
	a := b.archiver(t, func(c *redeliver.ArchiverConfig) { c.DLQTopics = []string{dlqTopic} })
	set := policies(t, "topics:\n  orders:\n    dead_letter: {retention: {max_age: PT1H}}\n    pruning_policy: delete\n")
	p := b.pruner(t, a, set)
	if err := a.CheckTopics(ctx); err != nil {
		t.Fatalf("CheckTopics with an archive topic never seen = %v, want nil", err)
	}
	b.clock.Advance(2 * time.Hour)
	if _, err := p.RunOnce(ctx); err != nil {
		t.Fatalf("prune = %v, want no error", err)
	}
}

// pruner is a Pruner over the bundle's store and clock, with the policies of
// set, that makes sure of a's archive copies before each pass.
func (b *bundle) pruner(t *testing.T, a *redeliver.Archiver, set *policy.Set) *maintenance.Pruner {
	t.Helper()
	p, err := maintenance.NewPruner(maintenance.PrunerConfig{Archiving: true, CheckArchive: a.CheckTopics,
		Deps: maintenance.Deps{Store: b.store, Clock: b.clock, Policy: func(q string) policy.Topic { return set.Resolve(q, "") }}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
