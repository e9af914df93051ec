package httpapi_test

import (
	"encoding/json"
	"math/big"
	"net/http"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	env "github.com/redrive/redrive/internal/envelope"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/schema/srtest"
)

// paymentAvro has the two kinds of number a float would spoil: a 64-bit
// long and a decimal.
const paymentAvro = `{"type":"record","name":"Payment","namespace":"com.acme","fields":[
	{"name":"id","type":"string"},
	{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":20,"scale":2}},
	{"name":"seq","type":"long"}]}`

// schemaBundle is a processor with a Schema Registry configured.
type schemaBundle struct {
	*bundle
	reg    *srtest.Registry
	id     int
	schema avro.Schema
}

func setupSchemas(t *testing.T) *schemaBundle {
	t.Helper()
	t.Parallel()
	reg := srtest.New(t)
	id := reg.Register("payments-value", "AVRO", paymentAvro)
	b := start(t, options{env: map[string]string{"REDRIVE_SCHEMA_REGISTRY_URL": reg.URL()}})
	// One attempt: failures are final, so only operators' retries redeliver.
	wantStatus(t, b.send(t, http.MethodPut, "/ojs/v1/queues/orders/config",
		map[string]any{"retry": map[string]any{"max_attempts": 1, "on_exhaustion": "dead_letter"}}, nil), http.StatusOK)
	return &schemaBundle{bundle: b, reg: reg, id: id, schema: avro.MustParse(paymentAvro)}
}

// encode writes a Payment with hamba/avro behind franz-go's wire header.
func (sb *schemaBundle) encode(t *testing.T, id string, amount string, seq int64) []byte {
	t.Helper()
	r, ok := new(big.Rat).SetString(amount)
	if !ok {
		t.Fatalf("bad amount %q", amount)
	}
	body, err := avro.Marshal(sb.schema, map[string]any{"id": id, "amount": r, "seq": seq})
	if err != nil {
		t.Fatal(err)
	}
	var h sr.ConfluentHeader
	out, _ := h.AppendEncode(nil, sb.id, nil)
	return append(out, body...)
}

// decode reads a Payment back with hamba/avro: its id, amount (exact, two
// fraction digits) and seq.
func (sb *schemaBundle) decode(t *testing.T, b []byte) (string, string, int64) {
	t.Helper()
	var h sr.ConfluentHeader
	id, body, err := h.DecodeID(b)
	if err != nil || id != sb.id {
		t.Fatalf("wire header: id %d, %v", id, err)
	}
	var m map[string]any
	if err := avro.Unmarshal(sb.schema, body, &m); err != nil {
		t.Fatal(err)
	}
	return m["id"].(string), m["amount"].(*big.Rat).FloatString(2), m["seq"].(int64)
}

// ingest produces values to the DLQ as failures of topic orders and waits
// until every one is stored and decoded; it returns their ids.
func (sb *schemaBundle) ingest(t *testing.T, values ...[]byte) []string {
	t.Helper()
	cl := kafkatest.Client(t, sb.brokers)
	for _, v := range values {
		kafkatest.Produce(t, cl, env.Encode(&kgo.Record{Topic: "orders", Value: v},
			env.FailureInfo{DLQTopic: dlqTopic, ErrorType: "payment.invalid", Message: "bad amount"}))
	}
	var ids []string
	eventually.True(t, "records stored and decoded", func() bool {
		var l listJSON
		sb.get(t, "/ojs/v1/dead-letter?queue=orders&limit=1000", &l)
		if len(l.Items) < len(values) {
			return false
		}
		ids = ids[:0]
		for _, it := range l.Items {
			var r struct {
				ValueSchema *struct{} `json:"value_schema"`
			}
			sb.get(t, "/ojs/v1/dead-letter/"+it.ID, &r)
			if r.ValueSchema == nil {
				return false
			}
			ids = append(ids, it.ID)
		}
		return true
	}, eventually.Within(30*time.Second))
	return ids
}

type editedJSON struct {
	Payload    json.RawMessage `json:"payload"`
	Redelivery *struct {
		Value       *string         `json:"value"`
		Payload     json.RawMessage `json:"payload"`
		ValueSchema *struct {
			RegistryID int    `json:"registry_id"`
			Type       string `json:"type"`
			Subject    string `json:"subject"`
		} `json:"value_schema"`
	} `json:"redelivery"`
}

// An edited Avro payload with a 19-digit long and a decimal is encoded
// with the record's own schema and redelivered exactly: the consumer's
// decoder (hamba/avro, not Redrive's) reads back every digit.
func TestEditedSchemaPayloadIsRedeliveredExactly(t *testing.T) {
	sb := setupSchemas(t)
	ids := sb.ingest(t, sb.encode(t, "p-1", "0.01", 1))
	id := ids[0]

	// The payload comes back in schema order, numbers exact.
	var before editedJSON
	wantStatus(t, sb.get(t, "/ojs/v1/dead-letter/"+id, &before), http.StatusOK)
	if string(before.Payload) != `{"id":"p-1","amount":0.01,"seq":1}` {
		t.Errorf("payload %s, want schema order", before.Payload)
	}

	edited := `{"id":"p-1","amount":123456789012345678.90,"seq":1234567890123456789}`
	var out editedJSON
	wantStatus(t, sb.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+id+"/retry",
		map[string]any{"override": map[string]any{"payload": json.RawMessage(edited)}}, &out), http.StatusOK)
	if out.Redelivery == nil || string(out.Redelivery.Payload) != edited || out.Redelivery.ValueSchema == nil ||
		out.Redelivery.ValueSchema.RegistryID != sb.id || out.Redelivery.ValueSchema.Type != "AVRO" {
		t.Fatalf("redelivery %+v, want the payload and schema %d", out.Redelivery, sb.id)
	}
	got := kafkatest.Consume(t, sb.brokers, "orders", 1, 30*time.Second)
	pid, amount, seq := sb.decode(t, got[0].Value)
	if pid != "p-1" || amount != "123456789012345678.90" || seq != 1234567890123456789 {
		t.Errorf("redelivered %s %s %d, want p-1 123456789012345678.90 1234567890123456789", pid, amount, seq)
	}
}

// A payload that does not conform answers 422 naming the field by its JSON
// Pointer under override.payload; the check endpoint says the same under
// payload, and 200 with the encoded size for a good one. Payload and value
// together are refused.
func TestEditedPayloadIsValidated(t *testing.T) {
	sb := setupSchemas(t)
	ids := sb.ingest(t, sb.encode(t, "p-1", "1.50", 7))
	id := ids[0]
	r := sb.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+id+"/retry",
		map[string]any{"override": map[string]any{"payload": map[string]any{"id": "p-1", "amount": "abc", "seq": 1}}}, nil)
	wantError(t, "bad amount", r, http.StatusUnprocessableEntity, "validation_error", "override.payload/amount")
	fields, _ := r.err(t).Error.Details["fields"].([]any)
	if len(fields) != 1 || fields[0].(map[string]any)["field"] != "override.payload/amount" {
		t.Errorf("fields %v", fields)
	}
	r = sb.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+id+"/payload/check",
		map[string]any{"payload": map[string]any{"id": "p-1", "amount": 1.5, "seq": "x"}}, nil)
	wantError(t, "check bad seq", r, http.StatusUnprocessableEntity, "validation_error", "payload/seq")
	var ok struct {
		Valid       bool            `json:"valid"`
		ValueSchema json.RawMessage `json:"value_schema"`
		Size        int             `json:"size"`
	}
	wantStatus(t, sb.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+id+"/payload/check",
		map[string]any{"payload": json.RawMessage(`{"id":"p-1","amount":2.25,"seq":9223372036854775807}`)}, &ok), http.StatusOK)
	if want := len(sb.encode(t, "p-1", "2.25", 9223372036854775807)); !ok.Valid || ok.Size != want {
		t.Errorf("check %+v, want valid, size %d", ok, want)
	}
	r = sb.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+id+"/retry",
		map[string]any{"override": map[string]any{"payload": map[string]any{}, "value": "x"}}, nil)
	wantError(t, "payload and value", r, http.StatusBadRequest, "invalid_request", "override.payload")
	// Nothing was changed by any of it.
	var cur editedJSON
	sb.get(t, "/ojs/v1/dead-letter/"+id, &cur)
	if cur.Redelivery != nil {
		t.Errorf("redelivery %+v after refused edits", cur.Redelivery)
	}
}

// A JSON record's edited payload is produced as its compact JSON text, its
// numbers exactly as written.
func TestEditedJSONPayloadKeepsNumbers(t *testing.T) {
	b := setup(t)
	ids := b.seed(t, rec{value: `{"amount": 1.10, "id": 7}`})
	edited := `{ "id": 12345678901234567890123, "amount": 1.10, "nested": {"z": 1E+2, "a": -0.000} }`
	var out editedJSON
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+ids[0]+"/retry",
		map[string]any{"override": map[string]any{"payload": json.RawMessage(edited)}}, &out), http.StatusOK)
	want := `{"id":12345678901234567890123,"amount":1.10,"nested":{"z":1E+2,"a":-0.000}}`
	if out.Redelivery == nil || out.Redelivery.Value == nil || *out.Redelivery.Value != want ||
		string(out.Redelivery.Payload) != want || out.Redelivery.ValueSchema != nil {
		t.Fatalf("redelivery %+v, want value and payload %s", out.Redelivery, want)
	}
}
