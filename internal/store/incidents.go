package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/fingerprint"
	"github.com/redrive/redrive/internal/store/internal/dbsqlc"
)

// IncidentSeen is a fingerprint met in a batch of failures, with one record
// of it as the sample.
type IncidentSeen struct {
	Fingerprint   string
	ErrorType     string
	Signature     string
	Queue         string
	SeenAt        time.Time
	SampleID      string
	SampleMessage string
	// Frames are the top backtrace frames as the fingerprint reads them
	// (fingerprint.TopFrames).
	Frames []string
	// ArrivedAt is when the failure reached Redrive (ingest's clock); zero
	// for a record fingerprinted again, which is no new failure.
	ArrivedAt time.Time
}

// RecordIncidents notes the fingerprints a batch of failures had: a new one
// opens an incident, recorded under the current fingerprint rules
// (fingerprint.Version); a known one moves its first_seen back or its
// last_seen on. It returns the incidents this call opened. Idempotent, so a
// batch consumed again opens nothing twice (an incident whose opening
// statement was lost to a crash is opened when the batch comes again).
func (s *Store) RecordIncidents(ctx context.Context, seen []IncidentSeen) ([]IncidentSeen, error) {
	if len(seen) == 0 {
		return nil, nil
	}
	// One row per fingerprint: ON CONFLICT cannot touch a row twice.
	byFP := map[string]int{}
	var uniq []IncidentSeen
	for _, in := range seen {
		if i, ok := byFP[in.Fingerprint]; ok {
			if in.SeenAt.After(uniq[i].SeenAt) {
				uniq[i].SeenAt = in.SeenAt
			}
			if in.ArrivedAt.After(uniq[i].ArrivedAt) {
				uniq[i].ArrivedAt = in.ArrivedAt
			}
			continue
		}
		byFP[in.Fingerprint] = len(uniq)
		uniq = append(uniq, in)
	}
	n := len(uniq)
	fps, types, sigs, ids, msgs := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	frames := make([]string, n)
	first, last := make([]time.Time, n), make([]time.Time, n)
	arrived := make([]*time.Time, n)
	for i, in := range uniq {
		fps[i], types[i], sigs[i], ids[i], msgs[i], first[i], last[i] = in.Fingerprint, clean(in.ErrorType), clean(in.Signature),
			in.SampleID, clean(in.SampleMessage), in.SeenAt, in.SeenAt
		frames[i] = joinFrames(in.Frames)
		if !in.ArrivedAt.IsZero() {
			arrived[i] = &uniq[i].ArrivedAt
		}
	}
	for _, in := range seen { // the batch's earliest sight of each fingerprint
		if i := byFP[in.Fingerprint]; in.SeenAt.Before(first[i]) {
			first[i] = in.SeenAt
		}
	}
	rows, err := s.pool.Query(ctx, `
		INSERT INTO redrive_incident AS i (fingerprint, error_type, signature, first_seen, last_seen, sample_id, sample_message,
			frames, rules_version, last_arrived_at)
		SELECT f, t, s, fs, ls, id, m, CASE WHEN fr = '' THEN '{}' ELSE string_to_array(fr, E'\n') END, $9, a
		FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::uuid[], $7::text[], $8::text[],
			$10::timestamptz[]) AS u(f, t, s, fs, ls, id, m, fr, a)
		ON CONFLICT (fingerprint) DO UPDATE SET first_seen = least(i.first_seen, excluded.first_seen),
			last_seen = greatest(i.last_seen, excluded.last_seen),
			last_arrived_at = greatest(i.last_arrived_at, excluded.last_arrived_at)
		RETURNING fingerprint, xmax = 0`, fps, types, sigs, first, last, ids, msgs, frames, fingerprint.Version, arrived)
	if err != nil {
		return nil, fmt.Errorf("record incidents: %w", err)
	}
	var opened []IncidentSeen
	var fp string
	var inserted bool
	if _, err := pgx.ForEachRow(rows, []any{&fp, &inserted}, func() error {
		if inserted {
			opened = append(opened, uniq[byFP[fp]])
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("record incidents: %w", err)
	}
	return opened, nil
}

// joinFrames joins frames into one text for string_to_array (a frame that
// holds a newline has it as a space).
func joinFrames(frames []string) string {
	var b strings.Builder
	for i, f := range frames {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(strings.ReplaceAll(clean(f), "\n", " "))
	}
	return b.String()
}

// Incident is a group of failures with one fingerprint, with the records it
// has now.
type Incident struct {
	ID            string // the fingerprint
	ErrorType     string
	Signature     string
	Count         int64            // live records matching the listing's filters
	Queues        []string         // queues with live records of it
	States        map[string]int64 // live records by state
	FirstSeen     time.Time
	LastSeen      time.Time
	SampleID      string
	SampleMessage string
	// Frames are the top backtrace frames its fingerprint reads, without
	// line numbers; none for failures without a backtrace.
	Frames []string
}

// IncidentParams filters and sorts ListIncidents.
type IncidentParams struct {
	Queue string
	State string
	// Since keeps incidents last seen at or after it.
	Since time.Time
	// Sort is "count" (most records first) or "last_seen" (newest first).
	Sort  string
	Limit int
	// ID, when set, reads that incident alone, with or without live records.
	ID string
	// QueueGlobs, when non-nil, counts only the records of the queues
	// matching one (the caller's roles); an incident with none of them
	// is not listed.
	QueueGlobs []string
}

// Incident sorts.
const (
	IncidentSortCount    = "count"
	IncidentSortLastSeen = "last_seen"
)

// ListIncidents lists incidents with live records (records still stored),
// counted from the statistics table: a few hundred rows whatever the number
// of records.
func (s *Store) ListIncidents(ctx context.Context, p *IncidentParams) ([]Incident, error) {
	var since *time.Time
	if !p.Since.IsZero() {
		since = &p.Since
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	var likes []string
	if p.QueueGlobs != nil {
		likes = LikePatterns(p.QueueGlobs)
	}
	rows, err := s.q.IncidentList(ctx, s.pool, dbsqlc.IncidentListParams{Queue: p.Queue, State: p.State, Since: since,
		Sort: p.Sort, Max: int32(limit), ID: p.ID, QueueLikes: likes})
	if err != nil {
		return nil, fmt.Errorf("list incidents: %w", err)
	}
	out := make([]Incident, len(rows))
	for i, r := range rows {
		in := Incident{ID: r.Fingerprint, ErrorType: r.ErrorType, Signature: r.Signature, Count: r.Count, Queues: r.Queues,
			States: map[string]int64{}, FirstSeen: r.FirstSeen, LastSeen: r.LastSeen, SampleID: r.SampleID,
			SampleMessage: r.SampleMessage, Frames: r.Frames}
		if err := json.Unmarshal(r.States, &in.States); err != nil {
			return nil, fmt.Errorf("list incidents: decode incident states: %w", err)
		}
		slices.Sort(in.Queues)
		out[i] = in
	}
	return out, nil
}

// GetIncident returns one incident, or ErrNotFound.
func (s *Store) GetIncident(ctx context.Context, p *IncidentParams) (*Incident, error) {
	out, err := s.ListIncidents(ctx, &IncidentParams{ID: p.ID, Limit: 1, QueueGlobs: p.QueueGlobs})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, ErrNotFound
	}
	return &out[0], nil
}

// IncidentsPerQueue counts, per queue, the incidents with live records.
func (s *Store) IncidentsPerQueue(ctx context.Context) (map[string]int64, error) {
	rows, err := s.q.IncidentsPerQueue(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("incidents per queue: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Queue] = r.N
	}
	return out, nil
}

// Unfingerprinted is a record to fingerprint: stored before fingerprints
// existed, or under older fingerprint rules; with its fingerprint now ("" for
// none) and its latest error.
type Unfingerprinted struct {
	ID, Queue, Fingerprint string
	Last                   dlq.ErrorEntry
}

// unfingerprinted is a record to fingerprint as read: its latest error as
// JSON text ("" without errors).
func unfingerprinted(id, queue, fp, last string) (Unfingerprinted, error) {
	u := Unfingerprinted{ID: id, Queue: queue, Fingerprint: fp}
	if last == "" {
		return u, nil
	}
	if err := json.Unmarshal([]byte(last), &u.Last); err != nil {
		return u, fmt.Errorf("decode the latest error of %s: %w", u.ID, err)
	}
	return u, nil
}

// Unfingerprinted returns up to limit records without a fingerprint that
// have an error to take one from.
func (s *Store) Unfingerprinted(ctx context.Context, limit int) ([]Unfingerprinted, error) {
	rows, err := s.q.Unfingerprinted(ctx, s.pool, int32(limit))
	if err != nil {
		return nil, fmt.Errorf("records without a fingerprint: %w", err)
	}
	out := make([]Unfingerprinted, len(rows))
	for i, r := range rows {
		if out[i], err = unfingerprinted(r.ID, r.Queue, r.Fingerprint, r.Last); err != nil {
			return nil, fmt.Errorf("records without a fingerprint: %w", err)
		}
	}
	return out, nil
}

// OldIncident is an incident recorded under older fingerprint rules.
type OldIncident struct {
	Fingerprint         string
	FirstSeen, LastSeen time.Time
}

// IncidentsBefore returns up to limit incidents recorded under fingerprint
// rules older than version, by fingerprint after after, that may still have
// records: not marked done by MarkRefingerprinted, or seen again since (a
// replica of an older version, during a rolling upgrade). One pass over
// the primary key across the pages, however many incidents there are.
func (s *Store) IncidentsBefore(ctx context.Context, version int, after string, limit int) ([]OldIncident, error) {
	rows, err := s.q.IncidentsBefore(ctx, s.pool, after, int16(version), int32(limit))
	if err != nil {
		return nil, fmt.Errorf("incidents of older fingerprint rules: %w", err)
	}
	out := make([]OldIncident, len(rows))
	for i, r := range rows {
		out[i] = OldIncident{Fingerprint: r.Fingerprint, FirstSeen: r.FirstSeen, LastSeen: r.LastSeen}
	}
	return out, nil
}

// RecordsOf returns up to limit records whose fingerprint is one of fps,
// after the record (afterFP, afterID) in (fingerprint, id) order ("" and ""
// for the first): the (fingerprint, id) index.
func (s *Store) RecordsOf(ctx context.Context, fps []string, afterFP, afterID string, limit int) ([]Unfingerprinted, error) {
	if afterID == "" {
		afterID = "00000000-0000-0000-0000-000000000000"
	}
	rows, err := s.q.RecordsOfIncidents(ctx, s.pool, dbsqlc.RecordsOfIncidentsParams{Fingerprints: fps,
		AfterFingerprint: afterFP, AfterID: afterID, Max: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("records of incidents: %w", err)
	}
	out := make([]Unfingerprinted, len(rows))
	for i, r := range rows {
		if out[i], err = unfingerprinted(r.ID, r.Queue, r.Fingerprint, r.Last); err != nil {
			return nil, fmt.Errorf("records of incidents: %w", err)
		}
	}
	return out, nil
}

// SetFingerprints sets records' fingerprints where they still have the
// fingerprint from[i] ("" for none yet): ingest may have set a newer one
// meanwhile, from a repeat failure. The statistics table follows (its
// triggers count by fingerprint, from the lifecycle's copy, set in the same
// statement).
func (s *Store) SetFingerprints(ctx context.Context, ids, fingerprints, from []string) error {
	_, err := s.pool.Exec(ctx, `
		WITH l AS (
			UPDATE redrive_lifecycle l SET fingerprint = f.fp
			FROM unnest($1::uuid[], $2::text[], $3::text[]) AS f(id, fp, old) WHERE l.id = f.id AND l.fingerprint = f.old
			RETURNING l.id, l.fingerprint)
		UPDATE redrive_record_data d SET fingerprint = l.fingerprint FROM l WHERE d.id = l.id`,
		ids, fingerprints, from)
	if err != nil {
		return fmt.Errorf("set fingerprints: %w", err)
	}
	return nil
}

// MergeIncident carries an incident of older rules whose records all went
// to one incident of the current rules into it: first and last seen, and
// its activity (the chart's history).
func (s *Store) MergeIncident(ctx context.Context, old OldIncident, into string) error {
	_, err := s.pool.Exec(ctx, `
		WITH i AS (UPDATE redrive_incident SET first_seen = least(first_seen, $2), last_seen = greatest(last_seen, $3)
			WHERE fingerprint = $4)
		UPDATE redrive_queue_activity SET fingerprint = $4 WHERE fingerprint = $1`,
		old.Fingerprint, old.FirstSeen, old.LastSeen, into)
	if err != nil {
		return fmt.Errorf("merge incident %s into %s: %w", old.Fingerprint, into, err)
	}
	return nil
}

// MarkRefingerprinted notes that incidents of older rules have no records
// left, so that IncidentsBefore skips them until one is seen again.
func (s *Store) MarkRefingerprinted(ctx context.Context, fps []string) error {
	if err := s.q.IncidentsMarkRefingerprinted(ctx, s.pool, fps); err != nil {
		return fmt.Errorf("mark %d incidents fingerprinted again: %w", len(fps), err)
	}
	return nil
}
