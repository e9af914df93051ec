package maintenance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redrive/redrive/internal/clock"
	"github.com/redrive/redrive/internal/fingerprint"
	"github.com/redrive/redrive/internal/service"
	"github.com/redrive/redrive/internal/store"
)

// backfillBatch is how many records one backfill step fingerprints.
const backfillBatch = 1000

// oldIncidentsPage is how many incidents of older rules are drained
// together.
const oldIncidentsPage = 200

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
// again every Retry, in case the holder dies). It works in batches of
// backfillBatch records, each a short statement, so ingest never waits long
// on it; what is left to do is in the data (records without a fingerprint,
// or with one of an older rules' incident), so a restart resumes where it
// stopped. It publishes no incident.opened: those failures are not new.
//
// It is a service.Service whose work ends when nothing is left.
type FingerprintBackfill struct {
	service.Base
	loop *service.Loop
}

// BackfillConfig configures the backfills (FingerprintBackfill,
// FailedAtFill). Zero fields take the defaults noted.
type BackfillConfig struct {
	// Store is required.
	Store *store.Store
	// Retry is the wait after a failed step, and before trying again to take
	// over from another replica. Default 10 s.
	Retry time.Duration
	// Clock is what the waits are on. Default: clock.Wall.
	Clock  clock.Clock
	Logger *slog.Logger
}

func (c BackfillConfig) withDefaults() BackfillConfig {
	c.Retry = positiveOr(c.Retry, 10*time.Second)
	c.Clock = clock.Or(c.Clock)
	c.Logger = orLogger(c.Logger)
	return c
}

// NewFingerprintBackfill returns the backfill; Start it, or Run it to the end.
func NewFingerprintBackfill(cfg BackfillConfig) *FingerprintBackfill {
	cfg = cfg.withDefaults()
	st, log := cfg.Store, cfg.Logger.With("component", "fingerprints")
	return &FingerprintBackfill{loop: &service.Loop{Clock: cfg.Clock, Logger: log, What: "fingerprint stored records",
		Interval: cfg.Retry, Pass: func(ctx context.Context) (service.Next, error) {
			lock, ok, err := st.TryAdvisoryLock(ctx, lockFingerprints)
			if err != nil {
				return service.Next{}, err
			}
			if !ok {
				log.Debug("another replica is fingerprinting stored records; trying again later", "retry_in", cfg.Retry)
				return service.Next{}, nil
			}
			done, err := backfill(ctx, st)
			lock.Release()
			if err != nil {
				return service.Next{}, err
			}
			if done.records > 0 {
				log.Info("fingerprinted stored records under the current rules", "rules_version", fingerprint.Version,
					"records", done.records, "incidents_of_older_rules", done.oldIncidents)
			} else if done.oldIncidents > 0 {
				log.Debug("incidents of older rules have no records left", "incidents", done.oldIncidents)
			}
			return service.Next{Done: true}, nil
		}}}
}

// Name implements service.Service.
func (b *FingerprintBackfill) Name() string { return "fingerprints" }

// Start runs the backfill in the background.
func (b *FingerprintBackfill) Start(ctx context.Context) error { return b.Go(ctx, b.Run) }

// Run does the backfill and returns when nothing is left or ctx ends.
func (b *FingerprintBackfill) Run(ctx context.Context) error { return b.loop.Run(ctx) }

type backfillCounts struct{ records, oldIncidents int }

func backfill(ctx context.Context, st *store.Store) (backfillCounts, error) {
	var done backfillCounts
	// Records stored before fingerprints existed.
	for {
		recs, err := st.Unfingerprinted(ctx, backfillBatch)
		if err != nil {
			return done, err
		}
		if _, err := refingerprint(ctx, st, recs); err != nil {
			return done, err
		}
		done.records += len(recs)
		if len(recs) < backfillBatch {
			break
		}
	}
	// Records of incidents recorded under older rules, a page of incidents
	// at a time (the first rules made one incident per id, so there may be
	// as many as records).
	after := ""
	for {
		olds, err := st.IncidentsBefore(ctx, fingerprint.Version, after, oldIncidentsPage)
		if err != nil {
			return done, err
		}
		if len(olds) == 0 {
			return done, nil
		}
		n, err := drainIncidents(ctx, st, olds)
		if err != nil {
			return done, err
		}
		done.records += n
		done.oldIncidents += len(olds)
		after = olds[len(olds)-1].Fingerprint
	}
}

// drainIncidents fingerprints the records of incidents of older rules under
// the current ones, a batch at a time, and then notes those incidents done.
// An old incident whose records all went to one incident hands it its first
// and last seen and its activity. (After a restart in the middle of a page,
// "all" are the records left then.)
func drainIncidents(ctx context.Context, st *store.Store, olds []store.OldIncident) (int, error) {
	fps := make([]string, len(olds))
	into := make(map[string]map[string]bool, len(olds)) // old fingerprint → the new ones its records got
	for i, o := range olds {
		fps[i] = o.Fingerprint
		into[o.Fingerprint] = map[string]bool{}
	}
	n, afterFP, afterID := 0, "", ""
	for {
		recs, err := st.RecordsOf(ctx, fps, afterFP, afterID, backfillBatch)
		if err != nil {
			return n, err
		}
		got, err := refingerprint(ctx, st, recs)
		if err != nil {
			return n, err
		}
		for i, r := range recs {
			into[r.Fingerprint][got[i]] = true
		}
		n += len(recs)
		if len(recs) < backfillBatch {
			break
		}
		afterFP, afterID = recs[len(recs)-1].Fingerprint, recs[len(recs)-1].ID
	}
	for _, o := range olds {
		if len(into[o.Fingerprint]) == 1 {
			for fp := range into[o.Fingerprint] {
				if err := st.MergeIncident(ctx, o, fp); err != nil {
					return n, err
				}
			}
		}
	}
	return n, st.MarkRefingerprinted(ctx, fps)
}

// refingerprint gives records the fingerprints of their latest errors,
// where they still have the fingerprint they were read with, and records
// those incidents first: a record never points at an incident that is not
// there. It returns the fingerprints given, in the records' order.
func refingerprint(ctx context.Context, st *store.Store, recs []store.Unfingerprinted) ([]string, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	ids, fps, from := make([]string, len(recs)), make([]string, len(recs)), make([]string, len(recs))
	seen := make([]store.IncidentSeen, len(recs))
	for i, r := range recs {
		ids[i], fps[i], from[i] = r.ID, fingerprint.Of(r.Last.Type, r.Last.Message, r.Last.Backtrace), r.Fingerprint
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
