package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/kafkatest"
)

// maskingPolicy masks payments' card numbers, customer headers, customer
// keys and emails; orders are not masked.
const maskingPolicy = `topics:
  payments:
    retry: {max_attempts: 7}
    masking:
      paths: [card.number]
      headers: ["x-customer-*"]
      keys: ["cust-*"]
      patterns: [email]
`

const (
	card        = "4111111111111111"
	paymentJSON = `{"card":{"number":"` + card + `","brand":"visa"},"note":"mail ann@example.com","amount":12345678901234567890.10}`
	maskedJSON  = `{"card":{"number":"***","brand":"visa"},"note":"mail ***","amount":12345678901234567890.10}`
)

func maskingSetup(t *testing.T) (*bundle, string, string) {
	t.Helper()
	t.Parallel()
	b := start(t, options{policy: maskingPolicy})
	ids := b.seed(t,
		rec{queue: "payments", key: "cust-42", value: paymentJSON, headers: map[string]string{"x-customer-email": "ann@example.com", "tenant": "acme"}},
		rec{queue: "orders", key: "order-1", value: `{"status":"timeout","card":{"brand":"visa"}}`})
	return b, ids[0], ids[1]
}

// getAs reads path with key into out.
func (b *bundle) getAs(t *testing.T, key, path string, out any) resp {
	t.Helper()
	r := b.do(t, req{method: http.MethodGet, path: path, key: key})
	wantStatus(t, r, http.StatusOK)
	if out != nil {
		r.json(t, out)
	}
	return r
}

func TestMaskedRecordAsShownToEachKey(t *testing.T) {
	b, pay, _ := maskingSetup(t)
	type full struct {
		Key     *string           `json:"key"`
		Value   *string           `json:"value"`
		Payload json.RawMessage   `json:"payload"`
		Headers []json.RawMessage `json:"headers"`
	}
	for _, c := range []struct {
		key, wantKey, wantValue, wantHeader string
	}{
		{readKey, "***", maskedJSON, `{"key":"x-customer-email","value":"***","encoding":"utf8"}`},
		{botKey, "***", maskedJSON, `{"key":"x-customer-email","value":"***","encoding":"utf8"}`},
		{writeKey, "cust-42", paymentJSON, `{"key":"x-customer-email","value":"ann@example.com","encoding":"utf8"}`},
	} {
		var r full
		raw := b.getAs(t, c.key, "/ojs/v1/dead-letter/"+pay, &r)
		if *r.Key != c.wantKey || *r.Value != c.wantValue || string(r.Payload) != c.wantValue {
			t.Errorf("%s: key %q, value %q, payload %s", c.key, *r.Key, *r.Value, r.Payload)
		}
		if c.key != writeKey && strings.Contains(string(raw.body), card) || strings.Contains(string(raw.body), "ann@") != (c.key == writeKey) {
			t.Errorf("%s: the answer holds what is masked: %s", c.key, raw.body)
		}
		found := false
		for _, h := range r.Headers {
			found = found || string(h) == c.wantHeader
		}
		if !found {
			t.Errorf("%s: headers %s, want %s among them", c.key, r.Headers, c.wantHeader)
		}

		var l struct {
			Items []full `json:"items"`
		}
		b.getAs(t, c.key, "/ojs/v1/dead-letter?queue=payments", &l)
		if len(l.Items) != 1 || *l.Items[0].Value != c.wantValue || *l.Items[0].Key != c.wantKey || string(l.Items[0].Payload) != c.wantValue {
			t.Errorf("%s: listed %+v", c.key, l.Items)
		}

		v := b.getAs(t, c.key, "/ojs/v1/dead-letter/"+pay+"/raw", nil)
		k := b.getAs(t, c.key, "/ojs/v1/dead-letter/"+pay+"/raw?part=key", nil)
		if string(v.body) != c.wantValue || string(k.body) != c.wantKey {
			t.Errorf("%s: raw value %s, key %s", c.key, v.body, k.body)
		}
	}
}

func TestSearchCannotRevealMaskedContent(t *testing.T) {
	b, pay, ord := maskingSetup(t)
	for _, c := range []struct {
		query string
		read  []string // what a caller without unmask finds
		write []string // what a write key finds
	}{
		{"q=" + card, nil, []string{pay}},
		{"q=41111111", nil, []string{pay}}, // one digit at a time would read it out
		{"q=visa", []string{ord}, []string{ord, pay}},
		{"path=card.number&value=" + card, nil, []string{pay}},
		{"path=card&value=x", nil, nil},
		{"path=card.brand&value=visa", []string{ord, pay}, []string{ord, pay}}, // not masked: searchable
		{"path=note&value=" + url.QueryEscape("mail ann@example.com"), nil, []string{pay}},
		{"key=cust-42", nil, []string{pay}},
		{"key=order-1", []string{ord}, []string{ord}},
		{"header=" + url.QueryEscape("x-customer-email:ann@example.com"), nil, []string{pay}},
		{"header=x-customer-email", []string{pay}, []string{pay}}, // names are not masked
		{"header=tenant:acme", []string{pay}, []string{pay}},
		{"queue=payments&q=" + card, nil, []string{pay}},
	} {
		for _, who := range []struct {
			key  string
			want []string
		}{{readKey, c.read}, {botKey, c.read}, {writeKey, c.write}} {
			var l listJSON
			b.getAs(t, who.key, "/ojs/v1/dead-letter?"+c.query, &l)
			got := l.itemIDs()
			slices.Sort(got)
			want := slices.Sorted(slices.Values(who.want))
			if !slices.Equal(got, want) || l.Pagination.Total != len(who.want) {
				t.Errorf("%s as %s: found %v (total %d), want %v", c.query, who.key, got, l.Pagination.Total, who.want)
			}
		}
	}
	// A bulk operation that searches masked content is refused to a caller
	// without unmask: its count would answer the search.
	r := b.do(t, req{method: http.MethodPost, path: "/ojs/v1/dead-letter/retry", key: botKey,
		body: map[string]any{"filter": map[string]any{"q": "4111"}}})
	wantError(t, "bulk q", r, http.StatusForbidden, "forbidden", "")
	r = b.do(t, req{method: http.MethodPost, path: "/ojs/v1/dead-letter/retry", key: writeKey,
		body: map[string]any{"filter": map[string]any{"q": "4111"}}})
	wantStatus(t, r, http.StatusOK)
	r = b.do(t, req{method: http.MethodPost, path: "/ojs/v1/dead-letter/retry", key: botKey,
		body: map[string]any{"filter": map[string]any{"queue": "orders", "q": "timeout"}}})
	wantStatus(t, r, http.StatusOK)
}

func TestEditKeepsMaskedFields(t *testing.T) {
	b, pay, _ := maskingSetup(t)
	var shown struct {
		Value string `json:"value"`
	}
	b.getAs(t, botKey, "/ojs/v1/dead-letter/"+pay, &shown)
	if shown.Value != maskedJSON {
		t.Fatalf("the bot was shown %s", shown.Value)
	}
	// Half an edit of a masked string cannot be told apart: refused.
	half := strings.Replace(shown.Value, `"mail ***"`, `"mail *** (checked)"`, 1)
	r := b.do(t, req{method: http.MethodPost, path: "/ojs/v1/dead-letter/" + pay + "/retry", key: botKey,
		body: `{"override":{"payload":` + half + `}}`})
	wantError(t, "half edit", r, http.StatusUnprocessableEntity, "validation_error", "override.payload/note")

	// The bot changes the brand and sends the rest back as shown.
	edited := strings.Replace(shown.Value, `"visa"`, `"amex"`, 1)
	r = b.do(t, req{method: http.MethodPost, path: "/ojs/v1/dead-letter/" + pay + "/retry", key: botKey,
		body: `{"override":{"payload":` + edited + `}}`})
	wantStatus(t, r, http.StatusOK)
	if strings.Contains(string(r.body), card) || strings.Contains(string(r.body), "ann@") {
		t.Errorf("the retry's answer shows masked fields: %s", r.body)
	}
	want := `{"card":{"number":"` + card + `","brand":"amex"},"note":"mail ann@example.com","amount":12345678901234567890.10}`
	got := kafkatest.Consume(t, b.brokers, "payments", 1, 30*time.Second)[0]
	if string(got.Value) != want {
		t.Errorf("redelivered %s,\nwant %s", got.Value, want)
	}
	// The write key sees the edit whole.
	var rec struct {
		Redelivery struct {
			Payload json.RawMessage `json:"payload"`
		} `json:"redelivery"`
	}
	b.getAs(t, writeKey, "/ojs/v1/dead-letter/"+pay, &rec)
	if string(rec.Redelivery.Payload) != want {
		t.Errorf("stored edit %s", rec.Redelivery.Payload)
	}
}

// Events are written once for every subscriber: a key masked from anyone
// is masked in them; other queues' keys are not.
func TestEventsMaskKeys(t *testing.T) {
	b, pay, ord := maskingSetup(t)
	events := b.stream(t, "type=dead_letter.retried")
	for _, id := range []string{pay, ord} {
		wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+id+"/retry", nil, nil), http.StatusOK)
	}
	want := map[string]string{pay: "***", ord: "order-1"}
	deadline := time.After(30 * time.Second)
	for len(want) > 0 {
		select {
		case ev := <-events:
			w, ok := want[ev.Data.ID]
			if !ok {
				continue
			}
			if ev.Data.Key == nil || *ev.Data.Key != w {
				t.Errorf("event of %s carries key %v, want %q", ev.Data.ID, ev.Data.Key, w)
			}
			delete(want, ev.Data.ID)
		case <-deadline:
			t.Fatalf("no event for %v", want)
		}
	}
}

// The audit log records what callers sent: an edit's payload typed by a
// write key is masked for a read key.
func TestAuditShowsEditsMasked(t *testing.T) {
	b, _, ord := maskingSetup(t)
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/dead-letter/"+ord+"/retry",
		`{"override":{"payload":{"card":{"number":"`+card+`"},"mail":"ann@example.com","n":1.50}}}`, nil), http.StatusOK)
	for key, want := range map[string]bool{readKey: false, writeKey: true} {
		r := b.getAs(t, key, "/ojs/v1/audit?action=dead_letter.retry", nil)
		if strings.Contains(string(r.body), card) != want || strings.Contains(string(r.body), "ann@example.com") != want {
			t.Errorf("%s: the audit log shows %s", key, r.body)
		}
		if !want && !strings.Contains(string(r.body), `"n":1.50`) {
			t.Errorf("%s: the rest of the entry changed: %s", key, r.body)
		}
	}
}

// Reading a job is not the data plane: its args are masked as the record.
func TestJobArgsMasked(t *testing.T) {
	b, pay, _ := maskingSetup(t)
	for key, want := range map[string]bool{readKey: false, writeKey: true} {
		r := b.getAs(t, key, "/ojs/v1/jobs/"+pay, nil)
		if strings.Contains(string(r.body), card) != want || !strings.Contains(string(r.body), "12345678901234567890.10") {
			t.Errorf("%s: GET /jobs shows %s", key, r.body)
		}
	}
}

// An export shows records as the list does: masked for a caller without
// unmask (and so marked), with searches of masked content finding nothing;
// a masked line is not the record, and an import refuses it.
func TestExportMaskedAndImportRefusesIt(t *testing.T) {
	b, _, _ := maskingSetup(t)
	export := func(key, query string) string {
		t.Helper()
		return string(b.getAs(t, key, "/ojs/v1/dead-letter/export?"+query, nil).body)
	}
	masked := export(readKey, "queue=payments")
	if strings.Contains(masked, card) || strings.Contains(masked, "ann@example.com") || strings.Contains(masked, "cust-42") {
		t.Errorf("the read key's export holds masked content:\n%s", masked)
	}
	if !strings.Contains(masked, `"masked":true`) || !strings.Contains(masked, `"count":1,"complete":true`) {
		t.Errorf("the read key's export is not marked masked, or not whole:\n%s", masked)
	}
	clear := export(writeKey, "queue=payments")
	if !strings.Contains(clear, card) || strings.Contains(clear, `"masked"`) {
		t.Errorf("the write key's export:\n%s", clear)
	}
	for key, want := range map[string]string{readKey: `"count":0,`, writeKey: `"count":1,`} {
		if got := export(key, "q="+card); !strings.Contains(got, want) {
			t.Errorf("%s searching the card number exports %s, want %s", key, got, want)
		}
	}

	r := b.do(t, req{method: http.MethodPost, path: "/ojs/v1/dead-letter/import", key: writeKey, body: masked,
		rawBody: true, header: http.Header{"Content-Type": {"application/x-ndjson"}}})
	wantError(t, "import of a masked export", r, http.StatusUnprocessableEntity, "validation_error", "body")
	if e := r.err(t); e.Error.Details["field"] != "masked" || e.Error.Details["line"] != float64(1) {
		t.Errorf("refusal details %v, want line 1, field masked", e.Error.Details)
	}
}
