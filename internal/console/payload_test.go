package console_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/kafkatest"
	"github.com/redrive/redrive/internal/schema/srtest"
)

const orderAvro = `{"type":"record","name":"Order","namespace":"com.acme","fields":[
	{"name":"customer","type":"string"},
	{"name":"total","type":"long"},
	{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
	{"name":"note","type":["null","string"],"default":null}]}`

// dlqHeaders are the headers of a failure of topic orders with errType.
func dlqHeaders(errType, msg string) []kgo.RecordHeader {
	return []kgo.RecordHeader{{Key: "redrive.source.topic", Value: []byte("orders")},
		{Key: "redrive.error.type", Value: []byte(errType)}, {Key: "redrive.error.message", Value: []byte(msg)}}
}

// produceDLQ dead-letters records through Kafka, as a producer would.
func (s *server) produceDLQ(t *testing.T, recs ...*kgo.Record) {
	t.Helper()
	producer := kafkatest.Client(t, s.brokers)
	for _, r := range recs {
		r.Topic = dlqTopic
		producer.Produce(context.Background(), r, nil)
	}
	if err := producer.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// scrollTo scrolls the element matching the CSS selector sel to the top of
// the window (for a screenshot of it).
func scrollTo(sel string) chromedp.Action[chromedp.Void] {
	return until("scroll to "+sel, fmt.Sprintf(`(document.querySelector(%q).scrollIntoView({block: "start"}), true)`, sel))
}

// waitAnyText waits until one of the elements matching the CSS selector
// sel contains want.
func waitAnyText(sel, want string) chromedp.Action[chromedp.Void] {
	return until(fmt.Sprintf("one of %s containing %q", sel, want),
		fmt.Sprintf(`[...document.querySelectorAll(%q)].some((e) => e.textContent.includes(%q))`, sel, want))
}

// A value in the Schema Registry wire format (Avro, written by hamba/avro
// behind franz-go's header, ingested through Kafka with a registry the test
// runs) is retried with an edit of its decoded JSON: the editor holds the
// JSON with every digit of a 19-digit long and a decimal, a field of the
// wrong type is named as it is typed (the server's 422 under the editor),
// the review shows the diff, and the record consumed from the topic is the
// edit encoded with the record's own schema.
func TestRetryWithEditOfASchemaRegistryValue(t *testing.T) {
	t.Parallel()
	reg := srtest.New(t)
	schemaID := reg.Register("orders-value", "AVRO", orderAvro)
	s := startServer(t, "REDRIVE_SCHEMA_REGISTRY_URL", reg.URL())
	sch := avro.MustParse(orderAvro)
	body, err := avro.Marshal(sch, map[string]any{"customer": "c-42", "total": int64(1234567890123456789),
		"amount": big.NewRat(123450, 100), "note": nil})
	if err != nil {
		t.Fatal(err)
	}
	var h sr.ConfluentHeader
	value, _ := h.AppendEncode(nil, schemaID, nil)
	s.produceDLQ(t, &kgo.Record{Key: []byte("order-42"), Value: append(value, body...),
		Headers: dlqHeaders("price.invalid", "amount out of range")})

	var id string
	eventually.True(t, "the record is stored decoded", func() bool {
		var p page
		s.api(t, "GET", "/ojs/v1/dead-letter?queue=orders&key=order-42", &p)
		if len(p.Items) != 1 || p.Items[0]["value_schema"] == nil {
			return false
		}
		id, _ = p.Items[0]["id"].(string)
		return true
	}, eventually.Within(30*time.Second))

	b := newBrowser(t)
	b.run(t, "open the editor on the decoded JSON",
		chromedp.Navigate(s.base+"/ui/records/"+id), waitText("#value-schema", fmt.Sprintf("schema %d · AVRO", schemaID)),
		click("#retry-edit"), chromedp.WaitVisible(chromedp.CSS("#edit-payload")),
		waitText("#edit-payload-check", "Valid: matches schema"))
	editor := eval[string](t, b, `document.querySelector("#edit-payload").value`)
	for _, want := range []string{`"total": 1234567890123456789`, `"amount": 1234.50`, `"customer": "c-42"`, `"note": null`} {
		if !strings.Contains(editor, want) {
			t.Errorf("the editor lacks %s:\n%s", want, editor)
		}
	}
	if b.count(t, "#edit-value") != 0 {
		t.Error("a decoded value is edited as its bytes")
	}

	b.run(t, "a long as a string is named as it is typed",
		setValue("#edit-payload", `{"customer": "c-42", "total": "abc", "amount": 1234.50, "note": null}`),
		waitText("#edit-payload-check", "Does not match the schema"), waitText("#edit-payload-errors", "/total"),
		scrollTo("#retry-editor"))
	b.screenshots(t, "retry-payload-errors")
	b.run(t, "the review of a refused payload says why",
		click("#edit-review-button"), waitText("#retry-editor", "payload: does not match the schema"))

	edited := `{"customer": "c-42-fixed", "total": 1234567890123456789, "amount": 99999999.99, "note": "repriced"}`
	b.run(t, "a good edit, reviewed",
		setValue("#edit-payload", edited), waitText("#edit-payload-check", "Valid: matches schema"),
		click("#edit-review-button"),
		waitAnyText("#edit-review .add mark", "-fixed"), waitAnyText("#edit-review .add", "99999999.99"),
		waitAnyText("#edit-review .del", "1234.50"), scrollTo("#edit-review"))
	b.screenshots(t, "retry-payload")

	orders := kafkatest.Client(t, s.brokers, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	b.run(t, "confirm", click("#edit-confirm"), waitText("main", "Retried with your changes"))
	got := consumeKey(t, orders, "order-42")
	v := got.Value
	if len(v) < 5 || v[0] != 0 || int(binary.BigEndian.Uint32(v[1:5])) != schemaID {
		t.Fatalf("produced %x: not the wire format of schema %d", v, schemaID)
	}
	var out map[string]any
	if err := avro.Unmarshal(sch, v[5:], &out); err != nil {
		t.Fatalf("the produced value is not the record's Avro: %v (%x)", err, v)
	}
	amount, _ := out["amount"].(*big.Rat)
	if out["customer"] != "c-42-fixed" || out["total"] != int64(1234567890123456789) || amount == nil || amount.FloatString(2) != "99999999.99" || out["note"] != "repriced" {
		t.Errorf("produced %v, want the edit", out)
	}
}

// A JSON Patch repairs the records of a filtered view: the dry run counts
// the records it applies to and the one whose test fails, names the
// failure, and shows sample diffs with every digit kept; confirmed, a task
// patches and retries the rest and lists the one it skipped, and the
// records consumed from the topic carry the patch.
func TestRepairAViewWithAPatch(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "fx-%d", i), Value: fmt.Appendf(nil, `{"order_id":9007199254740993%d,"currency":"usd","amount":10.10}`, i),
			Headers: dlqHeaders("fx.unknown_currency", "unknown currency usd")})
	}
	recs = append(recs, &kgo.Record{Key: []byte("fx-odd"), Value: []byte(`{"order_id":6,"amount":1}`),
		Headers: dlqHeaders("fx.unknown_currency", "unknown currency")})
	s.produceDLQ(t, recs...)
	s.waitTotal(t, "error_type=fx.unknown_currency", 6)
	var odd page
	s.api(t, "GET", "/ojs/v1/dead-letter?key=fx-odd", &odd)
	oddID, _ := odd.Items[0]["id"].(string)

	b := newBrowser(t)
	b.run(t, "a patch that is not an array is refused before it is sent",
		chromedp.Navigate(s.base+"/ui/records?"+url.Values{"error_type": {"fx.unknown_currency"}}.Encode()), waitText("#total", "6 matching"),
		click("#bulk-patch"), chromedp.WaitVisible(chromedp.CSS("#bulk-patch-text")),
		setValue("#bulk-patch-text", `{"op": "replace"}`), waitText("#bulk-patch-check", "Not a patch"))
	b.run(t, "the dry run",
		setValue("#bulk-patch-text", `[{"op": "test", "path": "/currency", "value": "usd"}, {"op": "replace", "path": "/currency", "value": "USD"}]`),
		click("#bulk-patch-dry"),
		waitText("#bulk-patch-summary", "5 records would be patched and retried"),
		waitText("#bulk-patch-summary", "1 record would be skipped"),
		waitText("#bulk-patch-errors", oddID[:8]),
		waitAnyText("#bulk-patch-samples .add mark", "USD"), waitText("#bulk-patch-samples", "10.10"),
		waitText("#bulk-patch-samples", "90071992547409930"), scrollTo("#bulk"))
	b.screenshots(t, "patch-dry-run")

	orders := kafkatest.Client(t, s.brokers, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	b.run(t, "confirm: the task patches five and skips one",
		click("#bulk-patch-confirm"), waitURL("/ui/tasks/"),
		waitText("#task-state", "completed"), waitText("#task-progress", "5 of 6 records, 1 skipped (100%)"), waitText("#task-patch", `"replace"`),
		waitText("#task-skipped", "1 record skipped"), waitText("#task-skipped-records", oddID))
	b.screenshots(t, "patch-task")

	seen := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(seen) < 5 && ctx.Err() == nil {
		orders.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Key)] = string(r.Value) })
	}
	for i := range 5 {
		v := seen[fmt.Sprintf("fx-%d", i)]
		if !strings.Contains(v, `"currency":"USD"`) || !strings.Contains(v, `"amount":10.10`) || !strings.Contains(v, fmt.Sprintf(`"order_id":9007199254740993%d`, i)) {
			t.Errorf("fx-%d produced %q, want the patched JSON, digits kept", i, v)
		}
	}
	if v, ok := seen["fx-odd"]; ok {
		t.Errorf("the skipped record was produced: %s", v)
	}
}
