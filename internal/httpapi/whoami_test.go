package httpapi_test

import (
	"net/http"
	"testing"
)

type whoamiJSON struct {
	Auth  bool    `json:"auth"`
	Key   *string `json:"key"`
	Scope string  `json:"scope"`
}

// whoami names the caller's key and scope; any valid key may ask, no key or
// a wrong one is 401.
func TestWhoamiNamesTheKeyAndItsScope(t *testing.T) {
	b := setup(t)
	for key, want := range map[string]whoamiJSON{readKey: {Auth: true, Scope: "read"}, writeKey: {Auth: true, Scope: "write"}} {
		var got whoamiJSON
		wantStatus(t, b.do(t, req{method: http.MethodGet, path: "/ojs/v1/whoami", key: key}).decode(t, &got), http.StatusOK)
		name := map[string]string{readKey: "ops-read", writeKey: "ops-write"}[key]
		if got.Auth != want.Auth || got.Scope != want.Scope || got.Key == nil || *got.Key != name {
			t.Errorf("whoami with %s = %+v, want key %s scope %s", name, got, name, want.Scope)
		}
	}
	// X-API-Key works as well.
	var got whoamiJSON
	wantStatus(t, b.do(t, req{method: http.MethodGet, path: "/ojs/v1/whoami", header: http.Header{"X-Api-Key": {readKey}}}).decode(t, &got), http.StatusOK)
	if got.Key == nil || *got.Key != "ops-read" {
		t.Errorf("whoami with X-API-Key = %+v", got)
	}
	wantError(t, "no key", b.do(t, req{method: http.MethodGet, path: "/ojs/v1/whoami"}), 401, "unauthorized", "")
	wantError(t, "wrong key", b.do(t, req{method: http.MethodGet, path: "/ojs/v1/whoami", key: "rdk_wrong"}), 401, "unauthorized", "")
	wantError(t, "unknown parameter", b.do(t, req{method: http.MethodGet, path: "/ojs/v1/whoami?x=1", key: readKey}), 400, "invalid_request", "x")
}

// With auth disabled (redrive dev) no key is needed and every action is allowed.
func TestWhoamiWithAuthDisabled(t *testing.T) {
	t.Parallel()
	b := start(t, options{env: map[string]string{"REDRIVE_AUTH_DISABLED": "true"}})
	r := b.do(t, req{method: http.MethodGet, path: "/ojs/v1/whoami"})
	wantStatus(t, r, http.StatusOK)
	want := `{"auth":false,"key":null,"scope":"write","kind":"anonymous","name":"anonymous (auth disabled)","email":null,` +
		`"roles":["anonymous"],"grants":[{"role":"anonymous","actions":["admin"],"queues":["*"]}],"login":false}` + "\n"
	if string(r.body) != want {
		t.Errorf("whoami with auth disabled = %s", r.body)
	}
}

// decode reads the body into out and returns r, for chaining into wantStatus.
func (r resp) decode(t *testing.T, out any) resp {
	t.Helper()
	if r.status == http.StatusOK {
		r.json(t, out)
	}
	return r
}
