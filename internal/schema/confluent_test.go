package schema_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/redrive/redrive/internal/schema"
	"github.com/redrive/redrive/internal/schema/srtest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// These tests encode with Confluent's own serializers, which nobody here
// wrote: confluent-kafka-python's AvroSerializer, ProtobufSerializer and
// JSONSerializer (testdata/confluent/serialize.py) register their schemas
// with an srtest registry over HTTP and write the wire format; Redrive
// then decodes the bytes to natural JSON and encodes that back to the
// very same bytes. (Confluent's Go serde needs cgo, so it is ruled out.)
// Debian packages the Python client at 1.7; its Avro body is written by
// Apache Avro's Python library (Debian has no fastavro; see
// testdata/confluent/fastavro_shim).

// confluentPackages are the Debian packages serialize.py needs.
const confluentPackages = "python3-confluent-kafka python3-avro python3-protobuf python3-jsonschema python3-requests"

// confluentPython returns a python3 that can import Confluent's
// serializers, failing the test (never skipping it) when there is none.
func confluentPython(t *testing.T) string {
	t.Helper()
	probe := "import confluent_kafka.schema_registry.protobuf, confluent_kafka.schema_registry.json_schema, avro.io, jsonschema, requests"
	var tried []string
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		out, err := exec.Command(path, "-c", probe).CombinedOutput()
		if err == nil {
			return path
		}
		tried = append(tried, path+": "+strings.TrimSpace(lastLine(string(out))))
	}
	t.Fatalf("no python3 with Confluent's serializers (%s); install them: apt-get install -y %s",
		strings.Join(tried, "; "), confluentPackages)
	return ""
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

type confluentCase struct {
	Name    string   `json:"name"`
	Format  string   `json:"format"`
	Topic   string   `json:"topic"`
	Schema  string   `json:"schema,omitempty"`
	Files   []string `json:"files,omitempty"`
	Message string   `json:"message,omitempty"`
	Value   any      `json:"value"`
}

// confluentSerialize runs serialize.py against reg and returns each
// case's wire bytes by name.
func confluentSerialize(t *testing.T, reg *srtest.Registry, cases []confluentCase) map[string][]byte {
	t.Helper()
	py := confluentPython(t)
	in, err := json.Marshal(map[string]any{"url": reg.URL(), "cases": cases})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "testdata/confluent/serialize.py")
	cmd.Stdin = bytes.NewReader(in)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("serialize.py: %v\n%s", err, stderr.String())
	}
	got := map[string][]byte{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var line struct{ Name, Hex string }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("serialize.py printed %q: %v", sc.Text(), err)
		}
		b, err := hex.DecodeString(line.Hex)
		if err != nil {
			t.Fatal(err)
		}
		got[line.Name] = b
	}
	for _, c := range cases {
		if got[c.Name] == nil {
			t.Fatalf("serialize.py wrote nothing for %s\n%s", c.Name, stderr.String())
		}
	}
	return got
}

// protoFiles compiles .proto sources and returns the base64
// FileDescriptorProtos of name and its non-well-known imports, imports
// first: what Python's descriptor pool is fed (Python has no protoc here).
func protoFiles(t *testing.T, sources map[string]string, name string) []string {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(sources)})}
	fds, err := c.Compile(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	seen := map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] || strings.HasPrefix(fd.Path(), "google/protobuf/") {
			return
		}
		seen[fd.Path()] = true
		for i := 0; i < fd.Imports().Len(); i++ {
			add(fd.Imports().Get(i).FileDescriptor)
		}
		b, err := proto.Marshal(protodesc.ToFileDescriptorProto(fd))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, base64.StdEncoding.EncodeToString(b))
	}
	add(fds[0])
	return out
}

func jsonValue(t *testing.T, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("fixture %s: %v", s, err)
	}
	return v
}

const confluentAvroSchema = `{"type":"record","name":"Order","namespace":"com.acme","fields":[
 {"name":"id","type":"string"},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"]}},
 {"name":"prev","type":["null","Status"],"default":null},
 {"name":"hash","type":{"type":"fixed","name":"Hash","size":4}},
 {"name":"blob","type":"bytes"},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":20,"scale":2}},
 {"name":"fee","type":{"type":"fixed","name":"Fee","size":8,"logicalType":"decimal","precision":18,"scale":3}},
 {"name":"created","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"updated","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"attrs","type":{"type":"map","values":"long"}},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"big","type":"long"},
 {"name":"billing","type":{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}},
 {"name":"shipping","type":"Address"},
 {"name":"alt","type":["null","com.acme.Address"],"default":null}]}`

const (
	confluentProtoCommon = `syntax = "proto3";
package acme.common;
message Money { string currency = 1; int64 units = 2; }
enum Status { NEW = 0; PAID = 1; }
`
	confluentProtoOrders = `syntax = "proto3";
package acme.orders;
import "acme/common.proto";
import "google/protobuf/timestamp.proto";

message Header { string id = 1; }
message Order {
  message Line { string sku = 1; int32 qty = 2; acme.common.Money price = 3; }
  string id = 1;
  int64 big = 2;
  repeated Line lines = 3;
  google.protobuf.Timestamp at = 4;
  acme.common.Status status = 5;
  map<string, int64> attrs = 6;
  repeated int64 nums = 7;
  sint64 neg = 8;
  bytes blob = 9;
}
`
)

const confluentJSONSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","title":"Order","type":"object",
 "properties":{"id":{"type":"string"},"big":{"type":"integer"},"price":{"type":"number"},
  "lines":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"}},"required":["sku"]}},
  "note":{"type":["string","null"]}},
 "required":["id","big"]}`

// TestConfluentSerializers decodes what Confluent's serializers wrote to
// the expected natural JSON and encodes it back to the same bytes.
func TestConfluentSerializers(t *testing.T) {
	reg := srtest.New(t)
	protoSources := map[string]string{"acme/common.proto": confluentProtoCommon, "acme/orders.proto": confluentProtoOrders}
	orderFiles := protoFiles(t, protoSources, "acme/orders.proto")
	cases := []struct {
		c    confluentCase
		want string
		// message and indexes: the Protobuf message the header names.
		message string
		indexes []int
		// mapOrder: the producer wrote a map's entries in its own order
		// (Python's C++ runtime: hash order), so only the unchanged path
		// gives the original bytes back; the encoder sorts entries by key.
		mapOrder bool
		// deprecated: Python 1.7 wrote the index list in the deprecated
		// unsigned-varint form (any list but [0]).
		deprecated bool
	}{
		{c: confluentCase{Name: "avro full", Format: "AVRO", Topic: "orders", Schema: confluentAvroSchema,
			Value: jsonValue(t, `{"id":"o-1","note":"rush","status":"PAID","prev":"NEW",
			"hash":{"$bytes":"3q2+7w=="},"blob":{"$bytes":"AAEC/w=="},
			"amount":{"$decimal":"12345678901234567.89"},"fee":{"$decimal":"-0.125"},
			"created":{"$datetime":"2024-05-06T07:08:09.123+00:00"},"updated":{"$datetime":"2024-05-06T07:08:09.123456+00:00"},
			"day":{"$date":"2024-02-29"},"attrs":{"a":1,"b":-9223372036854775808},"tags":["x","y"],
			"big":1234567890123456789,"billing":{"city":"Lyon"},"shipping":{"city":"Oslo"},"alt":{"city":"Rome"}}`)},
			want: `{"id":"o-1","note":"rush","status":"PAID","prev":"NEW","hash":"3q2+7w==","blob":"AAEC/w==",` +
				`"amount":12345678901234567.89,"fee":-0.125,"created":"2024-05-06T07:08:09.123Z",` +
				`"updated":"2024-05-06T07:08:09.123456Z","day":"2024-02-29","attrs":{"a":1,"b":-9223372036854775808},` +
				`"tags":["x","y"],"big":1234567890123456789,"billing":{"city":"Lyon"},"shipping":{"city":"Oslo"},"alt":{"city":"Rome"}}`},
		{c: confluentCase{Name: "avro nulls and edges", Format: "AVRO", Topic: "orders", Schema: confluentAvroSchema,
			Value: jsonValue(t, `{"id":"","note":null,"status":"NEW","prev":null,
			"hash":{"$bytes":"AAAAAA=="},"blob":{"$bytes":""},
			"amount":{"$decimal":"-0.01"},"fee":{"$decimal":"999999999999999.999"},
			"created":{"$datetime":"1969-12-31T23:59:59.999+00:00"},"updated":{"$datetime":"1970-01-01T00:00:00+00:00"},
			"day":{"$date":"1969-07-20"},"attrs":{},"tags":[],
			"big":-9223372036854775807,"billing":{"city":"é ✓"},"shipping":{"city":""},"alt":null}`)},
			want: `{"id":"","note":null,"status":"NEW","prev":null,"hash":"AAAAAA==","blob":"",` +
				`"amount":-0.01,"fee":999999999999999.999,"created":"1969-12-31T23:59:59.999Z",` +
				`"updated":"1970-01-01T00:00:00.000000Z","day":"1969-07-20","attrs":{},` +
				`"tags":[],"big":-9223372036854775807,"billing":{"city":"é ✓"},"shipping":{"city":""},"alt":null}`},
		{c: confluentCase{Name: "proto header", Format: "PROTOBUF", Topic: "headers", Files: orderFiles,
			Message: "acme.orders.Header", Value: jsonValue(t, `{"id":"h-1"}`)},
			want: `{"id":"h-1"}`, message: "acme.orders.Header", indexes: []int{0}},
		{c: confluentCase{Name: "proto order", Format: "PROTOBUF", Topic: "orders-pb", Files: orderFiles,
			Message: "acme.orders.Order", Value: jsonValue(t, `{"id":"o-1","big":"1234567890123456789",
			"lines":[{"sku":"a","qty":2,"price":{"currency":"EUR","units":"-9223372036854775808"}},{"sku":"b"}],
			"at":"2024-05-06T07:08:09.123Z","status":"PAID","attrs":{"b":2,"a":"9007199254740993"},
			"nums":[1,-2,"9223372036854775807"],"neg":"-5","blob":"AAE="}`)},
			want: `{"id":"o-1","big":1234567890123456789,"lines":[{"sku":"a","qty":2,"price":{"currency":"EUR","units":-9223372036854775808}},{"sku":"b"}],` +
				`"at":"2024-05-06T07:08:09.123Z","status":"PAID","attrs":{"a":9007199254740993,"b":2},` +
				`"nums":[1,-2,9223372036854775807],"neg":-5,"blob":"AAE="}`,
			message: "acme.orders.Order", indexes: []int{1}, mapOrder: true, deprecated: true},
		{c: confluentCase{Name: "proto order one entry", Format: "PROTOBUF", Topic: "orders-pb", Files: orderFiles,
			Message: "acme.orders.Order", Value: jsonValue(t, `{"id":"o-2","big":"-1234567890123456789",
			"at":"1969-12-31T23:59:59.999999999Z","attrs":{"k":"9223372036854775807"},"neg":"-9223372036854775808"}`)},
			want: `{"id":"o-2","big":-1234567890123456789,"at":"1969-12-31T23:59:59.999999999Z",` +
				`"attrs":{"k":9223372036854775807},"neg":-9223372036854775808}`,
			message: "acme.orders.Order", indexes: []int{1}, deprecated: true},
		{c: confluentCase{Name: "proto nested", Format: "PROTOBUF", Topic: "lines", Files: orderFiles,
			Message: "acme.orders.Order.Line", Value: jsonValue(t, `{"sku":"z","qty":-1}`)},
			want: `{"sku":"z","qty":-1}`, message: "acme.orders.Order.Line", indexes: []int{1, 0}, deprecated: true},
		{c: confluentCase{Name: "json", Format: "JSON", Topic: "orders-json", Schema: confluentJSONSchema,
			Value: jsonValue(t, `{"id":"o-1","big":1234567890123456789,"price":12.5,"lines":[{"sku":"a"}],"note":null}`)},
			// Python's json.dumps, keys in the order given (encoding/json sorted them).
			want: `{"big": 1234567890123456789, "id": "o-1", "lines": [{"sku": "a"}], "note": null, "price": 12.5}`},
	}
	var in []confluentCase
	for _, c := range cases {
		in = append(in, c.c)
	}
	wire := confluentSerialize(t, reg, in)
	r := newRegistry(t, reg, nil)
	for _, c := range cases {
		t.Run(c.c.Name, func(t *testing.T) {
			b := wire[c.c.Name]
			t.Logf("wire %x", b)
			var d schema.Decoded
			if c.mapOrder {
				d = decodeUnchanged(t, r, b, c.want)
			} else {
				d = roundTrip(t, r, b, c.want)
			}
			if d.Format != schema.Format(c.c.Format) {
				t.Errorf("format %s, want %s", d.Format, c.c.Format)
			}
			if c.message != "" && (d.Message != c.message || !equalInts(d.Indexes, c.indexes) || d.DeprecatedIndexes != c.deprecated) {
				t.Errorf("message %s %v deprecated %v, want %s %v %v", d.Message, d.Indexes, d.DeprecatedIndexes, c.message, c.indexes, c.deprecated)
			}
		})
	}
}

// decodeUnchanged is roundTrip for bytes the encoder would order
// differently: the unchanged payload gives the original bytes back
// through EncodeLike, and the encoder's own bytes decode to the same JSON.
func decodeUnchanged(t *testing.T, r *schema.Registry, wire []byte, want string) schema.Decoded {
	t.Helper()
	ctx := context.Background()
	d, err := r.DecodeContext(ctx, wire)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if string(d.Payload) != want {
		t.Fatalf("payload\n got: %s\nwant: %s", d.Payload, want)
	}
	again, err := r.EncodeLike(ctx, wire, d.Payload)
	if err != nil || !bytes.Equal(again, wire) {
		t.Fatalf("unchanged payload re-encoded to %x (%v), want %x", again, err, wire)
	}
	s, _ := r.Cached(d.SchemaID)
	enc, err := s.EncodeFor(d, d.Payload)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := r.Decode(enc)
	if err != nil || string(d2.Payload) != want || !equalInts(d2.Indexes, d.Indexes) || d2.DeprecatedIndexes != d.DeprecatedIndexes {
		t.Fatalf("encoder's bytes %x decode to %s %v (%v), want %s", enc, d2.Payload, d2.Indexes, err, want)
	}
	return d
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestProtobufIndexForms pins the two fixes the Python serializer showed:
// a message-index list in the deprecated unsigned form decodes, and an
// edit keeps that form; and indexes skip map-entry messages, so a nested
// message declared after a map field is found where Confluent counts it.
func TestProtobufIndexForms(t *testing.T) {
	reg := srtest.New(t)
	id := reg.Register("m-value", "PROTOBUF", `syntax = "proto3";
package p;
message First { string a = 1; }
message Outer {
  map<string, int32> m = 1;
  message Inner { string s = 1; int64 n = 2; }
}
`)
	r := newRegistry(t, reg, nil)
	ctx := context.Background()
	body := []byte{0x0a, 0x01, 'x', 0x10, 0x07} // Inner{s:"x", n:7}
	const want = `{"s":"x","n":7}`
	std := append(header(t, id, []int{1, 0}), body...)            // zig-zag: 04 02 00
	dep := append(schema.AppendHeader(nil, id), 0x02, 0x01, 0x00) // unsigned: 02 01 00
	dep = append(dep, body...)
	for name, wire := range map[string][]byte{"standard": std, "deprecated": dep} {
		t.Run(name, func(t *testing.T) {
			d := roundTrip(t, r, wire, want)
			if d.Message != "p.Outer.Inner" || !equalInts(d.Indexes, []int{1, 0}) || d.DeprecatedIndexes != (name == "deprecated") {
				t.Fatalf("decoded %s %v deprecated %v", d.Message, d.Indexes, d.DeprecatedIndexes)
			}
			edited, err := r.EncodeLike(ctx, wire, []byte(`{"s":"y","n":1234567890123456789}`))
			if err != nil {
				t.Fatal(err)
			}
			head := len(wire) - len(body)
			if !bytes.Equal(edited[:head], wire[:head]) {
				t.Fatalf("edit changed the header: %x, want %x", edited[:head], wire[:head])
			}
			d2, err := r.Decode(edited)
			if err != nil || string(d2.Payload) != `{"s":"y","n":1234567890123456789}` {
				t.Fatalf("edited decodes to %s (%v)", d2.Payload, err)
			}
		})
	}
	// A standard list naming no message is still an error, not a guess.
	bad := append(header(t, id, []int{1, 5}), body...)
	if _, err := r.DecodeContext(ctx, bad); err == nil {
		t.Fatal("index [1 5] decoded")
	}
}
