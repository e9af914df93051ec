package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/console"
)

func get(t *testing.T, h http.Handler, method, path string) (*http.Response, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	body, _ := io.ReadAll(w.Result().Body)
	return w.Result(), string(body)
}

// The console's pages are its index for every path (it routes itself), its
// assets are embedded, and config.json says whether the API wants a key.
func TestConsoleServesItsFiles(t *testing.T) {
	on := console.Handler(console.Config{})
	for _, path := range []string{"/ui/", "/ui/records", "/ui/records/01a20f81-ca5e-77b0-8ae3-4ccb81ca813d", "/ui/tasks"} {
		resp, body := get(t, on, http.MethodGet, path)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<script type="module" src="/ui/assets/app.js">`) {
			t.Errorf("GET %s: %d, body %.80q", path, resp.StatusCode, body)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: CSP %q: the console must make no external requests", path, csp)
		}
	}
	for path, want := range map[string]string{"/ui/assets/app.js": "javascript", "/ui/assets/style.css": "text/css"} {
		resp, body := get(t, on, http.MethodGet, path)
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), want) || len(body) < 100 {
			t.Errorf("GET %s: %d %s (%d bytes)", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
	}
	if resp, _ := get(t, on, http.MethodGet, "/ui/assets/nope.js"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a missing asset: %d, want 404", resp.StatusCode)
	}
	if _, body := get(t, on, http.MethodGet, "/ui/config.json"); body != `{"auth":true}` {
		t.Errorf("config with keys on: %s", body)
	}
	if _, body := get(t, console.Handler(console.Config{AuthDisabled: true}), http.MethodGet, "/ui/config.json"); body != `{"auth":false}` {
		t.Errorf("config with auth off: %s", body)
	}
	if resp, _ := get(t, on, http.MethodPost, "/ui/"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", resp.StatusCode)
	}
}
