package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/redrive/redrive/api"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/fingerprint"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

func init() {
	// An export and an import's body are NDJSON: the document describes
	// them as text.
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", openapi3filter.FileBodyDecoder)
}

// variedRecords makes n records of every shape an export must carry
// exactly: binary and JSON values (compact, indented, numbers no float64
// holds), null keys and tombstones, binary header keys and values, a
// schema-decoded value, error details, every state; queues orders and
// payments.
func variedRecords(n int, now time.Time) []dlq.Record {
	out := make([]dlq.Record, n)
	for i := range out {
		id := dlq.NewID(testdate.Now())
		at := now.Add(-time.Duration(n-i) * time.Millisecond).Truncate(time.Microsecond).Add(time.Duration(i%1000) * time.Nanosecond * 1000)
		r := dlq.Record{ID: id, Queue: "orders", Type: fmt.Sprintf("order.v%d", i%3), State: dlq.StateDiscarded,
			Exhaustion: dlq.ExhaustionDeadLetter, Attempt: 1 + i%5, MaxAttempts: 5, Format: dlq.FormatRedrive,
			Source:  dlq.Source{Topic: "orders", Partition: int32(i % 4), Offset: int64(1000 + i), Timestamp: at.Add(-time.Second), Group: "billing"},
			DLQ:     dlq.Coord{Topic: dlqTopic, Partition: int32(i % 3), Offset: dlqOffset.Add(1), Timestamp: at},
			Key:     fmt.Appendf(nil, "key-%d", i),
			Value:   fmt.Appendf(nil, `{"n":%d,"amount":12345678901234567890.123456789,"big":1e400,"s":"<b>&ü"}`, i),
			Headers: []dlq.Header{{Key: "tenant", Value: fmt.Appendf(nil, "t%d", i%7)}},
			Errors: []dlq.ErrorEntry{
				{Attempt: 1, Type: "db.timeout", Message: fmt.Sprintf("timeout after %dms", i%50), Code: dlq.CodeRetry, OccurredAt: at.Add(-time.Minute)},
				{Attempt: 1 + i%5, Type: "db.timeout", Message: "boom", Code: dlq.CodeRetry, Backtrace: []string{"at x.go:1", "at y.go:2"},
					Details: json.RawMessage(`{"sql":"SELECT 1","n":1.50}`), OccurredAt: at},
			},
			Retry: json.RawMessage(`{"max_attempts":5}`), Meta: json.RawMessage(fmt.Sprintf(`{"note":"m%d"}`, i)),
			CreatedAt: at, UpdatedAt: at,
		}
		d := at
		r.DiscardedAt = &d
		switch i % 10 {
		case 1:
			r.Queue, r.Source.Topic = "payments", "payments"
		case 2:
			r.Value = []byte{0, 1, 2, 0xff, 0xfe, '\n', 0x80} // binary
		case 3:
			r.Key, r.Value = nil, nil // null key, tombstone
		case 4:
			r.Value = []byte("{\n  \"indented\": [1, 2.50],\n  \"x\": \"\\u00e9\"\n}\n") // JSON, not compact
		case 5:
			r.Headers = append(r.Headers, dlq.Header{Key: "bin\xff\x00key", Value: []byte{0xde, 0xad, 0, 0xbe}}, dlq.Header{Key: "empty", Value: []byte{}})
		case 6:
			r.State, r.Exhaustion, r.DiscardedAt = dlq.StateRetryable, "", nil
			next := at.Add(time.Hour)
			r.NextRetryAt = &next
		case 7:
			r.Value = []byte{0, 0, 0, 0, 42, 2, 'h', 'i'} // the Schema Registry wire format
			r.ValueSchema = &dlq.SchemaRef{RegistryID: 42, Type: "AVRO", Subject: "orders-value"}
			r.Payload = json.RawMessage(`{"name":"hi","price":10.10}`)
		case 8:
			r.Value = []byte("plain text, not JSON: 17 \u2028 done")
			r.Exhaustion = dlq.ExhaustionDiscard
		case 9:
			r.Key = []byte{}
			r.Value = []byte(`"a JSON string"`)
		}
		out[i] = r
	}
	return out
}

// exportBody reads an export whole: its record lines and its trailer.
type exportTrailer struct {
	Export struct {
		Count    int             `json:"count"`
		Complete bool            `json:"complete"`
		Filter   json.RawMessage `json:"filter"`
		Error    string          `json:"error"`
	} `json:"export"`
}

func splitExport(t *testing.T, body []byte) (lines [][]byte, trailer exportTrailer) {
	t.Helper()
	all := bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n"))
	if len(all) == 0 {
		t.Fatal("empty export")
	}
	if err := json.Unmarshal(all[len(all)-1], &trailer); err != nil || !bytes.HasPrefix(all[len(all)-1], []byte(`{"export"`)) {
		t.Fatalf("the export's last line is no trailer: %s (%v)", all[len(all)-1], err)
	}
	return all[:len(all)-1], trailer
}

// storedRecords reads every record of a store, oldest first, as stored.
func storedRecords(t *testing.T, st *store.Store) []dlq.Record {
	t.Helper()
	var out []dlq.Record
	after := ""
	for {
		sizes, err := st.ExportSizes(context.Background(), &filter.Filter{}, filter.Scope{}, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]string, len(sizes))
		for i, s := range sizes {
			ids[i] = s.ID
		}
		page, err := st.ExportRecords(context.Background(), &filter.Filter{}, filter.Scope{}, ids)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if len(sizes) < 1000 {
			return out
		}
		after = sizes[len(sizes)-1].ID
	}
}

func (b *bundle) export(t *testing.T, query string) ([][]byte, exportTrailer, resp) {
	t.Helper()
	r := b.do(t, req{method: http.MethodGet, path: "/ojs/v1/dead-letter/export?" + query, key: readKey})
	wantStatus(t, r, http.StatusOK)
	if ct := r.header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("Content-Type %q, want application/x-ndjson", ct)
	}
	lines, tr := splitExport(t, r.body)
	return lines, tr, r
}

func (b *bundle) importNDJSON(t *testing.T, query string, body []byte) resp {
	t.Helper()
	return b.do(t, req{method: http.MethodPost, path: "/ojs/v1/dead-letter/import" + query, key: writeKey, body: body, rawBody: true,
		header: http.Header{"Content-Type": {"application/x-ndjson"}}})
}

type importResult struct {
	State    string `json:"state"`
	Received int    `json:"received"`
	Imported int    `json:"imported"`
	Skipped  int    `json:"skipped"`
}

// 10,000 records exported from one Redrive and imported into another (its
// own database and Kafka) are the same records: every field that belongs
// to the record itself is equal, byte for byte and to the microsecond;
// what the importing Redrive decides (state, retry policy, processing
// history) is as documented. Importing the same export again stores
// nothing more.
func TestExportImportTenThousandRecordsIdenticalByContent(t *testing.T) {
	src := setup(t)
	dst := start(t, options{})
	now := testdate.Now().UTC()
	want := variedRecords(10_000, now)
	if _, err := src.store.InsertRecords(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	began := testdate.Now()
	lines, tr, exported := src.export(t, "")
	t.Logf("exported %d records, %d bytes, in %v", len(lines), len(exported.body), testdate.Since(began))
	if tr.Export.Count != len(want) || !tr.Export.Complete || len(lines) != len(want) || string(tr.Export.Filter) != "{}" {
		t.Fatalf("trailer %+v after %d lines, want count %d complete, filter {}", tr.Export, len(lines), len(want))
	}
	// The value is the JSON itself when it is compact JSON, numbers as
	// they were written.
	var first map[string]json.RawMessage
	if err := json.Unmarshal(lines[0], &first); err != nil {
		t.Fatal(err)
	}
	if string(first["value_encoding"]) != `"json"` || !bytes.Contains(first["value"], []byte(`12345678901234567890.123456789,"big":1e400`)) {
		t.Errorf("line 1: value %s (%s), want the compact JSON value itself", first["value"], first["value_encoding"])
	}
	export := append(bytes.Join(lines, []byte("\n")), '\n')
	trailer, _ := json.Marshal(tr)
	export = append(append(export, trailer...), '\n')

	began = testdate.Now()
	r := dst.importNDJSON(t, "", export)
	t.Logf("imported them in %v", testdate.Since(began))
	wantStatus(t, r, http.StatusOK)
	var res importResult
	r.json(t, &res)
	if res != (importResult{State: "discarded", Received: 10_000, Imported: 10_000}) {
		t.Fatalf("import: %+v, want 10000 received and imported as discarded", res)
	}
	got := storedRecords(t, dst.store)
	if len(got) != len(want) {
		t.Fatalf("%d records imported, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := &want[i], &got[i]
		if diff := sameContent(w, g); diff != "" {
			t.Fatalf("record %d (%s) differs after the round trip: %s", i, w.ID, diff)
		}
		wantExh := dlq.ExhaustionDeadLetter
		if w.State == dlq.StateDiscarded {
			wantExh = w.Exhaustion
		}
		if g.State != dlq.StateDiscarded || g.Exhaustion != wantExh || g.DiscardedAt == nil || g.NextRetryAt != nil {
			t.Fatalf("record %d lands %s/%s (discarded_at %v), want discarded/%s", i, g.State, g.Exhaustion, g.DiscardedAt, wantExh)
		}
		if last := w.LastError(); g.Fingerprint != fingerprint.Of(last.Type, last.Message, last.Backtrace) {
			t.Fatalf("record %d has incident %q, want its latest error's", i, g.Fingerprint)
		}
	}

	// Their incident is listed, as ingest would have noted it.
	var incidents struct {
		Items []struct {
			ID    string `json:"id"`
			Count int    `json:"count"`
		} `json:"items"`
	}
	dst.get(t, "/ojs/v1/incidents", &incidents)
	if len(incidents.Items) != 1 || incidents.Items[0].Count != 10_000 || incidents.Items[0].ID != got[0].Fingerprint {
		t.Errorf("incidents after the import: %+v, want one of 10000 records", incidents.Items)
	}

	// Again: nothing more is stored.
	r = dst.importNDJSON(t, "", export)
	wantStatus(t, r, http.StatusOK)
	r.json(t, &res)
	if res != (importResult{State: "discarded", Received: 10_000, Skipped: 10_000}) {
		t.Errorf("second import: %+v, want every record skipped", res)
	}
	if n := dst.count(t, "true"); n != 10_000 {
		t.Errorf("%d records after importing twice, want 10000", n)
	}
	// The same export into the source: the records are there already.
	r = src.importNDJSON(t, "?state=retryable", export)
	wantStatus(t, r, http.StatusOK)
	r.json(t, &res)
	if res.Imported != 0 || res.Skipped != 10_000 {
		t.Errorf("import into the Redrive it came from: %+v, want every record skipped", res)
	}
	// One audit entry per import, with the counts.
	var audit struct {
		Items []struct {
			Action string          `json:"action"`
			Target string          `json:"target"`
			Count  *int64          `json:"count"`
			After  json.RawMessage `json:"after"`
		} `json:"items"`
	}
	dst.send(t, http.MethodGet, "/ojs/v1/audit?action=dead_letter.import", nil, &audit)
	if len(audit.Items) != 2 || audit.Items[0].Count == nil || *audit.Items[1].Count != 10_000 || *audit.Items[0].Count != 0 ||
		!bytes.Contains(audit.Items[1].After, []byte(`"imported":10000`)) {
		t.Errorf("audit of the imports: %+v", audit.Items)
	}
}

// sameContent says how g differs from w in what an import keeps.
func sameContent(w, g *dlq.Record) string {
	type kept struct {
		ID, Queue, Type string
		Format          dlq.Format
		Attempt         int
		Key, Value      []byte
		KeyNil, ValNil  bool
		Headers         []dlq.Header
		Source          dlq.Source
		DLQ             dlq.Coord
		Errors          []dlq.ErrorEntry
		Meta            string
		ValueSchema     *dlq.SchemaRef
		Payload         string
		CreatedAt       time.Time
	}
	of := func(r *dlq.Record) kept {
		k := kept{ID: r.ID, Queue: r.Queue, Type: r.Type, Format: r.Format, Attempt: r.Attempt, Key: r.Key, Value: r.Value,
			KeyNil: r.Key == nil, ValNil: r.Value == nil, Headers: r.Headers, Source: r.Source, DLQ: r.DLQ,
			Meta: compactOf(r.Meta), ValueSchema: r.ValueSchema, Payload: compactOf(r.Payload), CreatedAt: r.CreatedAt.UTC()}
		k.Source.Timestamp, k.DLQ.Timestamp = k.Source.Timestamp.UTC(), k.DLQ.Timestamp.UTC()
		for _, e := range r.Errors {
			e.OccurredAt = e.OccurredAt.UTC()
			e.Details = json.RawMessage(compactOf(e.Details))
			k.Errors = append(k.Errors, e)
		}
		return k
	}
	a, b := of(w), of(g)
	if !reflect.DeepEqual(a, b) {
		return fmt.Sprintf("\nwant %+v\n got %+v", a, b)
	}
	return ""
}

// compactOf is JSON as jsonb gives it back, for comparing: parsed with
// numbers kept as text, written again.
func compactOf(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return "invalid: " + string(b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// A filter limits an export exactly: the same records, in order, as the
// list finds with the same parameters; the trailer carries the filter.
// Imported as retryable, records are scheduled by the importing Redrive's
// policy for their queue (payments: max_attempts 7 in its policy file).
func TestExportFollowsTheFilterAndImportSchedulesRetryable(t *testing.T) {
	src := setup(t)
	dst := start(t, options{})
	recs := variedRecords(300, testdate.Now().UTC())
	if _, err := src.store.InsertRecords(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, r := range recs {
		if r.Queue == "payments" && r.Type == "order.v1" {
			want = append(want, r.ID)
		}
	}
	q := url.Values{"queue": {"payments"}, "type": {"order.v1"}}
	lines, tr, _ := src.export(t, q.Encode())
	var got []string
	for _, l := range lines {
		var x struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(l, &x); err != nil {
			t.Fatal(err)
		}
		got = append(got, x.ID)
	}
	if len(want) == 0 || !slices.Equal(got, want) || tr.Export.Count != len(want) {
		t.Fatalf("export of queue=payments&type=order.v1: %d ids, want the %d matching, oldest first (trailer %+v)", len(got), len(want), tr.Export)
	}
	if string(tr.Export.Filter) != `{"queue":"payments","type":"order.v1"}` {
		t.Errorf("trailer filter %s", tr.Export.Filter)
	}
	// A filter the list refuses, the export refuses the same way.
	wantError(t, "bad state", src.do(t, req{method: http.MethodGet, path: "/ojs/v1/dead-letter/export?state=gone", key: readKey}),
		http.StatusBadRequest, "invalid_request", "state")
	wantError(t, "unknown parameter", src.do(t, req{method: http.MethodGet, path: "/ojs/v1/dead-letter/export?limit=5", key: readKey}),
		http.StatusBadRequest, "invalid_request", "limit")

	before := testdate.Now()
	r := dst.importNDJSON(t, "?state=retryable", append(bytes.Join(lines, []byte("\n")), '\n'))
	wantStatus(t, r, http.StatusOK)
	var res importResult
	r.json(t, &res)
	if res.Imported != len(want) || res.State != "retryable" {
		t.Fatalf("import as retryable: %+v", res)
	}
	for _, id := range want {
		g, err := dst.store.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if g.State != dlq.StateRetryable || g.MaxAttempts != 7 || g.NextRetryAt == nil || g.NextRetryAt.Before(before) ||
			g.Exhaustion != "" || g.DiscardedAt != nil || !strings.Contains(compactOf(g.Retry), `"max_attempts":7`) {
			t.Fatalf("record %s imported as retryable: state %s max_attempts %d next_retry_at %v retry %s", id, g.State, g.MaxAttempts, g.NextRetryAt, g.Retry)
		}
	}
	if n := dst.count(t, "true"); n != len(want) {
		t.Errorf("%d records in the importing Redrive, want %d", n, len(want))
	}
	wantError(t, "bad state", dst.importNDJSON(t, "?state=completed", lines[0]), http.StatusBadRequest, "invalid_request", "state")
}

// The export's parameters are the list's filter keys, as the document
// says.
func TestOpenAPIExportTakesTheListFilter(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	var params []string
	for _, p := range doc.Paths.Find("/ojs/v1/dead-letter/export").Get.Parameters {
		params = append(params, p.Value.Name)
	}
	if want := filter.Names(filter.List); !slices.Equal(params, want) {
		t.Errorf("export parameters %q, want the list keys %q", params, want)
	}
}

// A bad line refuses the whole import, naming the line and the field, and
// nothing of it is stored; a cut export (its trailer's count, a trailer
// that says incomplete, a line cut short) is refused too.
func TestImportRefusesABadLineNamingItAndStoresNothing(t *testing.T) {
	src := setup(t)
	recs := variedRecords(20, testdate.Now().UTC())
	if _, err := src.store.InsertRecords(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	lines, tr, _ := src.export(t, "")
	dst := start(t, options{})
	join := func(ls ...[]byte) []byte { return append(bytes.Join(ls, []byte("\n")), '\n') }
	edit := func(line []byte, field string, v any) []byte {
		var m map[string]any
		d := json.NewDecoder(bytes.NewReader(line))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatal(err)
		}
		if v == nil {
			delete(m, field)
		} else {
			m[field] = v
		}
		out, _ := json.Marshal(m)
		return out
	}
	trailer := func(count int, complete bool) []byte {
		return fmt.Appendf(nil, `{"export":{"count":%d,"complete":%t,"filter":{}}}`, count, complete)
	}
	cases := []struct {
		name   string
		body   []byte
		status int
		line   int
		field  string
	}{
		{"malformed JSON", join(lines[0], lines[1], []byte(`{"id":`), lines[3]), 422, 3, "body"},
		{"unknown field", join(lines[0], edit(lines[1], "colour", "red")), 422, 2, "colour"},
		{"missing id", join(lines[0], lines[1], lines[2], edit(lines[3], "id", nil)), 422, 4, "id"},
		{"bad value encoding", join(edit(lines[0], "value_encoding", "hex")), 422, 1, "value_encoding"},
		{"bad base64", join(lines[0], edit(edit(lines[1], "key", "@@@"), "key_encoding", "base64")), 422, 2, "key"},
		{"bad queue", join(edit(lines[0], "queue", "no spaces allowed")), 422, 1, "queue"},
		{"bad error time", join(lines[0], edit(lines[1], "errors", []any{map[string]any{"attempt": 1, "type": "x", "message": "m",
			"code": "RETRY", "backtrace": []string{}, "details": nil, "occurred_at": "yesterday"}})), 422, 2, "errors[0].occurred_at"},
		{"attempt not an integer", join(edit(lines[0], "attempt", 1.5)), 422, 1, "attempt"},
		{"count mismatch", join(lines[0], lines[1], trailer(3, true)), 422, 3, "export.count"},
		{"incomplete export", join(lines[0], trailer(1, false)), 422, 2, "export.complete"},
		{"after the trailer", join(lines[0], trailer(1, true), lines[1]), 422, 3, "export"},
		{"line cut short", append(join(lines[0]), lines[1][:len(lines[1])/2]...), 422, 2, "body"},
	}
	for _, c := range cases {
		r := dst.importNDJSON(t, "", c.body)
		if r.status != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, r.status, c.status, r.body)
			continue
		}
		e := r.err(t)
		if line, _ := e.Error.Details["line"].(float64); int(line) != c.line || e.Error.Details["field"] != c.field ||
			!strings.HasPrefix(e.Error.Message, fmt.Sprintf("line %d: %s: ", c.line, c.field)) {
			t.Errorf("%s: error %q %v, want line %d field %s", c.name, e.Error.Message, e.Error.Details, c.line, c.field)
		}
	}
	if n := dst.count(t, "true"); n != 0 {
		t.Errorf("%d records stored by refused imports, want none", n)
	}
	// The trailer as exported is accepted; a body without it too.
	r := dst.importNDJSON(t, "", join(append(lines[:5:5], trailer(5, true))...))
	wantStatus(t, r, http.StatusOK)
	r = dst.importNDJSON(t, "", join(lines[5:10]...))
	wantStatus(t, r, http.StatusOK)
	if n := dst.count(t, "true"); n != 10 {
		t.Errorf("%d records after two good imports, want 10", n)
	}
	_ = tr

	// Not NDJSON, a read key, a line too long.
	wantError(t, "JSON content type", dst.do(t, req{method: http.MethodPost, path: "/ojs/v1/dead-letter/import", key: writeKey, body: lines[0]}),
		http.StatusUnsupportedMediaType, "invalid_request", "Content-Type")
	wantError(t, "read key", dst.do(t, req{method: http.MethodPost, path: "/ojs/v1/dead-letter/import", key: readKey, body: lines[0],
		rawBody: true, header: http.Header{"Content-Type": {"application/x-ndjson"}}}), http.StatusForbidden, "forbidden", "")
	long := append(append([]byte(`{"id":"`), bytes.Repeat([]byte("x"), 17<<20)...), '"', '}', '\n')
	r = dst.importNDJSON(t, "", join(lines[10], long))
	if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.body), "line 2: line: longer than") {
		t.Errorf("a 17 MiB line: %d %s", r.status, r.body)
	}
}

// An export stops when its client goes away, and says so in the audit log:
// fewer records written than the filter selects.
func TestExportStopsWhenTheClientGoes(t *testing.T) {
	b := setup(t)
	if _, err := b.store.InsertRecords(context.Background(), variedRecords(5000, testdate.Now().UTC())); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/ojs/v1/dead-letter/export", nil)
	hreq.Header.Set("Authorization", "Bearer "+readKey)
	hresp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	if _, err := hresp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	hresp.Body.Close()
	var audit struct {
		Items []struct {
			Count  *int64 `json:"count"`
			Status int    `json:"status"`
		} `json:"items"`
	}
	eventually.True(t, "the export is audited", func() bool {
		b.send(t, http.MethodGet, "/ojs/v1/audit?action=dead_letter.export", nil, &audit)
		return len(audit.Items) > 0
	})
	if len(audit.Items) != 1 || audit.Items[0].Count == nil || *audit.Items[0].Count >= 5000 {
		t.Fatalf("audit of the export cut short: %+v, want one entry counting fewer than 5000 records", audit.Items)
	}
}
