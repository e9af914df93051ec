package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/redrive/redrive/internal/fingerprint"
	"github.com/redrive/redrive/internal/store"
)

// backfillBatch is how many records one backfill step fingerprints.
const backfillBatch = 1000

// BackfillFingerprints fingerprints the records stored before fingerprints
// existed, a batch at a time, and records their incidents (without
// incident.opened events: those failures are not new). It returns when none
// is left or ctx ends; a failed batch is tried again after a pause.
func BackfillFingerprints(ctx context.Context, st *store.Store, log *slog.Logger) {
	log = orLogger(log).With("component", "fingerprints")
	done := 0
	for ctx.Err() == nil {
		n, err := backfillOnce(ctx, st)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("fingerprint older records", "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
			}
			continue
		}
		done += n
		if n < backfillBatch {
			if done > 0 {
				log.Info("fingerprinted records stored before incidents existed", "records", done)
			}
			return
		}
	}
}

func backfillOnce(ctx context.Context, st *store.Store) (int, error) {
	recs, err := st.Unfingerprinted(ctx, backfillBatch)
	if err != nil || len(recs) == 0 {
		return 0, err
	}
	ids, fps := make([]string, len(recs)), make([]string, len(recs))
	seen := make([]store.IncidentSeen, len(recs))
	for i, r := range recs {
		ids[i], fps[i] = r.ID, fingerprint.Of(r.Last.Type, r.Last.Message, r.Last.Backtrace)
		seen[i] = store.IncidentSeen{Fingerprint: fps[i], ErrorType: r.Last.Type, Signature: fingerprint.Normalize(r.Last.Message),
			Queue: r.Queue, SeenAt: r.Last.OccurredAt, SampleID: r.ID, SampleMessage: r.Last.Message}
	}
	// The incidents first: a record never points at an incident that is not there.
	if _, err := st.RecordIncidents(ctx, seen); err != nil {
		return 0, err
	}
	return len(recs), st.SetFingerprints(ctx, ids, fps)
}
