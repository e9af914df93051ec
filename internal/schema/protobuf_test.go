package schema_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/redrive/redrive/internal/schema"
	"github.com/redrive/redrive/internal/schema/srtest"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

const moneyProto = `syntax = "proto3";
package acme;
message Money { string currency = 1; int64 units = 2; int32 nanos = 3; }
`

const orderProto = `syntax = "proto3";
package acme.orders;
import "acme/money.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

message Other { string x = 1; }
message Order {
  message Line { string sku = 1; int32 qty = 2; }
  enum Status { NEW = 0; PAID = 1; }
  int64 id = 1;
  string note = 2;
  uint64 big = 3;
  sint64 neg = 4;
  fixed64 fx = 5;
  double score = 6;
  float ratio = 7;
  bool ok = 8;
  bytes blob = 9;
  Status status = 10;
  acme.Money price = 11;
  repeated Line lines = 12;
  repeated int64 nums = 13;
  map<string, int64> attrs = 14;
  google.protobuf.Timestamp at = 15;
  google.protobuf.Int64Value maybe = 16;
  optional int32 opt = 17;
  oneof pay { string card = 20; string iban = 21; }
}
`

const orderProtoJSON = `{"id":1234567890123456789,"note":"x","big":18446744073709551615,"neg":-9223372036854775808,` +
	`"fx":7,"score":0.1,"ratio":1.5,"ok":true,"blob":"aGk=","status":"PAID",` +
	`"price":{"currency":"EUR","units":12,"nanos":340000000},"lines":[{"sku":"a","qty":2}],"nums":[1,-2],` +
	`"attrs":{"a":1,"b":9007199254740993},"at":"2023-11-14T22:13:20.123Z","maybe":5,"opt":0,"card":"4111"}`

// protoFixture registers money.proto and the order schema referencing it,
// and returns wire bytes for message index list indexes, encoded by
// Google's proto.Marshal from a message protojson built out of js.
func protoFixture(t testing.TB) (*srtest.Registry, func(indexes []int, js string) []byte) {
	t.Helper()
	reg := srtest.New(t)
	cl := srClient(t, reg)
	register(t, cl, "money-proto", sr.Schema{Schema: moneyProto, Type: sr.TypeProtobuf})
	id := register(t, cl, "orders-value", sr.Schema{Schema: orderProto, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "acme/money.proto", Subject: "money-proto", Version: 1}}})

	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"order.proto": orderProto, "acme/money.proto": moneyProto}),
	})}
	files, err := c.Compile(context.Background(), "order.proto")
	if err != nil {
		t.Fatal(err)
	}
	return reg, func(indexes []int, js string) []byte {
		var md protoreflect.MessageDescriptor
		msgs := files[0].Messages()
		for _, i := range indexes {
			md = msgs.Get(i)
			msgs = md.Messages()
		}
		m := dynamicpb.NewMessage(md)
		if err := protojson.Unmarshal([]byte(js), m); err != nil {
			t.Fatal(err)
		}
		body, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return append(header(t, id, indexes), body...)
	}
}

func TestProtobufRoundTrip(t *testing.T) {
	reg, wire := protoFixture(t)
	r := newRegistry(t, reg, newMemCache())
	for _, tc := range []struct {
		indexes []int
		message string
		json    string
	}{
		{[]int{1}, "acme.orders.Order", orderProtoJSON},
		{[]int{1, 0}, "acme.orders.Order.Line", `{"sku":"b","qty":-3}`},
		{[]int{0}, "acme.orders.Other", `{"x":"y"}`}, // the one-byte [0] shortcut
		{[]int{1}, "acme.orders.Order", `{}`},
		{[]int{1}, "acme.orders.Order", `{"score":"NaN","ratio":"-Infinity","iban":"DE00"}`},
	} {
		b := wire(tc.indexes, tc.json)
		d := roundTrip(t, r, b, tc.json)
		if d.Format != schema.FormatProtobuf || d.Message != tc.message || len(d.Indexes) != len(tc.indexes) {
			t.Fatalf("decoded %+v, want message %s", d, tc.message)
		}
	}
	if b := wire([]int{0}, `{"x":"y"}`); b[5] != 0 {
		t.Fatalf("index [0] should be the one-byte shortcut, got % x", b[:7])
	}
}

func TestProtobufEditKeepsEveryDigit(t *testing.T) {
	reg, wire := protoFixture(t)
	r := newRegistry(t, reg, nil)
	orig := wire([]int{1}, orderProtoJSON)
	edited := strings.NewReplacer(`"id":1234567890123456789`, `"id":-9223372036854775807`,
		`"attrs":{"a":1,"b":9007199254740993}`, `"attrs":{"a":1,"b":9007199254740995}`,
		`"maybe":5`, `"maybe":9223372036854775807`,
		`"card":"4111"`, `"iban":"DE00"`).Replace(orderProtoJSON)
	out, err := r.EncodeLike(context.Background(), orig, []byte(edited))
	if err != nil {
		t.Fatal(err)
	}
	if want := wire([]int{1}, edited); string(out) != string(want) {
		t.Fatalf("encoded\n got %x\nwant %x", out, want)
	}
	d, err := r.Decode(out)
	if err != nil || string(d.Payload) != edited {
		t.Fatalf("decode edited: %v\n got: %s\nwant: %s", err, d.Payload, edited)
	}
}

func TestProtobufValidation(t *testing.T) {
	reg, wire := protoFixture(t)
	r := newRegistry(t, reg, nil)
	orig := wire([]int{1}, orderProtoJSON)
	for _, tc := range []struct{ from, to, path, expect string }{
		{`"id":1234567890123456789`, `"id":9223372036854775808`, "/id", "64-bit integer"},
		{`"id":1234567890123456789`, `"id":1.5`, "/id", "64-bit integer"},
		{`"status":"PAID"`, `"status":"LOST"`, "/status", `one of "NEW", "PAID"`},
		{`"lines":[{"sku":"a","qty":2}]`, `"lines":[{"sku":"a","qty":"two"}]`, "/lines/0/qty", "32-bit integer"},
		{`"ok":true`, `"ok":true,"extra":1`, "/extra", "no such field"},
		{`"at":"2023-11-14T22:13:20.123Z"`, `"at":"yesterday"`, "/at", "google.protobuf.Timestamp"},
		{`"card":"4111"`, `"card":"4111","iban":"DE00"`, "/iban", "oneof pay"},
		{`"blob":"aGk="`, `"blob":"not base64!"`, "/blob", "base64"},
	} {
		payload := strings.Replace(orderProtoJSON, tc.from, tc.to, 1)
		_, err := r.EncodeLike(context.Background(), orig, []byte(payload))
		var ve *schema.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: got %v, want a ValidationError", tc.to, err)
			continue
		}
		if ve.Path != tc.path || !strings.Contains(ve.Error(), tc.expect) {
			t.Errorf("%s: got %q (path %q), want path %q mentioning %q", tc.to, ve.Error(), ve.Path, tc.path, tc.expect)
		}
	}
}

func TestProtobufBadIndexes(t *testing.T) {
	reg, wire := protoFixture(t)
	r := newRegistry(t, reg, nil)
	b := wire([]int{1}, `{"id":1}`)
	bad := append(header(t, 2, []int{7}), b[6:]...) // no 8th message
	if _, err := r.DecodeContext(context.Background(), bad); !errors.Is(err, schema.ErrMismatch) {
		t.Fatalf("index past the file's messages: %v", err)
	}
}
