package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/httpapi"
	"github.com/redrive/redrive/internal/pgtest"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/records"
	"github.com/redrive/redrive/internal/store"
	"github.com/redrive/redrive/internal/testdate"
)

// heapWatch measures the process's heap over a span: the bytes allocated
// (TotalAlloc) and the highest live heap seen (HeapAlloc, sampled every
// millisecond) above where it started.
type heapWatch struct {
	start runtime.MemStats
	peak  atomic.Uint64
	stop  chan struct{}
	done  sync.WaitGroup
}

func watchHeap() *heapWatch {
	runtime.GC()
	w := &heapWatch{stop: make(chan struct{})}
	runtime.ReadMemStats(&w.start)
	w.peak.Store(w.start.HeapAlloc)
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		var m runtime.MemStats
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
				runtime.ReadMemStats(&m)
				if m.HeapAlloc > w.peak.Load() {
					w.peak.Store(m.HeapAlloc)
				}
			}
		}
	}()
	return w
}

// end returns the bytes allocated and the peak live heap growth, in MB.
func (w *heapWatch) end() (allocMB, peakMB float64) {
	close(w.stop)
	w.done.Wait()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	peak := max(w.peak.Load(), m.HeapAlloc)
	return float64(m.TotalAlloc-w.start.TotalAlloc) / (1 << 20), float64(peak-w.start.HeapAlloc) / (1 << 20)
}

// bigRecord is a record of 1 MB, with a 2,000-byte key; heavy ones also carry
// everything else a producer or an operator sizes: 100 headers of 8 KiB, 20
// errors with 60 KB messages, 300-line backtraces and 40 KB details, a 100 KB
// meta, a retry policy with 5,000 non-retryable error types and a 512 KB
// redelivery edit (set by the caller).
func bigRecord(i int, heavy bool) dlq.Record {
	now := testdate.Now().UTC()
	def := policy.Default()
	if heavy {
		for j := range 5000 {
			def.NonRetryableErrors = append(def.NonRetryableErrors, fmt.Sprintf("com.example.errors.NonRetryable%d", j))
		}
	}
	retry, _ := json.Marshal(def)
	value := fmt.Appendf(nil, `{"n":%d,"blob":"`, i)
	value = append(value, bytes.Repeat([]byte("x"), 1<<20)...)
	value = append(value, `"}`...)
	r := dlq.Record{ID: dlq.NewID(testdate.Now()), Queue: "orders", Type: "order.created", State: dlq.StateDiscarded,
		Exhaustion: dlq.ExhaustionDeadLetter, Attempt: 3, MaxAttempts: 3, Format: dlq.FormatRedrive,
		Source: dlq.Source{Topic: "orders", Partition: 0, Offset: int64(i)},
		DLQ:    dlq.Coord{Topic: dlqTopic, Partition: 0, Offset: dlqOffset.Add(1)},
		Key:    []byte(fmt.Sprintf("%04d", i) + strings.Repeat("k", 1996)), Value: value, Retry: retry,
		Meta: json.RawMessage(`{}`), CreatedAt: now, UpdatedAt: now, DiscardedAt: &now,
		Errors: []dlq.ErrorEntry{{Attempt: 1, Type: "db.timeout", Message: "boom", Code: dlq.CodeRetry, OccurredAt: now}}}
	if !heavy {
		return r
	}
	for j := range 100 {
		r.Headers = append(r.Headers, dlq.Header{Key: fmt.Sprintf("h%03d-", j) + strings.Repeat("K", 300), Value: bytes.Repeat([]byte{'v', 0}, 4096)})
	}
	bt := make([]string, 300)
	for j := range bt {
		bt[j] = fmt.Sprintf("at com.example.Handler.frame%d(Handler.java:%d) ", j, j) + strings.Repeat("f", 200)
	}
	details, _ := json.Marshal(map[string]string{"response_body": strings.Repeat("d", 40_000)})
	r.Errors = nil
	for a := 1; a <= 20; a++ {
		r.Errors = append(r.Errors, dlq.ErrorEntry{Attempt: a, Type: "db.timeout", Message: strings.Repeat("é", 30_000), Code: dlq.CodeRetry,
			Backtrace: bt, Details: details, OccurredAt: now})
	}
	r.Meta = json.RawMessage(`{"note":"` + strings.Repeat("n", 100_000) + `"}`)
	return r
}

// bareServer serves the API alone over a fresh database, auth disabled:
// no ingest, scheduler, archiver or pruner running beside it.
func bareServer(t *testing.T) *bundle {
	pool, err := pgxpool.New(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := store.New(pool)
	rec, err := records.New(records.Config{Store: st, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Records: rec, AuthDisabled: true, Logger: testLogger()}))
	t.Cleanup(srv.Close)
	return &bundle{t: t, base: srv.URL, store: st, pool: pool}
}

// listItem is the part of a list item this test reads.
type listItem struct {
	ID                  string           `json:"id"`
	Key                 *string          `json:"key"`
	KeySize             *int             `json:"key_size"`
	KeyTruncated        bool             `json:"key_truncated"`
	Value               *string          `json:"value"`
	ValueEncoding       *string          `json:"value_encoding"`
	ValueSize           *int             `json:"value_size"`
	ValueTruncated      bool             `json:"value_truncated"`
	Payload             json.RawMessage  `json:"payload"`
	Headers             []map[string]any `json:"headers"`
	HeadersTruncated    bool             `json:"headers_truncated"`
	Errors              []map[string]any `json:"errors"`
	ErrorsTruncated     bool             `json:"errors_truncated"`
	Meta                map[string]any   `json:"meta"`
	MetaTruncated       bool             `json:"meta_truncated"`
	RetryTruncated      bool             `json:"retry_truncated"`
	RedeliveryTruncated bool             `json:"redelivery_truncated"`
}

// 200 records of 1 MB listed with limit=1000 used to answer 200 MB (twice
// the value: value and payload) and, by 4 readers, took serve from 290 MB to
// 5.1 GB. A list is now previews cut in Postgres: its answer and the heap it
// needs are bounded by the limit, not by the records' size. One record is
// whole on GET /dead-letter/{id} (written without copies of the whole) and
// as bytes on /raw.
func TestListOfLargeRecordsIsBounded(t *testing.T) {
	// Not parallel: it measures this process's heap, which the server
	// shares; and only the API over Postgres runs in it (a whole app would
	// also archive these records meanwhile).
	b := bareServer(t)
	const n, heavy = 200, 10
	ctx := context.Background()
	var heavyIDs []string
	for i := 0; i < n; i += 10 {
		batch := make([]dlq.Record, 0, 10)
		for j := i; j < i+10; j++ {
			batch = append(batch, bigRecord(j, j < heavy))
			if j < heavy {
				heavyIDs = append(heavyIDs, batch[len(batch)-1].ID)
			}
		}
		if _, err := b.store.InsertRecords(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	edit, _ := json.Marshal(map[string]any{"topic": "orders.retry", "value": strings.Repeat("e", 512<<10), "value_encoding": "utf8"})
	if _, err := b.pool.Exec(ctx, "UPDATE redrive_record_data SET redelivery = $1 WHERE id = ANY($2)", string(edit), heavyIDs); err != nil {
		t.Fatal(err)
	}

	list := func() []byte {
		req, _ := http.NewRequest(http.MethodGet, b.base+"/ojs/v1/dead-letter?limit=1000", nil)
		req.Header.Set("Authorization", "Bearer "+readKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("list: %d %.300s", resp.StatusCode, body)
		}
		return body
	}
	// Bounds: an item is at most a few dozen KiB whatever its record's size
	// (4 KiB of value, 1 KiB of key, 20 cut headers, one cut error, 2 KiB
	// each of retry and meta, JSON escaping aside).
	const maxBytes, maxAllocMB, maxPeakMB = n * 32 << 10, 64, 48

	w := watchHeap()
	body := list()
	allocMB, peakMB := w.end()
	t.Logf("one list of %d records of 1 MB: %d bytes answered; %.1f MB allocated, live heap +%.1f MB", n, len(body), allocMB, peakMB)
	if len(body) > maxBytes || allocMB > maxAllocMB || peakMB > maxPeakMB {
		t.Fatalf("one list: %d bytes (bound %d), %.0f MB allocated (bound %d), heap +%.0f MB (bound %d)",
			len(body), maxBytes, allocMB, maxAllocMB, peakMB, maxPeakMB)
	}

	w = watchHeap()
	var wg sync.WaitGroup
	sizes := make([]int, 4)
	for i := range sizes {
		wg.Add(1)
		go func() { defer wg.Done(); sizes[i] = len(list()) }()
	}
	wg.Wait()
	allocMB, peakMB = w.end()
	t.Logf("4 readers at once: %v bytes each; %.1f MB allocated, live heap +%.1f MB", sizes, allocMB, peakMB)
	if allocMB > 4*maxAllocMB || peakMB > 2*maxPeakMB {
		t.Errorf("4 readers: %.0f MB allocated (bound %d), heap +%.0f MB (bound %d)", allocMB, 4*maxAllocMB, peakMB, 2*maxPeakMB)
	}

	// The answer is valid per the OpenAPI document, and every item a
	// preview that says what it cut.
	var page struct {
		Items []listItem `json:"items"`
	}
	wantStatus(t, b.get(t, "/ojs/v1/dead-letter?limit=1000", &page), http.StatusOK)
	if len(page.Items) != n {
		t.Fatalf("%d items, want %d", len(page.Items), n)
	}
	isHeavy := map[string]bool{}
	for _, id := range heavyIDs {
		isHeavy[id] = true
	}
	for _, it := range page.Items {
		if !it.ValueTruncated || *it.ValueSize < 1<<20 || len(*it.Value) > 4096 || *it.ValueEncoding != "utf8" || it.Payload != nil ||
			!strings.HasPrefix(*it.Value, `{"n":`) || !it.KeyTruncated || *it.KeySize != 2000 || len(*it.Key) != 1024 {
			t.Fatalf("item %s is not a preview: value %d bytes of %v (%t), key %d of %v (%t), payload %d bytes",
				it.ID, len(*it.Value), *it.ValueSize, it.ValueTruncated, len(*it.Key), *it.KeySize, it.KeyTruncated, len(it.Payload))
		}
		if !isHeavy[it.ID] {
			continue
		}
		if len(it.Headers) != 20 || !it.HeadersTruncated || it.Headers[0]["value_truncated"] != true || it.Headers[0]["value_size"] != 8192.0 ||
			it.Headers[0]["key_truncated"] != true || len(it.Headers[0]["key"].(string)) > 128 {
			t.Errorf("heavy item %s: headers %d (%t): %v", it.ID, len(it.Headers), it.HeadersTruncated, it.Headers[0])
		}
		e := it.Errors[0]
		if len(it.Errors) != 1 || !it.ErrorsTruncated || e["truncated"] != true || e["attempt"] != 20.0 || len(e["message"].(string)) > 1024 ||
			len(e["backtrace"].([]any)) != 10 || fmt.Sprint(e["details"]) != "map[]" {
			t.Errorf("heavy item %s: errors %d (%t): %v", it.ID, len(it.Errors), it.ErrorsTruncated, e["attempt"])
		}
		if !it.MetaTruncated || len(it.Meta) != 0 || !it.RetryTruncated || !it.RedeliveryTruncated {
			t.Errorf("heavy item %s: meta cut %t %v, retry cut %t, redelivery cut %t", it.ID, it.MetaTruncated, len(it.Meta), it.RetryTruncated, it.RedeliveryTruncated)
		}
	}

	// The compatibility listing shows the same previews.
	jobs := b.do(t, compatReq("GET", "/api/dlq/jobs/dlq:orders?limit=1000", readKey))
	wantStatus(t, jobs, http.StatusOK)
	var jp struct {
		Items []struct {
			OriginalJob json.RawMessage `json:"original_job"`
			Error       string          `json:"error"`
			StackTrace  *string         `json:"stack_trace"`
			Context     map[string]any  `json:"context"`
		} `json:"items"`
	}
	jobs.json(t, &jp)
	t.Logf("compat list of the same: %d bytes", len(jobs.body))
	if len(jobs.body) > maxBytes || len(jp.Items) != n || jp.Items[0].Context["value_truncated"] != true ||
		jp.Items[0].Context["value_size"].(float64) < 1<<20 || len(jp.Items[0].OriginalJob) > 4200 {
		t.Errorf("compat jobs: %d bytes, %d items, first context %v", len(jobs.body), len(jp.Items), jp.Items[0].Context["value_truncated"])
	}

	// One record is whole on GET, without several copies of it in memory:
	// measured on a plain record of 1 MB (the server's part: the body is
	// discarded as it arrives).
	var plain string
	for _, it := range page.Items {
		if !isHeavy[it.ID] {
			plain = it.ID
		}
	}
	w = watchHeap()
	req1, _ := http.NewRequest(http.MethodGet, b.base+"/ojs/v1/dead-letter/"+plain, nil)
	req1.Header.Set("Authorization", "Bearer "+readKey)
	resp1, err := http.DefaultClient.Do(req1)
	if err != nil {
		t.Fatal(err)
	}
	written, _ := io.Copy(io.Discard, resp1.Body)
	resp1.Body.Close()
	allocMB, peakMB = w.end()
	t.Logf("GET of one record of 1 MB (%d bytes answered: value and payload): %.1f MB allocated, live heap +%.1f MB", written, allocMB, peakMB)
	if written < 2<<20 || allocMB > 6 {
		t.Errorf("GET of one record of 1 MB: %d bytes answered, %.1f MB allocated (bound 6)", written, allocMB)
	}

	// The heavy one is whole too, valid per the OpenAPI document.
	id := heavyIDs[0]
	want := bigRecord(0, true)
	one := b.do(t, req{method: http.MethodGet, path: "/ojs/v1/dead-letter/" + id, key: readKey})
	wantStatus(t, one, http.StatusOK)
	var rec struct {
		Key            string            `json:"key"`
		Value          string            `json:"value"`
		ValueSize      int               `json:"value_size"`
		ValueTruncated bool              `json:"value_truncated"`
		Payload        map[string]any    `json:"payload"`
		Headers        []json.RawMessage `json:"headers"`
		Errors         []json.RawMessage `json:"errors"`
	}
	one.json(t, &rec)
	if rec.Value[:8] != `{"n":0,"` || len(rec.Value) != len(want.Value) || rec.ValueSize != len(want.Value) || rec.ValueTruncated ||
		rec.Key != string(want.Key) || rec.Payload["n"] != 0.0 || len(rec.Headers) != 100 || len(rec.Errors) != 20 {
		t.Errorf("GET: value %d bytes (%d), key %d, %d headers, %d errors", len(rec.Value), rec.ValueSize, len(rec.Key), len(rec.Headers), len(rec.Errors))
	}

	// And its bytes, as received, on /raw.
	raw := b.do(t, req{method: http.MethodGet, path: "/ojs/v1/dead-letter/" + heavyIDs[1] + "/raw", key: readKey})
	wantStatus(t, raw, http.StatusOK)
	if want := bigRecord(1, true).Value; !bytes.Equal(raw.body[:8], want[:8]) || len(raw.body) != len(want) ||
		raw.header.Get("Content-Type") != "application/octet-stream" || raw.header.Get("Content-Length") != fmt.Sprint(len(want)) ||
		raw.header.Get("Content-Disposition") != `attachment; filename="`+heavyIDs[1]+`.value"` {
		t.Errorf("raw value: %d bytes, headers %v", len(raw.body), raw.header)
	}
	key := b.do(t, req{method: http.MethodGet, path: "/ojs/v1/dead-letter/" + heavyIDs[1] + "/raw?part=key", key: readKey})
	if wantStatus(t, key, http.StatusOK); string(key.body) != string(bigRecord(1, true).Key) {
		t.Errorf("raw key: %.40q", key.body)
	}
}

// A preview stays valid in its encoding: UTF-8 cut at a rune boundary, base64
// of a byte prefix; what fits is shown whole, payload included.
func TestListPreviewsAreValidInTheirEncoding(t *testing.T) {
	b := setup(t)
	binary := make([]byte, 10_000)
	for i := range binary {
		binary[i] = byte(i)
	}
	cases := []struct {
		value     []byte
		enc       string
		truncated bool
		payload   bool
	}{
		{[]byte("a" + strings.Repeat("é", 3000)), "utf8", true, false},             // a cut inside a 2-byte rune
		{[]byte("a" + strings.Repeat("€", 2000)), "utf8", true, false},             // 3-byte runes
		{binary, "base64", true, false},                                            // base64 of the first 3072 bytes
		{binary[:100], "base64", false, false},                                     // whole
		{[]byte(`{"a":"` + strings.Repeat("x", 4088) + `"}`), "utf8", false, true}, // 4096 bytes: whole, with payload
		{[]byte(`{"a":"` + strings.Repeat("x", 4089) + `"}`), "utf8", true, false}, // one byte more: cut, no payload
		{[]byte(strings.Repeat("x", 4000) + "\x00" + strings.Repeat("x", 100)), "base64", true, false},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = b.seed(t, rec{queue: "previews", key: strings.Repeat("ü", 600), value: "placeholder"})[0]
		if _, err := b.pool.Exec(context.Background(), "UPDATE redrive_record_data SET value = $1 WHERE id = $2", c.value, ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	byID := itemsBy(t, b, "/ojs/v1/dead-letter?queue=previews", func(x listItem) string { return x.ID })
	for i, c := range cases {
		it := byID[ids[i]]
		if *it.ValueEncoding != c.enc || it.ValueTruncated != c.truncated || (it.Payload != nil) != c.payload || *it.ValueSize != len(c.value) {
			t.Errorf("case %d: encoding %s truncated %t payload %t size %d; want %s %t %t %d", i, *it.ValueEncoding, it.ValueTruncated,
				it.Payload != nil, *it.ValueSize, c.enc, c.truncated, c.payload, len(c.value))
			continue
		}
		var got []byte
		if c.enc == "base64" {
			var err error
			if got, err = base64.StdEncoding.DecodeString(*it.Value); err != nil {
				t.Errorf("case %d: preview is not base64: %v", i, err)
			}
		} else {
			got = []byte(*it.Value)
			if !utf8.Valid(got) {
				t.Errorf("case %d: preview is not valid UTF-8", i)
			}
		}
		if len(*it.Value) > 4096 || !bytes.HasPrefix(c.value, got) || (!c.truncated && len(got) != len(c.value)) || (c.truncated && len(got) < 3000) {
			t.Errorf("case %d: preview of %d bytes (%d as text) is not a prefix of the value, or too short", i, len(got), len(*it.Value))
		}
		if k := *it.Key; !it.KeyTruncated || *it.KeySize != 1200 || len(k) != 1024 || !utf8.ValidString(k) || k != strings.Repeat("ü", 512) {
			t.Errorf("case %d: key preview %d bytes (size %d, cut %t)", i, len(k), *it.KeySize, it.KeyTruncated)
		}
	}
}
