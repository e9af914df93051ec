package schema_test

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/redrive/redrive/internal/schema"
	"github.com/redrive/redrive/internal/schema/srtest"
	"github.com/twmb/franz-go/pkg/sr"
)

const moneyAvro = `{"type":"record","name":"Money","namespace":"com.acme","fields":[
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":20,"scale":2}},
 {"name":"currency","type":{"type":"enum","name":"Currency","symbols":["EUR","USD"]}}]}`

const orderAvro = `{"type":"record","name":"Order","namespace":"com.acme","fields":[
 {"name":"id","type":"long"},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"qty","type":"int"},
 {"name":"ratio","type":"float"},
 {"name":"score","type":"double"},
 {"name":"ok","type":"boolean"},
 {"name":"price","type":"com.acme.Money"},
 {"name":"refund","type":["null","com.acme.Money"],"default":null},
 {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"]}},
 {"name":"hash","type":{"type":"fixed","name":"Hash","size":4}},
 {"name":"blob","type":"bytes"},
 {"name":"exact","type":{"type":"fixed","name":"Dec8","size":8,"logicalType":"decimal","precision":18,"scale":4}},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"atMicros","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"localAt","type":{"type":"long","logicalType":"local-timestamp-millis"}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"tod","type":{"type":"int","logicalType":"time-millis"}},
 {"name":"uuid","type":{"type":"string","logicalType":"uuid"}},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"attrs","type":{"type":"map","values":"long"}},
 {"name":"num","type":["int","long"]},
 {"name":"choice","type":["null","string","long"]},
 {"name":"next","type":["null","Order"],"default":null}]}`

// javaStyle writes arrays and maps as Confluent's Java serializer does: one
// block, no block byte sizes.
var javaStyle = avro.Config{DisableBlockSizeHeader: true, BlockLength: 1 << 20}.Freeze()

// avroFixture registers Money and Order (referencing Money) and encodes
// one Order with hamba/avro's own writer behind franz-go's header.
func avroFixture(t testing.TB) (*srtest.Registry, int, []byte) {
	t.Helper()
	reg := srtest.New(t)
	cl := srClient(t, reg)
	register(t, cl, "money-value", sr.Schema{Schema: moneyAvro})
	id := register(t, cl, "orders-value", sr.Schema{Schema: orderAvro,
		References: []sr.SchemaReference{{Name: "com.acme.Money", Subject: "money-value", Version: 1}}})

	cache := &avro.SchemaCache{}
	if _, err := avro.ParseWithCache(moneyAvro, "", cache); err != nil {
		t.Fatal(err)
	}
	s, err := avro.ParseWithCache(orderAvro, "", cache)
	if err != nil {
		t.Fatal(err)
	}
	order := map[string]any{
		"id":       int64(1234567890123456789),
		"note":     "x",
		"qty":      42,
		"ratio":    float32(1.5),
		"score":    0.1,
		"ok":       true,
		"price":    map[string]any{"amount": big.NewRat(1234, 100), "currency": "EUR"},
		"refund":   nil,
		"status":   "PAID",
		"hash":     [4]byte{1, 2, 3, 4},
		"blob":     []byte("hi"),
		"exact":    big.NewRat(-5, 100),
		"at":       time.UnixMilli(1700000000123).UTC(),
		"atMicros": time.UnixMicro(1700000000123456).UTC(),
		// hamba/avro writes a local timestamp as the wall time in the
		// process's zone (time.Local): this one's is 22:13:20.123 in any TZ.
		"localAt": time.Date(2023, 11, 14, 22, 13, 20, 123_000_000, time.Local),
		"day":     time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC),
		"tod":     13*time.Hour + 4*time.Minute + 5*time.Second + 6*time.Millisecond,
		"uuid":    "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
		"tags":    []string{"a", "b"},
		"attrs":   map[string]any{"k": int64(9007199254740993)},
		"num":     map[string]any{"long": int64(5)},
		"choice":  "s",
		"next":    nil,
	}
	body, err := javaStyle.Marshal(s, order)
	if err != nil {
		t.Fatal(err)
	}
	return reg, id, append(header(t, id, nil), body...)
}

const orderJSON = `{"id":1234567890123456789,"note":"x","qty":42,"ratio":1.5,"score":0.1,"ok":true,` +
	`"price":{"amount":12.34,"currency":"EUR"},"refund":null,"status":"PAID","hash":"AQIDBA==","blob":"aGk=",` +
	`"exact":-0.0500,"at":"2023-11-14T22:13:20.123Z","atMicros":"2023-11-14T22:13:20.123456Z",` +
	`"localAt":"2023-11-14T22:13:20.123","day":"2024-02-29","tod":"13:04:05.006",` +
	`"uuid":"3f2504e0-4f89-11d3-9a0c-0305e82c3301","tags":["a","b"],"attrs":{"k":9007199254740993},` +
	`"num":{"long":5},"choice":"s","next":null}`

func TestAvroRoundTrip(t *testing.T) {
	reg, id, wire := avroFixture(t)
	l2 := newMemCache()
	r := newRegistry(t, reg, l2)

	if _, err := r.Decode(wire); !errors.Is(err, schema.ErrSchemaNotCached) {
		t.Fatalf("non-blocking decode of an unfetched schema: %v, want ErrSchemaNotCached", err)
	}
	d := roundTrip(t, r, wire, orderJSON)
	if d.SchemaID != id || d.Format != schema.FormatAvro || d.Subject != "orders-value" {
		t.Fatalf("decoded %+v", d)
	}
	if l2.puts != 1 || len(l2.m[id].References) != 1 || l2.m[id].References[0].Name != "com.acme.Money" {
		t.Fatalf("second-level cache holds %+v", l2.m)
	}
}

func TestAvroEditKeepsEveryDigit(t *testing.T) {
	reg, _, wire := avroFixture(t)
	r := newRegistry(t, reg, nil)
	ctx := context.Background()
	edited := strings.NewReplacer(
		`"id":1234567890123456789`, `"id":9223372036854775807`,
		`"amount":12.34`, `"amount":999999999999999999.99`,
		`"exact":-0.0500`, `"exact":12345678901234.5678`,
		`"num":{"long":5}`, `"num":{"int":-7}`,
		`"choice":"s"`, `"choice":-9223372036854775808`,
		`"next":null`, `"next":`+orderJSON,
	).Replace(orderJSON)
	out, err := r.EncodeLike(ctx, wire, []byte(edited))
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Payload) != edited {
		t.Fatalf("edited payload did not survive\n got: %s\nwant: %s", d.Payload, edited)
	}
	// And hamba/avro, reading the same bytes, agrees on the exact values.
	var got map[string]any
	if err := avro.Unmarshal(mustParse(t), out[5:], &got); err != nil {
		t.Fatal(err)
	}
	if got["id"].(int64) != 9223372036854775807 {
		t.Fatalf("hamba read id %v", got["id"])
	}
	amount := got["price"].(map[string]any)["amount"].(*big.Rat)
	if amount.FloatString(2) != "999999999999999999.99" {
		t.Fatalf("hamba read amount %s", amount.FloatString(2))
	}
}

func mustParse(t *testing.T) avro.Schema {
	cache := &avro.SchemaCache{}
	if _, err := avro.ParseWithCache(moneyAvro, "", cache); err != nil {
		t.Fatal(err)
	}
	s, err := avro.ParseWithCache(orderAvro, "", cache)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAvroValidation(t *testing.T) {
	reg, _, wire := avroFixture(t)
	r := newRegistry(t, reg, nil)
	for _, tc := range []struct {
		from, to string
		path     string
		expect   string
	}{
		{`"qty":42`, `"qty":"x"`, "/qty", "int"},
		{`"qty":42`, `"qty":4.5`, "/qty", "int"},
		{`"qty":42`, `"qty":2147483648`, "/qty", "int"},
		{`"status":"PAID"`, `"status":"LOST"`, "/status", `one of "NEW", "PAID"`},
		{`"amount":12.34`, `"amount":12.345`, "/price/amount", "decimal(20,2)"},
		{`"id":1234567890123456789,`, ``, "/id", "required"},
		{`"ok":true`, `"ok":true,"extra":1`, "/extra", "no such field"},
		{`"hash":"AQIDBA=="`, `"hash":"AQID"`, "/hash", "4 bytes"},
		{`"at":"2023-11-14T22:13:20.123Z"`, `"at":"yesterday"`, "/at", "timestamp-millis"},
		{`"tags":["a","b"]`, `"tags":["a",2]`, "/tags/1", "string"},
		{`"attrs":{"k":9007199254740993}`, `"attrs":{"k":"v"}`, "/attrs/k", "long"},
		{`"num":{"long":5}`, `"num":5`, "/num", `{"int": …}`},
		{`"choice":"s"`, `"choice":true`, "/choice", "union"},
	} {
		payload := strings.Replace(orderJSON, tc.from, tc.to, 1)
		_, err := r.EncodeLike(context.Background(), wire, []byte(payload))
		var ve *schema.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: got %v, want a ValidationError", tc.to, err)
			continue
		}
		if ve.Path != tc.path || !strings.Contains(ve.Error(), tc.expect) {
			t.Errorf("%s: got %q (path %q), want path %q mentioning %q", tc.to, ve.Error(), ve.Path, tc.path, tc.expect)
		}
	}
	// A missing field with a default takes it.
	payload := strings.Replace(orderJSON, `"note":"x",`, ``, 1)
	out, err := r.EncodeLike(context.Background(), wire, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	d, _ := r.Decode(out)
	if !strings.Contains(string(d.Payload), `"note":null`) {
		t.Fatalf("default not applied: %s", d.Payload)
	}
}

// hamba/avro's default writer splits arrays into sized blocks of 100
// items: they decode the same, an unchanged payload gives back the original
// bytes, and the encoder writes one block, as Confluent's Java serializer.
func TestAvroMultiBlockArray(t *testing.T) {
	reg := srtest.New(t)
	const text = `{"type":"array","items":"int"}`
	id := register(t, srClient(t, reg), "ints-value", sr.Schema{Schema: text})
	items := make([]int, 250)
	for i := range items {
		items[i] = i
	}
	body, err := avro.Marshal(avro.MustParse(text), items)
	if err != nil {
		t.Fatal(err)
	}
	wire := append(header(t, id, nil), body...)
	r := newRegistry(t, reg, nil)
	d, err := r.DecodeContext(context.Background(), wire)
	if err != nil {
		t.Fatal(err)
	}
	same, err := r.EncodeLike(context.Background(), wire, d.Payload)
	if err != nil || string(same) != string(wire) {
		t.Fatalf("unchanged payload: %v, bytes changed: %v", err, string(same) != string(wire))
	}
	s, _ := r.Cached(id)
	out, err := s.Encode(d.Payload, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := javaStyle.Marshal(avro.MustParse(text), items); string(out[5:]) != string(want) {
		t.Fatalf("encoded %x, want %x", out[5:], want)
	}
	d2, err := r.Decode(out)
	if err != nil || string(d2.Payload) != string(d.Payload) {
		t.Fatalf("one-block re-encode decodes differently: %v", err)
	}
}
