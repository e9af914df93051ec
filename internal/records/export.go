package records

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/fingerprint"
	"github.com/redrive/redrive/internal/store"
)

// Export and import move records between environments (docs/api.md,
// "Export and import"): an export reads whole records page by page, oldest
// first; an import stores records exported by another Redrive, keeping
// their identity, in the state the importer chose.

// ExportPage reads up to limit whole records matching f, oldest first, after
// the record afterID ("": from the first).
func (s *Service) ExportPage(ctx context.Context, f *filter.Filter, sc filter.Scope, afterID string, limit int) ([]dlq.Record, error) {
	return s.store.ExportPage(ctx, f, sc, afterID, limit)
}

// ImportResult counts what an import did (store.ImportResult).
type ImportResult = store.ImportResult

// ImportStates are the states an imported record may land in.
var ImportStates = []dlq.State{dlq.StateDiscarded, dlq.StateRetryable}

// ImportRefusal says why a record cannot be imported in the state asked
// for; Field names the record's field at fault.
type ImportRefusal struct {
	Field, Msg string
}

func (e *ImportRefusal) Error() string { return e.Field + ": " + e.Msg }

// PrepareImport makes r, as another Redrive exported it, the record this
// one stores, in state (one of ImportStates) at now:
//   - discarded: kept for an operator, as a dead letter (or as the discard
//     or cancelled record it was), discarded now;
//   - retryable: scheduled by this environment's policy for its queue and
//     type, as ingest would have (max_attempts and the retry policy are
//     this environment's; the next retry is the policy's delay for the
//     record's attempt, from now). A record with no topic to go back to
//     (unparseable, of a reserved queue) or a worker job (format ojs) is
//     refused: it could only be imported discarded.
//
// Its id, queue, type, key, value, headers, source, DLQ coordinates, error
// history, meta, schema references and created_at are kept; what belongs to
// the other environment's processing (a pending redelivery edit, the
// redelivery and archive history, completion) is not. Its incident is
// computed here, from its latest error.
func (s *Service) PrepareImport(r *dlq.Record, state dlq.State, now time.Time) error {
	now = now.UTC()
	r.UpdatedAt = now
	r.EnqueuedAt, r.NextRetryAt, r.DiscardedAt, r.CompletedAt = nil, nil, nil, nil
	r.CompletedBy, r.AckDueAt, r.UnacknowledgedAt, r.RedeliveredAt = "", nil, nil, nil
	r.Redelivery, r.RedeliveryFailure, r.Archive, r.ArchivedAt, r.InFlight = nil, nil, nil, nil, false
	if last := r.LastError(); len(r.Errors) > 0 {
		r.Fingerprint = fingerprint.Of(last.Type, last.Message, last.Backtrace)
	} else {
		r.Fingerprint = ""
	}
	switch state {
	case dlq.StateRetryable:
		if r.Format == dlq.FormatOJS {
			return &ImportRefusal{Field: "format", Msg: "a worker job (format ojs) is fetched by workers, never scheduled: import it with state=discarded"}
		}
		if why := s.noRoute(r, ""); why != "" {
			return &ImportRefusal{Field: "queue", Msg: "the record has no topic to go back to (its queue " + quote(r.Queue) + " " + why +
				"): import it with state=discarded"}
		}
		t := s.cfg.Queues.Resolve(r.Queue, r.Type)
		retry, err := json.Marshal(t.Retry)
		if err != nil {
			return err
		}
		next := now.Add(t.Retry.Delay(max(r.Attempt, 1), rand.Float64()))
		r.State, r.Exhaustion, r.MaxAttempts, r.Retry, r.NextRetryAt = dlq.StateRetryable, "", t.Retry.MaxAttempts, retry, &next
	default:
		if r.State != dlq.StateDiscarded || !r.Exhaustion.Kept() {
			r.Exhaustion = dlq.ExhaustionDeadLetter
		}
		r.State, r.DiscardedAt = dlq.StateDiscarded, &now
	}
	return nil
}

// Import stores records another Redrive exported, all or nothing
// (store.ImportRecords): next gives batches of records made ready by
// PrepareImport, and nil at the end. Then the incidents of the records are
// noted, as ingest notes those of the failures it stores (so that the
// incident list shows them; no incident.opened: they are not new
// failures), and retryable records wake the scheduler.
func (s *Service) Import(ctx context.Context, next func() ([]dlq.Record, error)) (ImportResult, error) {
	seen := map[string]store.IncidentSeen{}
	res, err := s.store.ImportRecords(ctx, func() ([]dlq.Record, error) {
		batch, err := next()
		for i := range batch {
			noteIncident(seen, &batch[i])
		}
		return batch, err
	})
	if err != nil {
		return res, err
	}
	if len(seen) > 0 {
		incidents := make([]store.IncidentSeen, 0, len(seen))
		for _, in := range seen {
			incidents = append(incidents, in)
		}
		if _, err := s.store.RecordIncidents(ctx, incidents); err != nil {
			// The records are stored; their incidents are noted again by
			// the next import of them.
			s.log.Error("import: noting the incidents of the imported records failed", "incidents", len(incidents), "err", err)
		}
	}
	if res.Imported > 0 {
		s.cfg.Wake()
	}
	return res, nil
}

// noteIncident notes the incident of r's latest error in seen: one sample
// per incident, seen when its latest failure happened.
func noteIncident(seen map[string]store.IncidentSeen, r *dlq.Record) {
	if r.Fingerprint == "" {
		return
	}
	last := r.LastError()
	if in, ok := seen[r.Fingerprint]; ok {
		if last.OccurredAt.After(in.SeenAt) {
			in.SeenAt = last.OccurredAt
			seen[r.Fingerprint] = in
		}
		return
	}
	seen[r.Fingerprint] = store.IncidentSeen{Fingerprint: r.Fingerprint, ErrorType: last.Type,
		Signature: fingerprint.Normalize(last.Message), Frames: fingerprint.TopFrames(last.Backtrace),
		Queue: r.Queue, SeenAt: last.OccurredAt, SampleID: r.ID, SampleMessage: last.Message}
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
