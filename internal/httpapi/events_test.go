package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/events"
	"github.com/redrive/redrive/internal/eventually"
	"github.com/redrive/redrive/internal/testdate"
)

// stream is an open event stream.
type stream struct {
	resp  *http.Response
	lines chan string
}

// openStream opens GET /ojs/v1/events?query with key and waits for its
// ": connected" line; a refused stream is returned with its status and body.
func (b *bundle) openStream(t *testing.T, key, query string) (*stream, resp) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/ojs/v1/events?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	// A client of its own per stream: the default one keeps 2 idle
	// connections per host, and this test needs every stream on its own.
	hresp, err := (&http.Client{Transport: &http.Transport{}}).Do(req) //nolint:bodyclose // closed below when refused, else by the test's cleanup (the stream is read on a goroutine)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if hresp.StatusCode != http.StatusOK {
		defer cancel()
		defer hresp.Body.Close()
		body, _ := io.ReadAll(hresp.Body)
		out := resp{status: hresp.StatusCode, header: hresp.Header.Clone(), body: body}
		if hresp.Close { // the client takes the header out and says it here
			out.header.Set("Connection", "close")
		}
		b.validate(t, http.MethodGet, "/ojs/v1/events?"+query, req.Header, nil, out)
		return nil, out
	}
	s := &stream{resp: hresp, lines: make(chan string, 1000)}
	t.Cleanup(func() { cancel(); hresp.Body.Close() })
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(hresp.Body)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	select {
	case l := <-s.lines:
		if l != ": connected" {
			t.Fatalf("first line %q", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream never connected")
	}
	return s, resp{status: http.StatusOK}
}

func (s *stream) close() { s.resp.Body.Close() }

// Streams are capped per key and in total: past a cap the answer is a 503
// in the error envelope with Retry-After, on a connection the server closes,
// while health checks and the API answer as usual. A closed stream frees its
// place.
func TestEventStreamsAreCappedPerKeyAndInTotal(t *testing.T) {
	t.Parallel()
	b := start(t, options{env: map[string]string{"REDRIVE_EVENTS_MAX_STREAMS": "5", "REDRIVE_EVENTS_MAX_STREAMS_PER_KEY": "3"}})
	var reads []*stream
	for range 3 {
		s, r := b.openStream(t, readKey, "")
		wantStatus(t, r, http.StatusOK)
		reads = append(reads, s)
	}
	refused := func(what, key, setting string) {
		t.Helper()
		for range 20 { // refusals hold nothing: asking again and again changes nothing
			_, r := b.openStream(t, key, "topic=orders")
			wantError(t, what, r, http.StatusServiceUnavailable, "backend_error", "")
			if ra := r.header.Get("Retry-After"); ra == "" || strings.Trim(ra, "0123456789") != "" {
				t.Fatalf("%s: Retry-After %q, want a number of seconds", what, ra)
			}
			if c := r.header.Get("Connection"); c != "close" {
				t.Errorf("%s: Connection %q, want close (a refused client must not keep a connection)", what, c)
			}
			if e := r.err(t); e.Error.Details["setting"] != setting {
				t.Fatalf("%s: %+v, want details naming %s", what, e.Error, setting)
			}
		}
	}
	refused("a 4th stream of the read key", readKey, "REDRIVE_EVENTS_MAX_STREAMS_PER_KEY")
	var writes []*stream
	for range 2 {
		s, r := b.openStream(t, writeKey, "")
		wantStatus(t, r, http.StatusOK)
		writes = append(writes, s)
	}
	refused("a 6th stream", writeKey, "REDRIVE_EVENTS_MAX_STREAMS")

	// The rest of the server answers as usual.
	wantStatus(t, b.do(t, req{method: "GET", path: "/healthz"}), http.StatusOK)
	wantStatus(t, b.do(t, req{method: "GET", path: "/ojs/v1/dead-letter", key: readKey}), http.StatusOK)
	metrics := b.metricsText(t)
	for _, want := range []string{"redrive_events_streams 5", `redrive_events_streams_refused_total{reason="max_streams"} 20`,
		`redrive_events_streams_refused_total{reason="max_streams_per_key"} 20`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Every stream still gets events.
	wantStatus(t, b.send(t, http.MethodPost, "/ojs/v1/queues/orders/pause", nil, nil), http.StatusOK)
	for i, s := range append(reads, writes...) {
		waitLine(t, s, "event: queue.paused", fmt.Sprintf("stream %d", i))
	}

	// A closed stream frees its place, in total and for its key.
	writes[0].close()
	eventually.True(t, "the closed stream to be released", func() bool { return b.gauge(t, "redrive_events_streams") == "4" }, eventually.Within(10*time.Second))
	_, r := b.openStream(t, readKey, "")
	wantStatus(t, r, http.StatusServiceUnavailable) // the read key is still at its cap
	s, r := b.openStream(t, writeKey, "")
	wantStatus(t, r, http.StatusOK)
	s.close()
}

func waitLine(t *testing.T, s *stream, want, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("%s ended before %q", what, want)
			}
			if l == want {
				return
			}
		case <-deadline:
			t.Fatalf("%s: no %q", what, want)
		}
	}
}

// A client that stops reading is dropped: once its connection's buffers are
// full a write times out, the server closes the connection and the stream's
// place, goroutine and buffered events are released.
func TestStalledEventStreamIsDropped(t *testing.T) {
	t.Parallel()
	b := start(t, options{env: map[string]string{"REDRIVE_EVENTS_WRITE_TIMEOUT": "300ms"}})
	// A small receive buffer, set before connecting, so that a few events fill it.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10) })
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(b.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /ojs/v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", readKey)
	br := bufio.NewReaderSize(conn, 128)
	_ = conn.SetReadDeadline(testdate.Now().Add(10 * time.Second))
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(l, ": connected") {
			break
		}
	}
	// The client reads nothing more. Publish far more than its buffers hold:
	// 2,000 events of 8 KiB.
	pub := b.app.Events()
	pad := strings.Repeat("x", 8<<10)
	for i := range 2000 {
		pub.Publish(context.Background(), events.Event{Type: events.QueueConfigUpdated, Subject: "orders", Queue: "orders",
			Data: map[string]any{"i": i, "pad": pad}})
	}
	// The server gives up on the stream, because a write timed out or its
	// buffer overflowed (counted either way): its place and subscription are
	// released.
	eventually.True(t, "the stalled stream to be dropped", func() bool {
		m := b.metricsText(t)
		return strings.Contains(m, "redrive_events_subscribers 0") && strings.Contains(m, "redrive_events_streams 0") &&
			!(strings.Contains(m, `redrive_events_streams_dropped_total{reason="write_timeout"} 0`) &&
				strings.Contains(m, `redrive_events_streams_dropped_total{reason="buffer_full"} 0`))
	}, eventually.Within(10*time.Second))
	// It closed the connection: reading on drains what was buffered and then
	// meets its end.
	_ = conn.SetReadDeadline(testdate.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, br); err != nil && !isReset(err) {
		t.Fatalf("the server did not close the stalled stream's connection: %v", err)
	}
}

func isReset(err error) bool { return strings.Contains(err.Error(), "connection reset") }

// Filters are bounded: too many topics or types, and topic names Kafka would
// not allow, are a 400 naming the parameter, before any stream is opened.
func TestHugeEventFilterIsRefused(t *testing.T) {
	t.Parallel()
	b := start(t, options{})
	many := make([]string, 7000)
	for i := range many {
		many[i] = fmt.Sprintf("t%d", i)
	}
	for _, tc := range []struct{ query, param string }{
		{"topic=" + strings.Join(many, ","), "topic"},
		{"topic=" + strings.Join(many[:60], ",") + "&queue=" + strings.Join(many[60:120], ","), "queue"},
		{"queue=" + strings.Repeat("q", 250), "queue"},
		{"topic=orders*", "topic"},
		{"topic=" + url.QueryEscape("orders billing"), "topic"},
		{"type=" + strings.Repeat("dead_letter.added,", 101), "type"},
	} {
		_, r := b.openStream(t, readKey, tc.query)
		wantError(t, tc.query[:min(len(tc.query), 40)], r, http.StatusBadRequest, "invalid_request", tc.param)
	}
	// At the bound it is fine.
	s, r := b.openStream(t, readKey, "topic="+strings.Join(many[:100], ",")+"&type="+strings.Repeat("dead_letter.added,", 100))
	wantStatus(t, r, http.StatusOK)
	s.close()
}

// metricsText is what /metrics shows.
func (b *bundle) metricsText(t *testing.T) string {
	t.Helper()
	r, err := http.Get(b.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// gauge reads an unlabelled gauge from /metrics.
func (b *bundle) gauge(t *testing.T, name string) string {
	t.Helper()
	for l := range strings.SplitSeq(b.metricsText(t), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	return ""
}
