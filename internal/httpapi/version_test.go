package httpapi_test

import (
	"net/http"
	"testing"
)

// Every response of the API carries OJS-Version: 1.0, errors included, and
// its errors say whether trying again may help (retryable). A request for
// another version of OJS is refused with 422 unsupported; 1.0 (or 1) is
// served.
func TestOJSVersionAndRetryable(t *testing.T) {
	b := setup(t)
	for _, c := range []struct {
		path, version string
		status        int
	}{
		{"/ojs/v1/queues", "", http.StatusOK},
		{"/ojs/v1/queues", "1.0", http.StatusOK},
		{"/ojs/v1/queues", "1", http.StatusOK},
		{"/ojs/v1/dead-letter/01a25166-1fb0-7ec9-916a-6776faf2da91", "", http.StatusNotFound},
		{"/ojs/v1/dead-letter?limit=-1", "", http.StatusBadRequest},
		{"/ojs/v1/no-such-route", "", http.StatusNotFound},
		{"/healthz", "", http.StatusOK},
	} {
		h := http.Header{}
		if c.version != "" {
			h.Set("OJS-Version", c.version)
		}
		r := b.do(t, req{method: http.MethodGet, path: c.path, key: readKey, header: h})
		if r.status != c.status || r.header.Get("OJS-Version") != "1.0" {
			t.Errorf("GET %s (OJS-Version %q): %d, OJS-Version %q; want %d, 1.0", c.path, c.version, r.status, r.header.Get("OJS-Version"), c.status)
		}
		if r.status >= 400 {
			var e struct {
				Error struct {
					Retryable *bool `json:"retryable"`
				} `json:"error"`
			}
			r.json(t, &e)
			if e.Error.Retryable == nil || *e.Error.Retryable {
				t.Errorf("GET %s: error.retryable %v, want false: %s", c.path, e.Error.Retryable, r.body)
			}
		}
	}
	for _, v := range []string{"2.0", "0.9", "1.1", "latest"} {
		r := b.do(t, req{method: http.MethodGet, path: "/ojs/v1/queues", key: readKey, header: http.Header{"Ojs-Version": {v}}})
		wantError(t, "OJS-Version "+v, r, http.StatusUnprocessableEntity, "unsupported", "OJS-Version")
		if r.header.Get("OJS-Version") != "1.0" {
			t.Errorf("the refusal of %s has OJS-Version %q", v, r.header.Get("OJS-Version"))
		}
	}
}
