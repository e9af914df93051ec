package sso_test

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/idptest"
	"github.com/redrive/redrive/internal/sso"
	"github.com/redrive/redrive/internal/testdate"
)

const roles = `roles:
  pay: {actions: [read, retry], queues: ["payments.*"]}
members:
  - {group: payments, roles: [pay]}
`

type fixture struct {
	is   *idptest.Issuer
	sso  *sso.SSO
	srv  *httptest.Server
	now  *atomic.Int64
	jar  http.CookieJar
	http *http.Client
}

func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{is: idptest.New(t, "redrive"), now: &atomic.Int64{}}
	f.now.Store(testdate.Now().Unix())
	r, err := auth.ParseRoles([]byte(roles))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	f.sso, err = sso.New(context.Background(), sso.Config{Issuer: f.is.URL, ClientID: "redrive", RedirectURL: f.srv.URL + sso.CallbackPath,
		Roles: r, SessionTTL: time.Hour, Now: func() time.Time { return time.Unix(f.now.Load(), 0) }})
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/auth/", f.sso.Handler())
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		if p, ok := f.sso.Session(r); ok {
			_, _ = w.Write([]byte("hello " + p.Name + " " + strings.Join(p.Roles(), ",")))
			return
		}
		http.Error(w, "no session", http.StatusUnauthorized)
	})
	f.jar, _ = cookiejar.New(nil)
	f.http = &http.Client{Jar: f.jar}
	return f
}

func (f *fixture) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := f.http.Get(f.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

// The code flow with PKCE, state and nonce ends in a session cookie that
// names the person and their roles, at the page the login was started
// from; the session ends after its TTL and on logout.
func TestLoginFlow(t *testing.T) {
	f := setup(t)
	f.is.SetUser(idptest.User{Subject: "u-ann", Email: "ann@example.com", Groups: []string{"payments", "g1", "g2"}})
	status, body := f.get(t, "/auth/login?return=/ui/records")
	if status != 200 || body != "hello u-ann pay" {
		t.Fatalf("after the login: %d %q", status, body)
	}
	u, _ := url.Parse(f.srv.URL)
	var session *http.Cookie
	for _, c := range f.jar.Cookies(u) {
		if c.Name == sso.SessionCookie {
			session = c
		}
	}
	if session == nil {
		t.Fatal("no session cookie")
	}
	// A cookie altered by one byte is no session.
	v := []byte(session.Value)
	v[10] ^= 1
	req, _ := http.NewRequest("GET", f.srv.URL+"/ui/", nil)
	req.AddCookie(&http.Cookie{Name: sso.SessionCookie, Value: string(v)})
	if _, ok := f.sso.Session(req); ok {
		t.Error("a tampered cookie is a session")
	}
	// Past its TTL the session is over.
	f.now.Add(int64(time.Hour/time.Second) + 1)
	if status, _ := f.get(t, "/ui/"); status != 401 {
		t.Errorf("after the TTL: %d, want 401", status)
	}
	f.now.Store(testdate.Now().Unix())
	f.get(t, "/auth/login")
	resp, err := f.http.Post(f.srv.URL+sso.LogoutPath, "application/json", nil)
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("logout: %v %v", resp, err)
	}
	if status, _ := f.get(t, "/ui/"); status != 401 {
		t.Errorf("after logout: %d, want 401", status)
	}
}

// A callback whose state does not match the login's, or with no login
// started here, is refused; the return path never leaves the console.
func TestCallbackChecksState(t *testing.T) {
	f := setup(t)
	f.is.SetUser(idptest.User{Subject: "u-ann", Groups: []string{"payments"}})
	noFollow := &http.Client{Jar: f.jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(f.srv.URL + "/auth/login?return=//evil.example/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	authURL, _ := url.Parse(resp.Header.Get("Location"))
	q := authURL.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" || q.Get("state") == "" {
		t.Fatalf("authorization request lacks PKCE, nonce or state: %s", authURL)
	}
	// The provider answers, but the state is another one.
	resp, err = noFollow.Get(authURL.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cb, _ := url.Parse(resp.Header.Get("Location"))
	good := cb.Query()
	bad := cb.Query()
	bad.Set("state", "forged")
	cb.RawQuery = bad.Encode()
	if resp, err = noFollow.Get(cb.String()); err != nil || resp.StatusCode != 400 {
		t.Fatalf("forged state: %v %v", resp.StatusCode, err)
	}
	// A fresh client (no login cookie) with the right state: refused too.
	cb.RawQuery = good.Encode()
	if resp, err = http.Get(cb.String()); err != nil || resp.StatusCode != 400 {
		t.Fatalf("callback without a login: %v %v", resp.StatusCode, err)
	}
	// The return path of a hostile login is the console's home.
	f.get(t, "/auth/login?return=//evil.example/x")
	resp, err = noFollow.Get(f.srv.URL + "/auth/login?return=https://evil.example/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	authURL, _ = url.Parse(resp.Header.Get("Location"))
	resp, _ = noFollow.Get(authURL.String())
	resp.Body.Close()
	resp, _ = noFollow.Get(resp.Header.Get("Location"))
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); loc != "/ui/" {
		t.Errorf("after a login asked to return to another site, the callback sends to %q", loc)
	}
}

// A JWT looks like one; an API key does not.
func TestLooksLikeJWT(t *testing.T) {
	is := idptest.New(t, "redrive")
	if !sso.LooksLikeJWT(is.Token(map[string]any{"sub": "x"})) || sso.LooksLikeJWT("rdk_abc-def_ghi") || sso.LooksLikeJWT("a.b.c") {
		t.Error("LooksLikeJWT is wrong")
	}
}
