package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
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

var appScript = regexp.MustCompile(`<script type="module" src="(/ui/assets/([0-9a-f]{12})/)app.js">`)

// The console's pages are its index for every path (it routes itself); the
// index points at the assets under a versioned URL, preloads every module and
// says whether the API wants a key.
func TestConsoleServesItsFiles(t *testing.T) {
	on := console.Handler(console.Config{})
	var assets string
	for _, path := range []string{"/ui/", "/ui/records", "/ui/records/01a20f81-ca5e-77b0-8ae3-4ccb81ca813d", "/ui/tasks"} {
		resp, body := get(t, on, http.MethodGet, path)
		m := appScript.FindStringSubmatch(body)
		if resp.StatusCode != http.StatusOK || m == nil {
			t.Fatalf("GET %s: %d, body %.300q", path, resp.StatusCode, body)
		}
		assets = m[1]
		for _, want := range []string{`data-auth="on"`, `<link rel="modulepreload" href="` + assets + `lib/dom.js">`, `<link rel="stylesheet" href="` + assets + `style.css">`} {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s: no %s in the index", path, want)
			}
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: CSP %q: the console must make no external requests", path, csp)
		}
		if cc := resp.Header.Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("GET %s: Cache-Control %q: the index must be revalidated, it names the assets' version", path, cc)
		}
	}
	for path, want := range map[string]string{assets + "app.js": "javascript", assets + "lib/dom.js": "javascript", assets + "style.css": "text/css"} {
		resp, body := get(t, on, http.MethodGet, path)
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), want) || len(body) < 100 {
			t.Errorf("GET %s: %d %s (%d bytes)", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
		if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
			t.Errorf("GET %s: Cache-Control %q, want immutable under a versioned URL", path, cc)
		}
	}
	// A page from an older binary still gets the files, but not for keeps.
	if resp, body := get(t, on, http.MethodGet, "/ui/assets/0123456789ab/app.js"); resp.StatusCode != http.StatusOK || len(body) < 100 || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Errorf("an old version's asset: %d, Cache-Control %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
	for _, path := range []string{assets + "nope.js", "/ui/assets/app.js", assets + "../../../go.mod"} {
		if resp, body := get(t, on, http.MethodGet, path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d %.60q, want 404", path, resp.StatusCode, body)
		}
	}
	if _, body := get(t, console.Handler(console.Config{AuthDisabled: true}), http.MethodGet, "/ui/"); !strings.Contains(body, `data-auth="off"`) {
		t.Errorf("auth off: the index does not say so: %.200q", body)
	}
	// The brokers the server is configured with, for the empty overview's
	// kcat hint: escaped as an attribute like everything in the index.
	if _, body := get(t, console.Handler(console.Config{KafkaBrokers: []string{"kafka-0:9092", `b"><script>:9093`}}), http.MethodGet, "/ui/"); !strings.Contains(body, `data-kafka-brokers="kafka-0:9092,b&#34;&gt;&lt;script&gt;:9093"`) {
		t.Errorf("the index does not name the brokers: %.300q", body)
	}
	if resp, _ := get(t, on, http.MethodPost, "/ui/"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", resp.StatusCode)
	}
}

// No page may frame the console (it could be clicked through from around
// it), and the assets' directories are not listed: files only.
func TestConsoleCannotBeFramedAndListsNoDirectory(t *testing.T) {
	on := console.Handler(console.Config{})
	_, index := get(t, on, http.MethodGet, "/ui/")
	assets := appScript.FindStringSubmatch(index)[1]
	for _, path := range []string{"/ui/", "/ui/records", assets + "app.js", assets + "nope.js"} {
		resp, _ := get(t, on, http.MethodGet, path)
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: CSP %q lacks frame-ancestors 'none'", path, csp)
		}
		if xfo := resp.Header.Get("X-Frame-Options"); xfo != "DENY" {
			t.Errorf("GET %s: X-Frame-Options %q, want DENY", path, xfo)
		}
	}
	for _, path := range []string{assets, assets + "lib/", assets + "pages", assets + "lib/../pages/", "/ui/assets/0123456789ab/", "/ui/assets/0123456789ab/lib/"} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			if resp, body := get(t, on, method, path); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "app.js") || strings.Contains(body, "api.js") {
				t.Errorf("%s %s: %d %.80q, want 404 without a listing", method, path, resp.StatusCode, body)
			}
		}
	}
}
