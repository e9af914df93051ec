package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/httpapi"
	"github.com/redrive/redrive/internal/testdate"
)

// storeLargeRecords stores n records of queue orders with values of size
// bytes (compact JSON, the common case: written into an export as they
// are), a few at a time, so that the test holds little of them.
func (b *bundle) storeLargeRecords(t *testing.T, n, size int) {
	t.Helper()
	now := testdate.Now().UTC()
	for i := 0; i < n; i += 8 {
		batch := variedRecords(min(8, n-i), now)
		for j := range batch {
			r := &batch[j]
			r.Queue, r.Source.Topic, r.ValueSchema, r.Payload = "orders", "orders", nil, nil
			r.Value = fmt.Appendf(nil, `{"n":%d,"blob":"%s"}`, i+j, bytes.Repeat([]byte{'a' + byte((i+j)%26)}, size-20))
		}
		if _, err := b.store.InsertRecords(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
}

// openExport starts an export and leaves its body unread: the server holds
// it until its client reads or goes. close ends it.
func (b *bundle) openExport(t *testing.T, key string) (status int, header http.Header, close func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/ojs/v1/dead-letter/export?queue=orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	hreq.Header.Set("Authorization", "Bearer "+key)
	hresp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return hresp.StatusCode, hresp.Header, func() { cancel(); hresp.Body.Close() }
}

// Exports are capped per key and in total: past a cap the answer is 503 in
// the error envelope, with Retry-After and details naming the setting,
// whatever scope the key has (read is enough to export). An export whose
// client goes frees its place.
func TestExportsAreCappedPerKeyAndInTotal(t *testing.T) {
	t.Parallel()
	b := start(t, options{env: map[string]string{"REDRIVE_EXPORTS_MAX": "3", "REDRIVE_EXPORTS_MAX_PER_KEY": "2"}})
	// 32 MB: more than the connection buffers hold, so that an export
	// whose client does not read is still running.
	b.storeLargeRecords(t, 32, 1<<20)
	var running []func()
	defer func() {
		for _, c := range running {
			c()
		}
	}()
	hold := func(key string) {
		t.Helper()
		status, _, c := b.openExport(t, key)
		running = append(running, c)
		if status != http.StatusOK {
			t.Fatalf("an export within the caps: status %d", status)
		}
	}
	refused := func(what, key, setting string, limit int) {
		t.Helper()
		for range 5 { // refusals hold nothing: asking again changes nothing
			r := b.do(t, req{method: http.MethodGet, path: "/ojs/v1/dead-letter/export?queue=orders", key: key})
			wantError(t, what, r, http.StatusServiceUnavailable, "backend_error", "")
			if ra := r.header.Get("Retry-After"); ra == "" || strings.Trim(ra, "0123456789") != "" {
				t.Fatalf("%s: Retry-After %q, want a number of seconds", what, ra)
			}
			if e := r.err(t); e.Error.Details["setting"] != setting || e.Error.Details["limit"] != float64(limit) {
				t.Fatalf("%s: %+v, want details naming %s, limit %d", what, e.Error, setting, limit)
			}
		}
	}
	hold(readKey)
	hold(readKey)
	refused("a 3rd export of the read key", readKey, "REDRIVE_EXPORTS_MAX_PER_KEY", 2)
	hold(writeKey)
	refused("a 4th export", writeKey, "REDRIVE_EXPORTS_MAX", 3)
	refused("a 4th export, of another key", botKey, "REDRIVE_EXPORTS_MAX", 3)
	// The rest of the API answers as usual.
	wantStatus(t, b.do(t, req{method: http.MethodGet, path: "/ojs/v1/dead-letter?limit=1", key: readKey}), http.StatusOK)

	// The read key's first client goes: its place is free again.
	running[0]()
	eventually.True(t, "the place of an export whose client went is free", func() bool {
		status, _, c := b.openExport(t, readKey)
		running = append(running, c)
		return status == http.StatusOK
	})
	refused("a 4th export, again", readKey, "REDRIVE_EXPORTS_MAX", 3)
	// The write key's goes: the read key is at its own cap.
	running[2]()
	eventually.True(t, "the read key is refused for its own cap", func() bool {
		r := b.do(t, req{method: http.MethodGet, path: "/ojs/v1/dead-letter/export?queue=orders", key: readKey})
		return r.status == http.StatusServiceUnavailable && r.err(t).Error.Details["setting"] == "REDRIVE_EXPORTS_MAX_PER_KEY"
	})
}

// liveHeap is the test binary's live Go heap: after two collections (the
// second empties the buffers sync.Pools keep), as exact as it gets.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// pausing gives r's bytes up to pauseAt, then says so (paused) and waits
// for resume before it gives the rest.
type pausing struct {
	r              io.Reader
	pauseAt        int64
	read           int64
	paused, resume chan struct{}
}

func (p *pausing) Read(b []byte) (int, error) {
	if p.read == p.pauseAt {
		close(p.paused)
		<-p.resume
		p.pauseAt = -1
	}
	if p.pauseAt > p.read {
		b = b[:min(int64(len(b)), p.pauseAt-p.read)]
	}
	n, err := p.r.Read(b)
	p.read += int64(n)
	return n, err
}

// An export of large records holds one group of them (a few megabytes),
// not a page of 200 whole records and their encoding (300 records of 0.93
// MB took 997 MB); an import of them holds a batch of a few megabytes, not
// 500 records. What each holds is measured on the way, its client reading
// or sending no further, as the live heap (after a collection) above the
// one before. Not parallel: the heap is the test binary's, the servers' too.
func TestExportAndImportOfLargeRecordsHoldAFewMegabytes(t *testing.T) {
	src := start(t, options{})
	dst := start(t, options{})
	const n, size = 64, 1 << 20 // 64 MiB in all
	// A group of records (4 MiB) and the buffers of the connection it is
	// read on: well under the 64 MiB exported, and the more so the more
	// there is to export.
	const bound = 24 << 20
	src.storeLargeRecords(t, n, size)
	export := func() *http.Response {
		t.Helper()
		hreq, _ := http.NewRequest(http.MethodGet, src.base+"/ojs/v1/dead-letter/export", nil)
		hreq.Header.Set("Authorization", "Bearer "+readKey)
		hresp, err := http.DefaultClient.Do(hreq)
		if err != nil {
			t.Fatal(err)
		}
		if hresp.StatusCode != http.StatusOK {
			t.Fatalf("export: %d", hresp.StatusCode)
		}
		return hresp
	}

	// Once first, so that what is measured is not the connections and
	// caches a first call makes.
	hresp := export()
	if _, err := io.Copy(io.Discard, hresp.Body); err != nil {
		t.Fatal(err)
	}
	hresp.Body.Close()
	base := liveHeap()
	hresp = export()
	var held int64
	for range 4 { // a quarter of it at a time, the client then reading no further
		if _, err := io.CopyN(io.Discard, hresp.Body, n*size/8); err != nil {
			t.Fatal(err)
		}
		held = max(held, liveHeap()-base)
	}
	tail := &lastBytes{}
	_, err := io.Copy(tail, hresp.Body)
	hresp.Body.Close()
	if err != nil || !strings.Contains(string(tail.b), fmt.Sprintf(`{"export":{"count":%d,"complete":true`, n)) {
		t.Fatalf("export: %v, ends %q", err, tail.b)
	}
	t.Logf("an export of %d records of %d bytes held %.1f MiB at most", n, size, float64(held)/(1<<20))
	if held > bound {
		t.Errorf("an export of %d records of %d bytes held %d bytes, want at most %d", n, size, held, bound)
	}

	// The same records imported: the body (the test's) is read a batch of
	// a few megabytes at a time.
	var body bytes.Buffer
	hresp = export()
	_, err = io.Copy(&body, hresp.Body)
	hresp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, dst.importNDJSON(t, "", []byte("\n")), http.StatusOK) // once first, as the export
	base = liveHeap()
	in := &pausing{r: bytes.NewReader(body.Bytes()), pauseAt: int64(body.Len() * 3 / 4), paused: make(chan struct{}), resume: make(chan struct{})}
	type answer struct {
		status int
		body   []byte
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		hreq, _ := http.NewRequest(http.MethodPost, dst.base+"/ojs/v1/dead-letter/import", in)
		hreq.Header.Set("Authorization", "Bearer "+writeKey)
		hreq.Header.Set("Content-Type", "application/x-ndjson")
		hresp, err := http.DefaultClient.Do(hreq)
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer hresp.Body.Close()
		b, err := io.ReadAll(hresp.Body)
		done <- answer{hresp.StatusCode, b, err}
	}()
	<-in.paused
	held = 0
	for range 3 {
		held = max(held, liveHeap()-base)
	}
	close(in.resume)
	a := <-done
	if a.err != nil || a.status != http.StatusOK || !strings.Contains(string(a.body), fmt.Sprintf(`"imported":%d`, n)) {
		t.Fatalf("import: %d %s, %v", a.status, a.body, a.err)
	}
	t.Logf("an import of %d records of %d bytes held %.1f MiB three quarters through", n, size, float64(held)/(1<<20))
	if held > bound {
		t.Errorf("an import of %d records of %d bytes held %d bytes three quarters through, want at most %d", n, size, held, bound)
	}
}

// lastBytes keeps the last kilobytes written to it.
type lastBytes struct{ b []byte }

func (l *lastBytes) Write(p []byte) (int, error) {
	l.b = append(l.b, p[len(p)-min(len(p), 4096):]...)
	if len(l.b) > 8192 {
		l.b = append(l.b[:0], l.b[len(l.b)-4096:]...)
	}
	return len(p), nil
}

// spaces is n bytes of blank lines (64 KiB each), made as they are read.
type spaces struct {
	n   int64
	pos int // in blankLine
}

var blankLine = append(bytes.Repeat([]byte{' '}, 64<<10-1), '\n')

func (s *spaces) Read(p []byte) (int, error) {
	if s.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > s.n {
		p = p[:s.n]
	}
	k := 0
	for k < len(p) {
		c := copy(p[k:], blankLine[s.pos:])
		k += c
		s.pos = (s.pos + c) % len(blankLine)
	}
	s.n -= int64(k)
	return k, nil
}

// An import whose body runs past its limit (256 MiB) without saying its
// length is refused with 413 naming the body and the limit, as one that
// says it up front is: not with 422 for the line the limit cut.
func TestImportBodyOverItsLimitIs413(t *testing.T) {
	b := setup(t)
	if _, err := b.store.InsertRecords(context.Background(), variedRecords(1, testdate.Now().UTC())); err != nil {
		t.Fatal(err)
	}
	lines, _, _ := b.export(t, "")
	dst := start(t, options{})
	// Blank lines up to 100 bytes short of the limit, then a record: the
	// limit cuts it.
	send := func(body io.Reader) resp {
		t.Helper()
		hreq, _ := http.NewRequest(http.MethodPost, dst.base+"/ojs/v1/dead-letter/import", body)
		hreq.Header.Set("Authorization", "Bearer "+writeKey)
		hreq.Header.Set("Content-Type", "application/x-ndjson")
		hresp, err := http.DefaultClient.Do(hreq)
		if err != nil {
			t.Fatal(err)
		}
		defer hresp.Body.Close()
		rb, _ := io.ReadAll(hresp.Body)
		return resp{status: hresp.StatusCode, header: hresp.Header, body: rb}
	}
	r := send(io.MultiReader(&spaces{n: httpapi.MaxImportBytes - 100}, bytes.NewReader(lines[0]), strings.NewReader("\n")))
	wantError(t, "a body past the limit", r, http.StatusRequestEntityTooLarge, "invalid_request", "body")
	if e := r.err(t); !strings.Contains(e.Error.Message, fmt.Sprintf("larger than the limit of %d bytes", httpapi.MaxImportBytes)) {
		t.Errorf("a body past the limit: %q, want it to name the limit", e.Error.Message)
	}
	// Within the limit, the same record is imported.
	r = send(io.MultiReader(&spaces{n: 1 << 20}, bytes.NewReader(lines[0]), strings.NewReader("\n")))
	wantStatus(t, r, http.StatusOK)
	if n := dst.count(t, "true"); n != 1 {
		t.Errorf("%d records after the refused and the good import, want 1", n)
	}
}
