package schema_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/schema"
	"github.com/redrive/redrive/internal/schema/srtest"
	"github.com/twmb/franz-go/pkg/sr"
)

const addressJSONSchema = `{"type":"object","properties":{"zip":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["zip"]}`

const orderJSONSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
 "properties":{"id":{"type":"integer"},"amount":{"type":"number","multipleOf":0.01},
  "address":{"$ref":"address.json"},"tags":{"type":"array","items":{"type":"string"}}},
 "required":["id"],"additionalProperties":false}`

func TestJSONSchemaRoundTripAndValidation(t *testing.T) {
	reg := srtest.New(t)
	cl := srClient(t, reg)
	register(t, cl, "address-json", sr.Schema{Schema: addressJSONSchema, Type: sr.TypeJSON})
	id := register(t, cl, "orders-value", sr.Schema{Schema: orderJSONSchema, Type: sr.TypeJSON,
		References: []sr.SchemaReference{{Name: "address.json", Subject: "address-json", Version: 1}}})
	r := newRegistry(t, reg, nil)
	ctx := context.Background()

	const value = `{"id": 1234567890123456789, "amount": 12.34, "address": {"zip": "12345"}, "tags": ["a"]}`
	body, _ := json.Marshal(json.RawMessage(value)) // encoding/json compacts it, as a JSON serializer writes
	wire := append(header(t, id, nil), body...)
	roundTrip(t, r, wire, string(body))

	edited := `{"id":9223372036854775807,"amount":99999999999999999.99,"address":{"zip":"54321"}}`
	out, err := r.EncodeLike(ctx, wire, []byte(edited))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := r.Decode(out); err != nil || string(d.Payload) != edited {
		t.Fatalf("edited: %v %s", err, d.Payload)
	}

	for _, tc := range []struct{ payload, path, expect string }{
		{`{"id":"x"}`, "/id", "integer"},
		{`{"id":1,"address":{"zip":"1"}}`, "/address/zip", "pattern"},
		{`{"id":1,"address":{}}`, "/address", "zip"},
		{`{"id":1,"tags":[1]}`, "/tags/0", "string"},
		{`{"id":1,"amount":1.001}`, "/amount", "multiple"},
		{`{"id":1,"extra":true}`, "/", "extra"},
		{`{"id":1,`, "/", "valid JSON"},
	} {
		_, err := r.EncodeLike(ctx, wire, []byte(tc.payload))
		var ve *schema.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: got %v, want a ValidationError", tc.payload, err)
			continue
		}
		if ve.Path != tc.path || !strings.Contains(ve.Error(), tc.expect) {
			t.Errorf("%s: got %q (path %q), want path %q mentioning %q", tc.payload, ve.Error(), ve.Path, tc.path, tc.expect)
		}
	}

	// Not JSON behind a JSON Schema header: the bytes do not match.
	if _, err := r.Decode(append(header(t, id, nil), 0xff, 0x00)); !errors.Is(err, schema.ErrMismatch) {
		t.Fatalf("binary behind a JSON header: %v", err)
	}
}
