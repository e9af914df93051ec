package httpapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/uuid"

	"github.com/redrive/redrive/api"
	"github.com/redrive/redrive/internal/dlq"
)

// With auth disabled, a page on another origin paused a queue and ran
// requeue-all with form POSTs. Every write now needs Content-Type:
// application/json (which a form cannot send without a CORS preflight, never
// granted here), and one whose Origin or Sec-Fetch-Site names another site
// is refused.
func TestCrossSiteFormsCannotWrite(t *testing.T) {
	t.Parallel()
	b := start(t, options{env: map[string]string{"REDRIVE_AUTH_DISABLED": "true"}})
	b.seed(t, rec{queue: "orders"}, rec{queue: "orders"})
	form := func(method, path, ct string) req {
		h := http.Header{}
		if ct != "" {
			h.Set("Content-Type", ct)
		}
		return req{method: method, path: path, body: "confirm=true", rawBody: true, header: h}
	}
	for _, r := range []req{
		form("POST", "/ojs/v1/queues/orders/pause", "application/x-www-form-urlencoded"),
		form("POST", "/ojs/v1/queues/orders/pause", "text/plain"),
		form("POST", "/ojs/v1/queues/orders/pause", "multipart/form-data; boundary=x"),
		form("POST", "/ojs/v1/queues/orders/pause", ""),
		// Without a body but with the console's cookie: what a browser
		// would send for a page.
		{method: "POST", path: "/ojs/v1/queues/orders/pause", rawBody: true, header: http.Header{"Cookie": {"redrive_session=x"}}},
		form("POST", "/api/dlq/requeue-all/dlq:orders", "application/x-www-form-urlencoded"),
		form("POST", "/api/dlq/requeue/dlq:orders", "text/plain"),
		form("DELETE", "/api/dlq/dlq:orders", ""),
		form("POST", "/ojs/v1/dead-letter/retry", "text/plain"),
	} {
		what := r.method + " " + r.path + " as " + r.header.Get("Content-Type")
		r := b.do(t, r)
		wantError(t, what, r, http.StatusUnsupportedMediaType, "invalid_request", "Content-Type")
		if e := r.err(t); !strings.Contains(e.Error.Message, "application/json") {
			t.Errorf("415 does not say what to send: %s", e.Error.Message)
		}
	}
	// JSON from a page of another origin is refused too (a browser would
	// have asked first, but the server does not rely on that alone).
	for _, h := range []http.Header{
		{"Origin": {"https://evil.example"}},
		{"Origin": {"null"}},
		{"Origin": {strings.Replace(b.base, "127.0.0.1", "localhost", 1)}}, // same port, another host: another origin
		{"Sec-Fetch-Site": {"cross-site"}},
		{"Sec-Fetch-Site": {"same-site"}},
	} {
		for _, path := range []string{"/ojs/v1/queues/orders/pause", "/api/dlq/requeue-all/dlq:orders"} {
			r := b.do(t, req{method: "POST", path: path, header: h})
			wantError(t, path+" from "+strings.Join(slices.Concat(h["Origin"], h["Sec-Fetch-Site"]), ""), r, http.StatusForbidden, "forbidden", "Origin")
		}
	}
	var q struct {
		State string `json:"state"`
	}
	wantStatus(t, b.get(t, "/ojs/v1/queues/orders", &q), http.StatusOK)
	if q.State != "active" {
		t.Errorf("queue orders is %s after refused writes", q.State)
	}
	if n := b.count(t, "state = $1", string(dlq.StateDiscarded)); n != 2 {
		t.Errorf("%d records still discarded after refused requeues, want 2", n)
	}

	// The console's own pages (same origin, with the header) and clients
	// outside a browser (no Origin) may write; so may a reference-DLQ
	// client that sends X-API-Key and no Content-Type, and a client
	// without a body and without Content-Type, as the OJS specs' examples
	// (no cookie, or a credential of its own beside it).
	same := http.Header{"Origin": {b.base}, "Sec-Fetch-Site": {"same-origin"}}
	wantStatus(t, b.do(t, req{method: "POST", path: "/ojs/v1/queues/orders/pause", header: same}), http.StatusOK)
	wantStatus(t, b.do(t, req{method: "POST", path: "/ojs/v1/queues/orders/resume"}), http.StatusOK)
	wantStatus(t, b.do(t, req{method: "POST", path: "/ojs/v1/queues/orders/pause", rawBody: true}), http.StatusOK)
	wantStatus(t, b.do(t, req{method: "POST", path: "/ojs/v1/queues/orders/resume", rawBody: true,
		header: http.Header{"Cookie": {"redrive_session=x"}, "Authorization": {"Bearer any"}}}), http.StatusOK)
	compat := b.do(t, req{method: "DELETE", path: "/api/dlq/dlq:orders", rawBody: true, header: http.Header{"X-API-Key": {"any"}}})
	wantStatus(t, compat, http.StatusOK)
	if n := b.count(t, "TRUE"); n != 0 {
		t.Errorf("%d records after the compat clear, want 0", n)
	}
}

// Every write route of the OpenAPI document refuses a form from a caller
// with a key (415), and every answer says X-Frame-Options: DENY.
func TestEveryWriteRouteRefusesAForm(t *testing.T) {
	b := setup(t)
	id := b.seed(t, rec{})[0]
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	params := strings.NewReplacer("{id}", id, "{name}", "orders", "{queue}", "dlq:orders")
	n := 0
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if method == http.MethodGet || method == http.MethodHead {
				continue
			}
			p := params.Replace(path)
			if strings.HasPrefix(p, "/ojs/v1/tasks/") {
				p = strings.Replace(p, id, uuid.NewString(), 1)
			}
			h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
			r := b.do(t, req{method: method, path: p, key: writeKey, body: "a=1", rawBody: true, header: h})
			if strings.HasPrefix(path, "/api/dlq") {
				// These take their key in X-API-Key only, which a form
				// cannot send (and which would stand in for the JSON
				// type): 401 here; TestCrossSiteFormsCannotWrite has them
				// with auth disabled.
				wantError(t, method+" "+path, r, http.StatusUnauthorized, "unauthorized", "")
			} else {
				wantError(t, method+" "+path, r, http.StatusUnsupportedMediaType, "invalid_request", "Content-Type")
			}
			if r.header.Get("X-Frame-Options") != "DENY" {
				t.Errorf("%s %s: X-Frame-Options %q", method, path, r.header.Get("X-Frame-Options"))
			}
			n++
		}
	}
	if n < 17 {
		t.Errorf("checked %d write routes; the document has more", n)
	}
	if n := b.count(t, "TRUE"); n != 1 {
		t.Errorf("%d records after refused writes, want 1", n)
	}
}
