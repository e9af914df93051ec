package schema

import (
	"errors"
	"fmt"

	"github.com/hamba/avro/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is a compiled schema, ready to decode and encode values. It is
// immutable and safe for concurrent use.
type Schema struct {
	Source Source

	avro  avro.Schema
	proto *protoSchema
	json  *jsonschema.Schema
}

// Compile compiles a schema source (with its resolved references).
func Compile(src Source) (*Schema, error) {
	if err := src.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSchema, err)
	}
	s := &Schema{Source: src}
	var err error
	switch src.Format {
	case FormatAvro:
		s.avro, err = compileAvro(&src)
	case FormatProtobuf:
		s.proto, err = compileProto(&src)
	case FormatJSON:
		s.json, err = compileJSONSchema(&src)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: schema %d (%s): %v", ErrInvalidSchema, src.ID, src.Format, err)
	}
	return s, nil
}

// Decoded is a value decoded from the wire format.
type Decoded struct {
	SchemaID int
	Format   Format
	// Subject is a subject the schema is registered under, when known.
	Subject string
	// Message is the Protobuf message's full name; empty for other formats.
	Message string
	// Indexes is the Protobuf message-index list of the header.
	Indexes []int
	// DeprecatedIndexes says the message-index list was written in the
	// deprecated form (unsigned varints, confluent-kafka-python up to 1.7;
	// see decodeProto). Encoding for this value keeps that form.
	DeprecatedIndexes bool
	// Payload is the natural JSON of the value.
	Payload []byte
}

// Decode decodes wire-format bytes written with this schema. It returns
// ErrNotWireFormat or ErrMalformed for a bad header, and ErrMismatch
// (wrapped, with the reason) when the body does not match the schema.
func (s *Schema) Decode(b []byte) (Decoded, error) {
	id, rest, err := SplitHeader(b)
	if err != nil {
		return Decoded{}, err
	}
	if id != s.Source.ID {
		return Decoded{}, fmt.Errorf("decode: bytes name schema %d, not %d", id, s.Source.ID)
	}
	d := Decoded{SchemaID: id, Format: s.Source.Format, Subject: s.Source.Subject}
	switch s.Source.Format {
	case FormatAvro:
		d.Payload, err = decodeAvro(s.avro, rest)
	case FormatProtobuf:
		if err := s.decodeProto(&d, rest); err != nil {
			return Decoded{}, err
		}
	case FormatJSON:
		d.Payload, err = decodeJSONValue(rest)
	}
	if err != nil {
		return Decoded{}, fmt.Errorf("decode schema %d: %w", id, err)
	}
	return d, nil
}

// decodeProto reads the message-index list and the message after it.
// The list is zig-zag varints, as Confluent's Java, Go and .NET
// serializers and confluent-kafka-python from 1.8 write it; up to 1.7 the
// Python serializer wrote unsigned varints (its later versions and the
// other clients' deserializers call that use.deprecated.format). Both
// agree on the common [0]. Only when the standard reading fails (a
// negative count or index, no such message, or a body that does not match
// it) is the deprecated one tried, and kept only if the value then
// decodes; otherwise the standard reading's error stands. A deprecated
// list that also reads as a valid standard one (a nested index of 8 or
// more whose body happens to parse) cannot be told apart and is read as
// standard.
func (s *Schema) decodeProto(d *Decoded, rest []byte) error {
	indexes, body, err := SplitIndexes(rest)
	if err == nil {
		d.Indexes = indexes
		if d.Message, d.Payload, err = s.proto.decode(indexes, body); err == nil {
			return nil
		}
	}
	if dIdx, dBody, derr := splitIndexesDeprecated(rest); derr == nil {
		if msg, payload, derr := s.proto.decode(dIdx, dBody); derr == nil {
			d.Indexes, d.Message, d.Payload, d.DeprecatedIndexes = dIdx, msg, payload, true
			return nil
		}
	}
	if errors.Is(err, ErrMalformed) {
		return err
	}
	return fmt.Errorf("decode schema %d: %w", s.Source.ID, err)
}

// EncodeFor encodes a natural-JSON payload into the wire format the way
// d was read: the same message indexes, in the same (standard or
// deprecated) form.
func (s *Schema) EncodeFor(d Decoded, payload []byte) ([]byte, error) {
	return s.encode(payload, d.Indexes, d.DeprecatedIndexes)
}

// Encode encodes a natural-JSON payload with this schema into the wire
// format: header with this schema's id, for Protobuf the given message
// indexes (nil means [0]), then the body. A payload that does not conform
// returns a *ValidationError.
func (s *Schema) Encode(payload []byte, indexes []int) ([]byte, error) {
	return s.encode(payload, indexes, false)
}

func (s *Schema) encode(payload []byte, indexes []int, deprecated bool) ([]byte, error) {
	v, err := parseJSON(payload)
	if err != nil {
		return nil, &ValidationError{Path: "/", Expected: "valid JSON", Got: err.Error()}
	}
	out := AppendHeader(make([]byte, 0, len(payload)+16), s.Source.ID)
	switch s.Source.Format {
	case FormatAvro:
		return encodeAvro(out, s.avro, &v)
	case FormatProtobuf:
		if indexes == nil {
			indexes = []int{0}
		}
		if deprecated {
			out = appendIndexesDeprecated(out, indexes)
		} else {
			out = AppendIndexes(out, indexes)
		}
		return s.proto.encode(out, indexes, &v)
	default:
		return s.encodeJSON(out, payload)
	}
}
