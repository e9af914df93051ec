// Package schema decodes and encodes values written in the Confluent
// Schema Registry wire format (magic byte 0, a 4-byte big-endian schema
// id, for Protobuf the message-index list, then the encoded value) for
// Avro, Protobuf and JSON Schema, to and from natural JSON: the JSON an
// operator would write, with every integer and decimal kept digit for
// digit (never through float64). It is a leaf: it imports nothing of
// Redrive's, Postgres or an HTTP server; ingest, the store, the API and the
// console build on it.
//
// # Never blocking ingest
//
// Registry.Decode decodes only with schemas already compiled in memory
// and otherwise returns ErrSchemaNotCached at once; Registry.Fetch (the
// blocking path, for background backfill and the API) loads a schema from
// the second-level SchemaCache (the store, so known schemas survive a
// registry outage across restarts) or from the registry, resolving its
// references, and keeps it forever: schemas are immutable by id.
//
// # Natural JSON
//
// Avro: records are objects with fields in schema order; enums their
// symbol; bytes and fixed standard base64; decimals (bytes or fixed) exact
// JSON numbers with exactly scale fraction digits (12.30); date, time-*
// and timestamp-* text (RFC 3339, UTC "Z" for timestamps, none for local
// timestamps, fixed 3 or 6 fraction digits so the text maps back to the
// same integer; values outside years 0–9999 stay integers); float and
// double the shortest text that reads back to the same bits, and "NaN",
// "Infinity", "-Infinity" as strings. A union value is the plain value of
// its branch (["null","string"] holding "x" is "x") whenever no other
// branch's JSON could take the same JSON kind; only a branch sharing a
// kind with another (["int","long"], two records, a string and an enum)
// is wrapped the way Avro's JSON encoding wraps every union:
// {"long": 5}, {"com.acme.Card": {…}}. Encoding accepts exactly that form
// back, so the branch is never guessed.
//
// Protobuf: fields by their .proto names, only those present (proto3
// fields at their zero value are not on the wire and not in the JSON),
// enums by value name, 64-bit integers as exact JSON numbers (protojson
// would quote them), bytes base64, maps sorted by key, well-known types
// (Timestamp, Duration, Struct, wrappers, …) in their canonical JSON form.
// A value carrying fields its schema does not define is a decode error:
// JSON would silently drop them.
//
// JSON Schema: the value's own JSON, byte for byte.
//
// Unchanged, a decoded payload encodes back to the original bytes: for
// Avro as Confluent's (Java) serializers write it (arrays and maps in one
// block, minimal varints and decimals; hamba/avro's own writer splits
// arrays longer than 100 into blocks, which decode the same but encode back
// in one block); for Protobuf as generated code writes it (fields by
// number, packed repeated scalars, map entries sorted by key).
//
// # Dependencies, and why
//
//   - github.com/twmb/franz-go/pkg/sr: the registry client, by franz-go's
//     author (Redrive's Kafka client). Small (standard library only), it
//     takes several URLs (tried in turn), basic auth, a bearer token, and
//     any *http.Client (our TLS settings, timeout and a response-size cap
//     go there). Confluent's Go client drags in librdkafka via cgo (below).
//   - github.com/hamba/avro/v2: the best-kept pure-Go Avro library; used
//     for parsing schemas (named types, references through a per-schema
//     avro.SchemaCache, logical types). Values are walked by this package
//     over the parsed schema (avro.go says why).
//   - github.com/bufbuild/protocompile: compiles .proto text in pure Go
//     (no protoc), with imports resolved from the schema's references and
//     the well-known types built in; google.golang.org/protobuf's dynamicpb
//     and protowire read and write values, protojson the well-known types.
//   - github.com/santhosh-tekuri/jsonschema/v6: pure-Go JSON Schema
//     validation for every draft, with instance locations in its errors,
//     and numbers kept as json.Number; remote $refs are never fetched.
//
// Confluent's Go serializers (confluent-kafka-go/v2/schemaregistry/serde/…)
// need cgo (every serde package imports the librdkafka-backed kafka
// package), so confluent_test.go encodes with Confluent's Python
// serializers instead (Debian's python3-confluent-kafka 1.7, run by
// testdata/confluent/serialize.py against an srtest registry; its Avro
// bodies are written by Apache Avro's Python library, Debian having no
// fastavro). The other tests encode with independent Go writers:
// hamba/avro's Marshal, Google's proto.Marshal of dynamicpb messages,
// encoding/json, and franz-go's sr.ConfluentHeader.
//
// # Protobuf message indexes
//
// Indexes count the messages declared in the schema, skipping map fields'
// entry messages, as Confluent's Java serializers and the registry do. The
// list is read as zig-zag varints; confluent-kafka-python up to 1.7 wrote
// unsigned ones (what later clients call use.deprecated.format), which are
// read when the standard reading fails, and kept on re-encoding
// (Decoded.DeprecatedIndexes). Protobuf writers order map entries as they
// like (Python's hash order): such a value decodes, and its unchanged
// payload gives back its bytes through Registry.EncodeLike, while the
// encoder itself writes entries sorted by key.
package schema
