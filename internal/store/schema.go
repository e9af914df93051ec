package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/schema"
	"github.com/redrive/redrive/internal/store/internal/dbsqlc"
)

// The Store is the registry's second-level schema cache: known schemas
// decode while the registry is unreachable, across restarts.
var (
	_ schema.SchemaCache  = (*Store)(nil)
	_ schema.SchemaLister = (*Store)(nil)
)

// GetSchema implements schema.SchemaCache.
func (s *Store) GetSchema(ctx context.Context, id int) (schema.Source, bool, error) {
	b, err := s.q.SchemaGet(ctx, s.pool, int32(id))
	if errors.Is(err, pgx.ErrNoRows) {
		return schema.Source{}, false, nil
	}
	if err != nil {
		return schema.Source{}, false, fmt.Errorf("read schema %d: %w", id, err)
	}
	var src schema.Source
	if err := json.Unmarshal(b, &src); err != nil {
		return schema.Source{}, false, fmt.Errorf("decode cached schema %d: %w", id, err)
	}
	return src, true, nil
}

// PutSchema implements schema.SchemaCache. A schema is immutable by id:
// the first source stored for an id stays.
func (s *Store) PutSchema(ctx context.Context, src schema.Source) error {
	b, err := json.Marshal(src)
	if err != nil {
		return fmt.Errorf("encode schema %d: %w", src.ID, err)
	}
	if err := s.q.SchemaPut(ctx, s.pool, int32(src.ID), b); err != nil {
		return fmt.Errorf("store schema %d: %w", src.ID, err)
	}
	return nil
}

// RecentSchemas implements schema.SchemaLister: up to limit cached
// sources, the most recently stored first.
func (s *Store) RecentSchemas(ctx context.Context, limit int) ([]schema.Source, error) {
	rows, err := s.q.SchemaRecent(ctx, s.pool, int32(limit))
	if err != nil {
		return nil, fmt.Errorf("read cached schemas: %w", err)
	}
	out := make([]schema.Source, 0, len(rows))
	for _, b := range rows {
		var src schema.Source
		if err := json.Unmarshal(b, &src); err != nil {
			return nil, fmt.Errorf("decode a cached schema: %w", err)
		}
		out = append(out, src)
	}
	return out, nil
}

// PendingDecode is a record whose value or key waits for its schema.
type PendingDecode struct {
	ID         string
	Key, Value []byte
}

const zeroUUID = "00000000-0000-0000-0000-000000000000"

// PendingDecodes returns up to limit records awaiting decode with ids
// after after ("" from the first), in id order.
func (s *Store) PendingDecodes(ctx context.Context, after string, limit int) ([]PendingDecode, error) {
	if after == "" {
		after = zeroUUID
	}
	rows, err := s.q.DecodePending(ctx, s.pool, after, int32(limit))
	if err != nil {
		return nil, fmt.Errorf("read records awaiting decode: %w", err)
	}
	out := make([]PendingDecode, len(rows))
	for i, r := range rows {
		out[i] = PendingDecode{ID: r.ID, Key: r.Key, Value: r.Value}
	}
	return out, nil
}

// Decoding is how a pending record's value and key were decoded.
type Decoding struct {
	ID string
	// ValueSchema and Payload: the value decoded (nil: it was not, and its
	// payload stays as ingest stored it).
	ValueSchema *dlq.SchemaRef
	Payload     json.RawMessage
	KeySchema   *dlq.SchemaRef
	KeyPayload  json.RawMessage
	// DecodeError says why the value or key could not be decoded.
	DecodeError string
}

// SetDecoded stores decodings of pending records, each one no longer
// pending. A record no longer pending (another decoder was first) is left
// alone. A decoded JSON Postgres refuses as jsonb is stored without its
// searchable copy, the reason in payload_omitted; the record is decoded
// all the same.
func (s *Store) SetDecoded(ctx context.Context, ds []Decoding) error {
	if len(ds) == 0 {
		return nil
	}
	params := make([]dbsqlc.DecodeSetParams, len(ds))
	for i := range ds {
		params[i] = decodeSetParams(&ds[i], "")
	}
	err := s.decodeSet(ctx, params)
	if !rowFault(err) {
		return err
	}
	// One of them refused: each in turn, the refused one without its JSON.
	for i := range ds {
		err := s.decodeSet(ctx, params[i:i+1])
		if rowFault(err) {
			err = s.decodeSet(ctx, []dbsqlc.DecodeSetParams{decodeSetParams(&ds[i], reasonRefused(err))})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) decodeSet(ctx context.Context, params []dbsqlc.DecodeSetParams) error {
	var first error
	s.q.DecodeSet(ctx, s.pool, params).Exec(func(_ int, err error) {
		if err != nil && first == nil {
			first = err
		}
	})
	if first != nil {
		return fmt.Errorf("store %d decoded records: %w", len(params), first)
	}
	return nil
}

// decodeSetParams are d's column values; refused, when set, is why its
// JSON is left out.
func decodeSetParams(d *Decoding, refused string) dbsqlc.DecodeSetParams {
	p := dbsqlc.DecodeSetParams{ID: d.ID, ValueSchema: schemaRefJSON(d.ValueSchema), KeySchema: schemaRefJSON(d.KeySchema)}
	if d.DecodeError != "" {
		msg := clean(d.DecodeError)
		p.DecodeError = &msg
	}
	var omitted string
	p.Payload, omitted = decodedPayloadOf(d.Payload)
	p.KeyPayload, _ = decodedPayloadOf(d.KeyPayload)
	if refused != "" {
		p.Payload, p.KeyPayload, omitted = nil, nil, refused
	}
	if omitted != "" {
		p.PayloadOmitted = &omitted
	}
	return p
}

// SchemaRefOf is how a value or key was decoded, as a record keeps it.
func SchemaRefOf(d schema.Decoded) *dlq.SchemaRef {
	return &dlq.SchemaRef{RegistryID: d.SchemaID, Type: string(d.Format), Subject: d.Subject, Message: d.Message}
}
