package schema

import (
	"context"
	"errors"
	"fmt"
)

// Format is how a schema encodes values, named as the registry and the
// record JSON's value_schema.type name it.
type Format string

const (
	FormatAvro     Format = "AVRO"
	FormatProtobuf Format = "PROTOBUF"
	FormatJSON     Format = "JSON"
)

// Valid reports whether f is a known format.
func (f Format) Valid() bool {
	return f == FormatAvro || f == FormatProtobuf || f == FormatJSON
}

// Limits on what the registry (or a persisted cache) may hand us. Schemas
// are untrusted input like the records themselves.
const (
	// MaxSchemaBytes bounds one schema's text and the registry response
	// carrying it.
	MaxSchemaBytes = 1 << 20
	// MaxReferences bounds the references reachable from one schema,
	// counting every level.
	MaxReferences = 256
	// MaxReferenceDepth bounds how deep references nest.
	MaxReferenceDepth = 16
	// MaxTotalSchemaBytes bounds a schema and all it references together.
	MaxTotalSchemaBytes = 8 << 20
)

// Source is a schema as the registry defines it for one id: its text and,
// resolved, the texts of everything it references. It is self-contained,
// so a persisted Source compiles with the registry down. Schemas are
// immutable by id, so a Source never goes stale.
type Source struct {
	ID     int    `json:"id"`
	Format Format `json:"type"`
	Text   string `json:"schema"`
	// Subject is one subject the schema is registered under, when the
	// registry said; empty otherwise.
	Subject    string      `json:"subject,omitempty"`
	References []Reference `json:"references,omitempty"`
}

// Reference is a schema that another one references, resolved to its text.
// Name is how the referencing schema names it: an Avro full type name, a
// Protobuf import path, a JSON Schema $ref URL.
type Reference struct {
	Name       string      `json:"name"`
	Subject    string      `json:"subject"`
	Version    int         `json:"version"`
	Format     Format      `json:"type"`
	Text       string      `json:"schema"`
	References []Reference `json:"references,omitempty"`
}

// check validates a Source's shape and bounds before it is compiled.
func (s *Source) check() error {
	if !s.Format.Valid() {
		return fmt.Errorf("schema %d: unknown type %q", s.ID, s.Format)
	}
	if len(s.Text) > MaxSchemaBytes {
		return fmt.Errorf("schema %d: text of %d bytes exceeds %d", s.ID, len(s.Text), MaxSchemaBytes)
	}
	total, count := len(s.Text), 0
	var walk func(refs []Reference, depth int) error
	walk = func(refs []Reference, depth int) error {
		if len(refs) > 0 && depth > MaxReferenceDepth {
			return fmt.Errorf("schema %d: references nest deeper than %d", s.ID, MaxReferenceDepth)
		}
		for i := range refs {
			r := &refs[i]
			count++
			total += len(r.Text)
			if count > MaxReferences {
				return fmt.Errorf("schema %d: more than %d references", s.ID, MaxReferences)
			}
			if len(r.Text) > MaxSchemaBytes || total > MaxTotalSchemaBytes {
				return fmt.Errorf("schema %d: reference %q makes the schema larger than allowed", s.ID, r.Name)
			}
			if r.Format == "" {
				r.Format = FormatAvro
			}
			if r.Format != s.Format {
				return fmt.Errorf("schema %d: reference %q is %s, not %s", s.ID, r.Name, r.Format, s.Format)
			}
			if err := walk(r.References, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(s.References, 1)
}

// SchemaCache is a persistent second-level cache of schema sources by id,
// below the registry's in-memory cache: it lets known schemas decode while
// the registry is unreachable. The store implements it. Get reports
// found=false (and no error) for an id it does not hold. Implementations
// must be safe for concurrent use.
type SchemaCache interface {
	GetSchema(ctx context.Context, id int) (src Source, found bool, err error)
	PutSchema(ctx context.Context, src Source) error
}

// SchemaLister is a SchemaCache that can list what it holds, so that a
// new process warms its memory with the schemas already known
// (Registry.Warm). The store implements it.
type SchemaLister interface {
	// RecentSchemas returns up to limit sources, the most recently stored
	// first.
	RecentSchemas(ctx context.Context, limit int) ([]Source, error)
}

var (
	// ErrSchemaNotCached says a non-blocking decode found no compiled
	// schema for the record's id in memory. The caller stores the record
	// raw and asks for a background fetch (Registry.Prefetch); decoding it
	// again later succeeds once the schema is in.
	ErrSchemaNotCached = errors.New("schema not cached")
	// ErrUnknownSchema says the registry has no schema with that id.
	ErrUnknownSchema = errors.New("unknown schema id")
	// ErrRegistryUnavailable says the registry could not be asked (network,
	// timeout, 5xx): retry later.
	ErrRegistryUnavailable = errors.New("schema registry unreachable")
	// ErrInvalidSchema says the registry's schema text does not compile.
	ErrInvalidSchema = errors.New("invalid schema")
	// ErrMismatch says the bytes do not match the schema they name.
	ErrMismatch = errors.New("bytes do not match the schema")
)
