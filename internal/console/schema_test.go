package console_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/redrive/redrive/internal/dlq"
)

// A value decoded from the Schema Registry wire format is shown as its JSON
// tree (digits kept), with the schema id, type and subject beside it, and
// its bytes as received as hex on asking; one that could not be decoded is
// shown raw with the reason.
func TestTheRecordPageShowsDecodedSchemaRegistryValues(t *testing.T) {
	t.Parallel()
	s := startServer(t, "REDRIVE_ARCHIVE_TOPIC", "off")
	decoded := failure("orders", "avro-1", []byte{0, 0, 0, 0, 7, 0x02, 'x', 0xff, 0x01}, false)
	decoded.ValueSchema = &dlq.SchemaRef{RegistryID: 7, Type: "AVRO", Subject: "orders-value"}
	decoded.Payload = json.RawMessage(`{"customer":"c-42","total":9007199254740993,"amount":12.30}`)
	failed := failure("orders", "avro-2", []byte{0, 0, 0, 0x30, 0x39, 1, 2, 3}, false)
	failed.DecodeError = "value: fetch schema 12345: unknown schema id: Schema 12345 not found"
	s.storeRecords(t, []dlq.Record{decoded, failed})

	b := newBrowser(t)
	b.run(t, "the decoded record", chromedp.Navigate(s.base+"/ui/records/"+decoded.ID),
		waitText("#value-schema", "schema 7 · AVRO · subject orders-value"), waitText("#value-tree", `"customer"`))
	tree := eval[string](t, b, `document.querySelector("#value-tree").textContent`)
	for _, want := range []string{"9007199254740993", "12.30", `"c-42"`} {
		if !strings.Contains(tree, want) {
			t.Errorf("the tree lacks %s: %q", want, tree)
		}
	}
	b.screenshots(t, "record-schema-registry")
	b.run(t, "the bytes as hex", chromedp.Click("#value-as-hex"), waitText("#value-hex", "00 00 00 00 07 02 78 ff"))
	if hidden := eval[bool](t, b, `document.querySelector("#value-view").hidden`); !hidden {
		t.Error("the tree stays shown beside the hex")
	}
	b.screenshots(t, "record-schema-registry-hex")

	b.run(t, "the record that could not be decoded", chromedp.Navigate(s.base+"/ui/records/"+failed.ID),
		waitText("#value-decode-error", "unknown schema id"), waitText("#value-hex", "00 00 30 39"))
	b.screenshots(t, "record-schema-registry-error")
}
