package schema_test

import (
	"testing"

	"github.com/redrive/redrive/internal/schema"
)

func fuzzSchemas(f *testing.F) []*schema.Schema {
	f.Helper()
	var out []*schema.Schema
	for _, src := range []schema.Source{
		{ID: 2, Format: schema.FormatAvro, Text: orderAvro,
			References: []schema.Reference{{Name: "com.acme.Money", Format: schema.FormatAvro, Text: moneyAvro}}},
		{ID: 2, Format: schema.FormatProtobuf, Text: orderProto,
			References: []schema.Reference{{Name: "acme/money.proto", Format: schema.FormatProtobuf, Text: moneyProto}}},
		{ID: 2, Format: schema.FormatJSON, Text: `{}`},
		{ID: 2, Format: schema.FormatAvro, Text: `{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]},{"name":"xs","type":{"type":"array","items":"null"}}]}`},
	} {
		s, err := schema.Compile(src)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// FuzzDecode feeds hostile bytes to every decoder: errors, never panics,
// and whatever decodes encodes back to something that decodes the same.
func FuzzDecode(f *testing.F) {
	schemas := fuzzSchemas(f)
	_, _, avroWire := avroFixture(f)
	_, protoWire := protoFixture(f)
	f.Add(avroWire)
	f.Add(protoWire([]int{1}, orderProtoJSON))
	f.Add(protoWire([]int{1, 0}, `{"sku":"b","qty":-3}`))
	f.Add([]byte("\x00\x00\x00\x00\x02{\"a\":[1,2.5e3]}"))
	f.Add([]byte("\x00\x00\x00\x00\x02\x02\x00\x01\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, s := range schemas {
			d, err := s.Decode(b)
			if err != nil {
				continue
			}
			again, err := s.Encode(d.Payload, d.Indexes)
			if err != nil {
				t.Fatalf("%s: decoded %s but cannot encode it: %v", s.Source.Format, d.Payload, err)
			}
			d2, err := s.Decode(again)
			if err != nil || string(d2.Payload) != string(d.Payload) {
				t.Fatalf("%s: %s re-decodes as %s (%v)", s.Source.Format, d.Payload, d2.Payload, err)
			}
		}
	})
}
