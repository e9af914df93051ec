package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"

	"github.com/redrive/redrive/internal/store/internal/dbsqlc"
)

// What a preview listing (ListPreviews) reads of a record's parts that a
// producer or an operator sizes: Postgres cuts them, so a page of 1,000
// records of 1 MB each reads a few MB, not a GB. Each bound is in bytes of
// the original (or characters of stored text, which the API cuts to bytes).
const (
	// PreviewKeyBytes and PreviewValueBytes bound the key and value read.
	PreviewKeyBytes   = 1024
	PreviewValueBytes = 4096
	// PreviewHeaders is how many headers are read, the first ones, each key
	// cut to PreviewHeaderKeyBytes and each value to PreviewHeaderValueBytes.
	PreviewHeaders          = 20
	PreviewHeaderKeyBytes   = 128
	PreviewHeaderValueBytes = 256
	// Only the latest error is read, its type cut to PreviewErrorTypeBytes,
	// its message to PreviewMessageBytes, its backtrace to the first
	// PreviewBacktraceLines lines of at most PreviewBacktraceLineBytes,
	// its details left out ({}) when longer than PreviewDetailsBytes.
	PreviewErrorTypeBytes     = 256
	PreviewMessageBytes       = 1024
	PreviewBacktraceLines     = 10
	PreviewBacktraceLineBytes = 256
	PreviewDetailsBytes       = 1024
	// PreviewJSONBytes bounds retry and meta: longer ones read as {}.
	PreviewJSONBytes = 2048
	// PreviewRedeliveryBytes bounds an operator's pending edit (its value and
	// headers): a longer one reads as its target topic only.
	PreviewRedeliveryBytes = 4096
)

// RecordPreview is a record as a preview listing reads it: Key and Value
// are prefixes of at most PreviewKeyBytes and PreviewValueBytes; Headers the
// first PreviewHeaders, each key and value a prefix (a base64-encoded value
// decodes to at least PreviewHeaderValueBytes); Errors the latest error
// only, cut; Retry and Meta {} when longer than PreviewJSONBytes; Redelivery
// its topic only when longer than PreviewRedeliveryBytes. The rest says what
// was cut.
type RecordPreview struct {
	Record dlq.Record
	// KeySize and ValueSize are the bytes of the whole key and value; -1
	// for a null key or value.
	KeySize, ValueSize int
	// HeaderSizes are the bytes of each read header's whole key and value.
	HeaderSizes []HeaderSize
	// HeaderCount and ErrorCount are how many headers and errors the record has.
	HeaderCount, ErrorCount int
	// ErrorCut says the latest error's type, message, backtrace or details were cut.
	ErrorCut bool
	// RetryCut, MetaCut and RedeliveryCut say those were left out.
	RetryCut, MetaCut, RedeliveryCut bool
	// FirstErrorAt is when the oldest error kept happened (nil without errors).
	FirstErrorAt *time.Time
	// FailedAt is the record's failed_at (SortFailed's key); nil until the
	// background fill reaches a record stored before it existed.
	FailedAt *time.Time
}

// HeaderSize is the size of a whole header, in bytes.
type HeaderSize struct {
	Key   int `json:"key_size"`
	Value int `json:"value_size"`
}

// previewBounds writes the preview bounds into the constant text of the
// cutting expressions below (:name is the bound of that name).
var previewBounds = strings.NewReplacer(
	":key_bytes", strconv.Itoa(PreviewKeyBytes), ":value_bytes", strconv.Itoa(PreviewValueBytes),
	":headers", strconv.Itoa(PreviewHeaders), ":header_key_bytes", strconv.Itoa(PreviewHeaderKeyBytes),
	":header_value_bytes", strconv.Itoa(PreviewHeaderValueBytes),
	// base64: whole 4-character groups, so that the prefix decodes.
	":header_value_base64", strconv.Itoa((PreviewHeaderValueBytes+2)/3*4+4),
	":error_type_bytes", strconv.Itoa(PreviewErrorTypeBytes), ":message_bytes", strconv.Itoa(PreviewMessageBytes),
	":backtrace_lines", strconv.Itoa(PreviewBacktraceLines), ":backtrace_line_bytes", strconv.Itoa(PreviewBacktraceLineBytes),
	":details_bytes", strconv.Itoa(PreviewDetailsBytes), ":json_bytes", strconv.Itoa(PreviewJSONBytes),
	":redelivery_bytes", strconv.Itoa(PreviewRedeliveryBytes),
).Replace

// previewExpr replaces a column of readColumns with an expression that cuts it.
var previewExpr = map[string]string{
	"key":   previewBounds("substring(key from 1 for :key_bytes)"),
	"value": previewBounds("substring(value from 1 for :value_bytes)"),
	// The first headers, keys and values cut (base64: whole 4-character
	// groups, so the prefix decodes), with the sizes of the whole ones.
	"headers": previewBounds(`(SELECT coalesce(jsonb_agg(jsonb_build_object(
		'key', left(h->>'key', :header_key_bytes), 'key_encoding', h->'key_encoding',
		'value', CASE WHEN h->>'encoding' = 'base64' THEN left(h->>'value', :header_value_base64) ELSE left(h->>'value', :header_value_bytes) END,
		'encoding', h->>'encoding',
		'key_size', CASE WHEN h->>'key_encoding' = 'base64'
			THEN octet_length(h->>'key') / 4 * 3 - (CASE WHEN right(h->>'key', 2) = '==' THEN 2 WHEN right(h->>'key', 1) = '=' THEN 1 ELSE 0 END)
			ELSE octet_length(h->>'key') END,
		'value_size', CASE WHEN h->>'encoding' = 'base64'
			THEN octet_length(h->>'value') / 4 * 3 - (CASE WHEN right(h->>'value', 2) = '==' THEN 2 WHEN right(h->>'value', 1) = '=' THEN 1 ELSE 0 END)
			ELSE octet_length(h->>'value') END) ORDER BY n), '[]'::jsonb)
		FROM jsonb_array_elements(headers) WITH ORDINALITY AS x(h, n) WHERE n <= :headers)`),
	// The latest error, cut.
	"errors": previewBounds(`(SELECT coalesce(jsonb_agg(jsonb_build_object(
		'attempt', e->'attempt', 'type', left(e->>'type', :error_type_bytes), 'message', left(e->>'message', :message_bytes),
		'code', e->'code', 'occurred_at', e->'occurred_at',
		'backtrace', coalesce((SELECT jsonb_agg(left(l, :backtrace_line_bytes) ORDER BY n) FROM jsonb_array_elements_text(
			CASE WHEN jsonb_typeof(e->'backtrace') = 'array' THEN e->'backtrace' ELSE '[]'::jsonb END) WITH ORDINALITY AS b(l, n)
			WHERE n <= :backtrace_lines), '[]'::jsonb),
		'details', CASE WHEN octet_length((e->'details')::text) <= :details_bytes THEN e->'details' ELSE '{}'::jsonb END)), '[]'::jsonb)
		FROM (SELECT errors->-1 AS e) x WHERE e IS NOT NULL)`),
	// A decoded value's JSON, when it is no longer than the value's preview.
	"payload":     previewBounds("(CASE WHEN value_schema IS NOT NULL AND octet_length(payload::text) <= :value_bytes THEN payload END)::jsonb"),
	"key_payload": previewBounds("(CASE WHEN octet_length(key_payload::text) <= :key_bytes THEN key_payload END)::jsonb"),
	"retry":       previewBounds("CASE WHEN octet_length(retry::text) <= :json_bytes THEN retry ELSE '{}'::jsonb END"),
	"meta":        previewBounds("CASE WHEN octet_length(meta::text) <= :json_bytes THEN meta ELSE '{}'::jsonb END"),
	"redelivery":  previewBounds("CASE WHEN redelivery IS NULL OR octet_length(redelivery::text) <= :redelivery_bytes THEN redelivery ELSE jsonb_build_object('topic', redelivery->'topic', 'target', redelivery->'target') END"),
}

// previewExtra are the columns a preview reads after readColumns: sizes,
// counts and what was cut.
var previewExtra = []string{
	"coalesce(octet_length(key), -1)", "coalesce(octet_length(value), -1)",
	"jsonb_array_length(headers)", "jsonb_array_length(errors)",
	previewBounds(`coalesce((SELECT length(e->>'type') > :error_type_bytes OR length(e->>'message') > :message_bytes
		OR (jsonb_typeof(e->'backtrace') = 'array' AND (jsonb_array_length(e->'backtrace') > :backtrace_lines
			OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(e->'backtrace') l WHERE length(l) > :backtrace_line_bytes)))
		OR octet_length((e->'details')::text) > :details_bytes FROM (SELECT errors->-1 AS e) x), false)`),
	previewBounds("octet_length(retry::text) > :json_bytes"),
	previewBounds("octet_length(meta::text) > :json_bytes"),
	previewBounds("coalesce(octet_length(redelivery::text) > :redelivery_bytes, false)"),
	"(errors->0->>'occurred_at')::timestamptz",
	"failed_at",
}

// previewColumns are readColumns with the cutting expressions, then previewExtra.
var previewColumns = func() string {
	cols := strings.Split(readColumns, ", ")
	for i, c := range cols {
		if e, ok := previewExpr[c]; ok {
			cols[i] = e
		}
		if c == "claim_prior" {
			cols[i] = claimPriorExpr("redrive_record")
		}
	}
	return strings.Join(append(cols, previewExtra...), ", ")
}()

// previewHeadersAt is where the headers column is among readColumns.
var previewHeadersAt = slices.Index(strings.Split(readColumns, ", "), "headers")

// extraRow scans a row's columns past readColumns into extra, and keeps
// the headers column as read (the preview's carries the sizes).
type extraRow struct {
	pgx.CollectableRow
	extra   []any
	headers *[]byte
}

func (r extraRow) Scan(dest ...any) error {
	if err := r.CollectableRow.Scan(append(dest, r.extra...)...); err != nil {
		return err
	}
	if b, ok := dest[previewHeadersAt].(*json.RawMessage); ok {
		*r.headers = *b
	}
	return nil
}

func scanPreview(row pgx.CollectableRow) (RecordPreview, error) {
	var p RecordPreview
	var headers []byte
	var errorCut, retryCut, metaCut, redeliveryCut *bool
	rec, err := scanShown(extraRow{row, []any{&p.KeySize, &p.ValueSize, &p.HeaderCount, &p.ErrorCount,
		&errorCut, &retryCut, &metaCut, &redeliveryCut, &p.FirstErrorAt, &p.FailedAt}, &headers})
	if err != nil {
		return p, err
	}
	p.Record = rec
	p.ErrorCut, p.RetryCut, p.MetaCut, p.RedeliveryCut = isTrue(errorCut), isTrue(retryCut), isTrue(metaCut), isTrue(redeliveryCut)
	if err := json.Unmarshal(headers, &p.HeaderSizes); err != nil {
		return p, fmt.Errorf("decode header sizes: %w", err)
	}
	if len(p.HeaderSizes) != len(rec.Headers) {
		return p, fmt.Errorf("decode header sizes: %d for %d headers", len(p.HeaderSizes), len(rec.Headers))
	}
	return p, nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// PreviewPage is one page of a preview listing.
type PreviewPage struct {
	Records []RecordPreview
	Total   int64
	// TotalCapped and TotalEstimated are as in Page.
	TotalCapped, TotalEstimated bool
	// HasMore is as in Page.
	HasMore bool
}

// ListPreviews is List with every record's producer-sized parts cut in
// Postgres (see RecordPreview): the page's size is bounded by its limit,
// not by the size of its records.
func (s *Store) ListPreviews(ctx context.Context, p *ListParams) (*PreviewPage, error) {
	records, total, err := listRows(ctx, s, p, previewColumns, scanPreview)
	if err != nil {
		return nil, err
	}
	page := &PreviewPage{Records: records, Total: total.n, TotalCapped: total.capped, TotalEstimated: total.estimated}
	if len(records) > p.Limit {
		page.Records, page.HasMore = records[:p.Limit], true
	}
	return page, nil
}

// RecordPart returns the whole key or value (part) of record id, nil when it
// is null, with the record's queue, or ErrNotFound. Nothing else of the
// record is read: the part is held twice at most (pgx's receive buffer, then
// the copy returned), whatever its size.
func (s *Store) RecordPart(ctx context.Context, id, part string) (queue string, b []byte, err error) {
	if part != "key" && part != "value" {
		return "", nil, fmt.Errorf("record part %q: must be key or value", part)
	}
	var null bool
	if part == "key" {
		var r dbsqlc.RecordKeyRow
		r, err = s.q.RecordKey(ctx, s.pool, id)
		queue, b, null = r.Queue, r.Key, r.Null
	} else {
		var r dbsqlc.RecordValueRow
		r, err = s.q.RecordValue(ctx, s.pool, id)
		queue, b, null = r.Queue, r.Value, r.Null
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil, ErrNotFound
	}
	if err != nil {
		return "", nil, fmt.Errorf("get record %s %s: %w", id, part, err)
	}
	if null {
		return queue, nil, nil
	}
	if b == nil {
		b = []byte{}
	}
	return queue, b, nil
}
