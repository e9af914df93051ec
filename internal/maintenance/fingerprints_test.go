package maintenance_test

import (
	"context"
	"testing"

	"github.com/redrive/redrive/internal/fingerprint"
	"github.com/redrive/redrive/internal/maintenance"
	"github.com/redrive/redrive/internal/store"
)

// Records stored before fingerprints existed (fingerprint ”) get the one of
// their latest error, and their incidents are listed with them.
func TestBackfillFingerprintsOlderRecords(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	var rs []rec
	for range 1500 { // more than one backfill batch
		rs = append(rs, deadLetter("orders", t0))
	}
	rs = append(rs, rec{queue: "billing", state: "discarded", exhaustion: "dead_letter", at: t0, errorType: "smtp.down"})
	ids := b.insert(t, rs...)
	maintenance.BackfillFingerprints(ctx, b.store, nil)

	want := fingerprint.Of("db.timeout", "second", nil)
	r, err := b.store.Get(ctx, ids[0])
	if err != nil || r.Fingerprint != want {
		t.Fatalf("fingerprint %q, %v; want the latest error's %q", r.Fingerprint, err, want)
	}
	if left, err := b.store.Unfingerprinted(ctx, 1); err != nil || len(left) != 0 {
		t.Fatalf("%d records left without a fingerprint, %v", len(left), err)
	}
	if err := b.store.CompactCounts(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := b.store.ListIncidents(ctx, &store.IncidentParams{Sort: store.IncidentSortCount})
	if err != nil || len(list) != 2 || list[0].ID != want || list[0].Count != 1500 || list[1].Count != 1 {
		t.Fatalf("incidents %+v, %v", list, err)
	}
}
