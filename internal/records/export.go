package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/fingerprint"
	"github.com/redrive/redrive/internal/store"
)

// Export and import move records between environments (docs/api.md,
// "Export and import"): an export reads whole records oldest first, a few
// megabytes at a time (ExportReader); an import stores records exported by
// another Redrive, keeping their identity, in the state the importer chose.

// ExportReader reads the records of an export: the records matching its
// filter, oldest first, whole, at most GroupBytes of them at a time (a
// record larger than that alone), so that an export holds a few megabytes
// whatever the size of its records. The export is not a snapshot: each
// group is read as the records are then.
type ExportReader struct {
	g groupReader
}

// ExportPageRecords is how many records' ids and sizes an export reads at a
// time (store.ExportSizes), before reading them whole a group at a time.
const ExportPageRecords = 200

// Export starts reading the records matching f narrowed by sc.
func (s *Service) Export(f *filter.Filter, sc filter.Scope) *ExportReader {
	return &ExportReader{g: groupReader{
		sizes: func(ctx context.Context, after string, limit int) ([]store.RecordSize, error) {
			return s.store.ExportSizes(ctx, f, sc, after, limit)
		},
		read: func(ctx context.Context, ids []string) ([]dlq.Record, error) {
			return s.store.ExportRecords(ctx, f, sc, ids)
		},
		page: ExportPageRecords, maxBytes: GroupBytes,
	}}
}

// Next reads the next group of records; none (nil) at the end.
func (e *ExportReader) Next(ctx context.Context) ([]dlq.Record, error) {
	return e.g.next(ctx)
}

// Bounds of concurrent exports (Config.Exports): each holds a few megabytes
// and its client's connection, and reads Postgres, for as long as its
// client reads.
const (
	DefaultExportsMax         = 4
	DefaultExportsMaxPerOwner = 2
)

// ExportSlots caps the exports running at once, in total and per owner (an
// API key, or with authentication off a client's address).
type ExportSlots struct {
	max, perOwner int
	mu            sync.Mutex
	running       int
	owners        map[string]int
}

// NewExportSlots allows total exports at once, perOwner of them one
// owner's (0 or less: DefaultExportsMax, DefaultExportsMaxPerOwner).
func NewExportSlots(total, perOwner int) *ExportSlots {
	if total <= 0 {
		total = DefaultExportsMax
	}
	if perOwner <= 0 {
		perOwner = DefaultExportsMaxPerOwner
	}
	return &ExportSlots{max: total, perOwner: perOwner, owners: map[string]int{}}
}

// ExportLimitError is an export refused because the most exports allowed
// are running.
type ExportLimitError struct {
	// PerOwner is true when the owner's cap was hit, false for the total one.
	PerOwner bool
	// Limit is the cap that was hit.
	Limit int
}

func (e *ExportLimitError) Error() string {
	if e.PerOwner {
		return fmt.Sprintf("too many exports: this key (or client) already has %d running, the most allowed", e.Limit)
	}
	return fmt.Sprintf("too many exports: the server already runs %d, the most allowed", e.Limit)
}

// BeginExport takes a place for an export of owner, or refuses it with an
// *ExportLimitError. release gives the place back (once; later calls do
// nothing).
func (s *Service) BeginExport(owner string) (release func(), err error) {
	x := s.cfg.Exports
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case x.running >= x.max:
		return nil, &ExportLimitError{Limit: x.max}
	case x.owners[owner] >= x.perOwner:
		return nil, &ExportLimitError{PerOwner: true, Limit: x.perOwner}
	}
	x.running++
	x.owners[owner]++
	var once sync.Once
	return func() {
		once.Do(func() {
			x.mu.Lock()
			defer x.mu.Unlock()
			x.running--
			if x.owners[owner]--; x.owners[owner] <= 0 {
				delete(x.owners, owner)
			}
		})
	}, nil
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

// ErrRecordRefused wraps an import's error when Postgres refused a record
// for what it holds (a value out of range, a check failed): the client's
// to fix, not the backend being unavailable. Nothing was imported.
var ErrRecordRefused = errors.New("a record was refused by Postgres")

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
	if err != nil && store.IsRowFault(err) {
		return res, fmt.Errorf("%w: %w", ErrRecordRefused, err)
	}
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
