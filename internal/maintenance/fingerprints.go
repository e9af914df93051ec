package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redrive/redrive/internal/fingerprint"
	"github.com/redrive/redrive/internal/store"
)

// backfillBatch is how many records one backfill step fingerprints.
const backfillBatch = 1000

// oldIncidentsPage is how many incidents of older rules one step lists.
const oldIncidentsPage = 200

// lockRetry is how long (in nanoseconds) a replica waits before trying
// again to take the fingerprint backfill over from another (which may have
// died), and after a failed step.
var lockRetry atomic.Int64

func init() { lockRetry.Store(int64(10 * time.Second)) }

// BackfillFingerprints brings every stored record to the current
// fingerprint rules (fingerprint.Version): records stored before
// fingerprints existed, and records whose incident was recorded under older
// rules (those rules split one failure into many incidents, or merged two).
// Each record gets the fingerprint of its latest error under the current
// rules, and joins that incident with the records ingest stores now; the
// statistics follow the records (counts by their triggers; first and last
// seen, and the activity history, from an old incident whose records all
// went to one new one).
//
// One replica does it at a time (a Postgres advisory lock; the others try
// again every lockRetry, in case the holder dies). It works in batches of
// backfillBatch records, each a short statement, so ingest never waits long
// on it; what is left to do is in the data (records without a fingerprint,
// or with one of an older rules' incident), so a restart resumes where it
// stopped. It publishes no incident.opened: those failures are not new. It
// returns when nothing is left or ctx ends.
func BackfillFingerprints(ctx context.Context, st *store.Store, log *slog.Logger) {
	log = orLogger(log).With("component", "fingerprints")
	for ctx.Err() == nil {
		lock, ok, err := st.TryAdvisoryLock(ctx, lockFingerprints)
		if err == nil && !ok {
			log.Debug("another replica is fingerprinting stored records; trying again later",
				"retry_in", time.Duration(lockRetry.Load()))
		}
		if ok {
			var done backfillCounts
			done, err = backfill(ctx, st)
			lock.Release()
			if err == nil {
				if done.records > 0 {
					log.Info("fingerprinted stored records under the current rules", "rules_version", fingerprint.Version,
						"records", done.records, "incidents_of_older_rules", done.oldIncidents)
				}
				return
			}
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("fingerprint stored records", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(lockRetry.Load())):
		}
	}
}

type backfillCounts struct{ records, oldIncidents int }

func backfill(ctx context.Context, st *store.Store) (backfillCounts, error) {
	var done backfillCounts
	// Records stored before fingerprints existed.
	for {
		recs, err := st.Unfingerprinted(ctx, backfillBatch)
		if err != nil {
			return done, err
		}
		if _, err := refingerprint(ctx, st, recs, ""); err != nil {
			return done, err
		}
		done.records += len(recs)
		if len(recs) < backfillBatch {
			break
		}
	}
	// Records of incidents recorded under older rules, incident by incident.
	after := ""
	for {
		olds, err := st.IncidentsBefore(ctx, fingerprint.Version, after, oldIncidentsPage)
		if err != nil {
			return done, err
		}
		for _, o := range olds {
			n, err := drainIncident(ctx, st, o)
			if err != nil {
				return done, err
			}
			if n > 0 {
				done.records += n
				done.oldIncidents++
			}
		}
		if len(olds) < oldIncidentsPage {
			return done, nil
		}
		after = olds[len(olds)-1].Fingerprint
	}
}

// drainIncident fingerprints the records of an incident of older rules
// under the current ones, a batch at a time. When they all went to one
// incident, that one takes the old one's first and last seen and activity.
// (After a restart in the middle of an incident, "all" are the records left
// then.)
func drainIncident(ctx context.Context, st *store.Store, old store.OldIncident) (int, error) {
	into := map[string]bool{}
	n, after := 0, ""
	for {
		recs, err := st.RecordsOf(ctx, old.Fingerprint, after, backfillBatch)
		if err != nil {
			return n, err
		}
		fps, err := refingerprint(ctx, st, recs, old.Fingerprint)
		if err != nil {
			return n, err
		}
		for _, fp := range fps {
			into[fp] = true
		}
		n += len(recs)
		if len(recs) < backfillBatch {
			break
		}
		after = recs[len(recs)-1].ID
	}
	if len(into) == 1 {
		for fp := range into {
			if err := st.MergeIncident(ctx, old, fp); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// refingerprint gives records the fingerprints of their latest errors,
// where they still have the fingerprint from, and records those incidents
// first: a record never points at an incident that is not there. It
// returns the fingerprints given.
func refingerprint(ctx context.Context, st *store.Store, recs []store.Unfingerprinted, from string) ([]string, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	ids, fps := make([]string, len(recs)), make([]string, len(recs))
	seen := make([]store.IncidentSeen, len(recs))
	for i, r := range recs {
		ids[i], fps[i] = r.ID, fingerprint.Of(r.Last.Type, r.Last.Message, r.Last.Backtrace)
		seen[i] = store.IncidentSeen{Fingerprint: fps[i], ErrorType: r.Last.Type, Signature: fingerprint.Normalize(r.Last.Message),
			Frames: fingerprint.TopFrames(r.Last.Backtrace), Queue: r.Queue, SeenAt: r.Last.OccurredAt,
			SampleID: r.ID, SampleMessage: r.Last.Message}
	}
	if _, err := st.RecordIncidents(ctx, seen); err != nil {
		return nil, err
	}
	if err := st.SetFingerprints(ctx, ids, fps, from); err != nil {
		return nil, fmt.Errorf("fingerprint %d records: %w", len(ids), err)
	}
	return fps, nil
}
