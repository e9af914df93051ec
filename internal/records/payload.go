package records

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/schema"
	"github.com/redrive/redrive/internal/store"
)

// ErrSchemaUnavailable says a record's schema is not held and the registry
// could not be asked for it: try again later (the API answers 503).
var ErrSchemaUnavailable = schema.ErrRegistryUnavailable

// PayloadError is an edited payload that does not conform to the record's
// schema (or is not JSON): Pointer is the JSON Pointer (RFC 6901) of the
// offending value, "" for the whole payload.
type PayloadError struct {
	Pointer string
	Message string
}

func (e *PayloadError) Error() string { return "payload" + e.Pointer + ": " + e.Message }

// PayloadUnsupportedError says a record's payload cannot be edited here:
// its value is Schema Registry encoded but no registry is configured, or it
// could not be decoded. Editing the raw bytes (override.value) still works.
type PayloadUnsupportedError struct {
	ID  string
	Why string
}

func (e *PayloadUnsupportedError) Error() string {
	return "record " + e.ID + ": its payload cannot be edited: " + e.Why
}

// EncodedPayload is an edited payload ready to produce.
type EncodedPayload struct {
	// Value is what is produced: the payload encoded with the record's
	// schema, or (a JSON record) the payload's compact JSON text.
	Value []byte
	// Payload is the edited JSON, compact, numbers as written.
	Payload json.RawMessage
	// Schema is the schema Value was encoded with; nil for a JSON record.
	Schema *dlq.SchemaRef
	// Size is len(Value).
	Size int
}

// Redelivery is r's redelivery edit with this payload as its value: the
// record's pending topic and headers stay.
func (e *EncodedPayload) Redelivery(prev *dlq.Redelivery) *dlq.Redelivery {
	rd := &dlq.Redelivery{}
	if prev != nil {
		rd.Topic, rd.Headers = prev.Topic, prev.Headers
	}
	rd.Value, rd.ValueSet, rd.Payload, rd.ValueSchema = e.Value, true, e.Payload, e.Schema
	return rd
}

// schemaEncoded reports whether r's value is to be encoded with a Schema
// Registry schema: it was decoded with one, or (a registry configured) it
// is in the wire format but not decoded yet.
func (s *Service) schemaEncoded(r *dlq.Record) bool {
	if r.ValueSchema != nil {
		return true
	}
	if s.cfg.Schemas == nil {
		return false
	}
	_, err := schema.SchemaIDOf(r.Value)
	return err == nil
}

// EncodePayload encodes an operator's JSON payload as r's value: with r's
// own schema (same registry id and Protobuf message indexes, Confluent wire
// format) for a schema-encoded record, else as compact JSON text (numbers
// exactly as written: never through a float).
//
// Errors: *PayloadError when it does not conform, *PayloadUnsupportedError
// when r's value is schema-encoded and cannot be encoded here,
// ErrSchemaUnavailable (wrapped) when the schema is not held and the
// registry is unreachable.
func (s *Service) EncodePayload(ctx context.Context, r *dlq.Record, payload []byte) (*EncodedPayload, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, payload); err != nil {
		return nil, &PayloadError{Message: "expected valid JSON, got " + err.Error()}
	}
	compact := buf.Bytes()
	if !s.schemaEncoded(r) {
		return &EncodedPayload{Value: compact, Payload: compact, Size: len(compact)}, nil
	}
	if s.cfg.Schemas == nil {
		return nil, &PayloadUnsupportedError{ID: r.ID, Why: fmt.Sprintf("its value is encoded with Schema Registry schema %d "+
			"and no registry is configured (REDRIVE_SCHEMA_REGISTRY_URL); replace its bytes with override.value instead",
			r.ValueSchema.RegistryID)}
	}
	ref := r.ValueSchema
	if ref == nil {
		d, err := s.cfg.Schemas.DecodeContext(ctx, r.Value)
		if errors.Is(err, schema.ErrRegistryUnavailable) {
			return nil, fmt.Errorf("record %s: %w", r.ID, err)
		}
		if err != nil {
			return nil, &PayloadUnsupportedError{ID: r.ID, Why: "its value could not be decoded (" + err.Error() +
				"); replace its bytes with override.value instead"}
		}
		ref = store.SchemaRefOf(d)
	}
	v, err := s.cfg.Schemas.EncodeLike(ctx, r.Value, compact)
	var ve *schema.ValidationError
	switch {
	case errors.As(err, &ve):
		return nil, payloadError(ve)
	case errors.Is(err, schema.ErrRegistryUnavailable):
		return nil, fmt.Errorf("record %s: %w", r.ID, err)
	case err != nil:
		return nil, &PayloadUnsupportedError{ID: r.ID, Why: err.Error()}
	}
	return &EncodedPayload{Value: v, Payload: compact, Schema: ref, Size: len(v)}, nil
}

// payloadError is a schema's validation error as a PayloadError.
func payloadError(ve *schema.ValidationError) *PayloadError {
	p := ve.Path
	if p == "/" {
		p = ""
	}
	msg := "expected " + ve.Expected
	if ve.Got != "" {
		msg += ", got " + ve.Got
	}
	return &PayloadError{Pointer: p, Message: msg}
}

// CheckPayload says whether payload would do as record id's edited
// payload, and what it encodes to; it changes nothing. Errors as
// EncodePayload's, and ErrNotFound.
func (s *Service) CheckPayload(ctx context.Context, id string, payload []byte) (*EncodedPayload, error) {
	r, err := s.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.EncodePayload(ctx, r, payload)
}

// payloadOf is the JSON a patch applies to: a schema-encoded value decoded
// from its bytes (exact, in schema order), a JSON value itself. ok is false
// for a record with no such JSON; err is set only when the registry could
// not be reached.
func (s *Service) payloadOf(ctx context.Context, r *dlq.Record) (payload []byte, ok bool, err error) {
	if s.schemaEncoded(r) {
		if s.cfg.Schemas == nil {
			return nil, false, nil
		}
		d, err := s.cfg.Schemas.DecodeContext(ctx, r.Value)
		if errors.Is(err, schema.ErrRegistryUnavailable) {
			return nil, false, fmt.Errorf("record %s: %w", r.ID, err)
		}
		if err != nil {
			return nil, false, nil
		}
		return d.Payload, true, nil
	}
	if len(r.Value) > 0 && json.Valid(r.Value) {
		return r.Value, true, nil
	}
	return nil, false, nil
}

// InSchemaOrder replaces r's decoded payload (and key payload), read back
// from Postgres's jsonb with its members in jsonb's order, by the value
// decoded again from its bytes, members in schema order, when the schema
// is in memory (cheap; nothing is fetched). Otherwise r is left as it is.
func (s *Service) InSchemaOrder(r *dlq.Record) {
	if s.cfg.Schemas == nil {
		return
	}
	redecode := func(ref *dlq.SchemaRef, b []byte) []byte {
		if ref == nil {
			return nil
		}
		sc, ok := s.cfg.Schemas.Cached(ref.RegistryID)
		if !ok {
			return nil
		}
		d, err := sc.Decode(b)
		if err != nil {
			return nil
		}
		return d.Payload
	}
	if r.Payload != nil {
		if p := redecode(r.ValueSchema, r.Value); p != nil {
			r.Payload = p
		}
	}
	if r.KeyPayload != nil {
		if p := redecode(r.KeySchema, r.Key); p != nil {
			r.KeyPayload = p
		}
	}
}
