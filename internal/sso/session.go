package sso

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/redrive/redrive/internal/auth"
)

// Cookie names.
const (
	// SessionCookie holds a console session: who logged in, until when.
	SessionCookie = "redrive_session"
	// loginCookie holds a login under way: state, nonce, PKCE verifier and
	// the page to return to. It lives for loginTTL on the callback path.
	loginCookie = "redrive_login"
)

// loginTTL bounds how long a login at the provider may take.
const loginTTL = 10 * time.Minute

// session is what the session cookie holds, encrypted and authenticated.
// Groups are only those the roles file names (auth.Roles.Relevant), so
// the cookie stays small; roles are worked out again on every request.
type session struct {
	Subject string    `json:"sub"`
	Email   string    `json:"email,omitempty"`
	Groups  []string  `json:"groups,omitempty"`
	Expires time.Time `json:"exp"`
}

// login is what the login cookie holds.
type login struct {
	State    string    `json:"state"`
	Nonce    string    `json:"nonce"`
	Verifier string    `json:"verifier"`
	Return   string    `json:"return"`
	Expires  time.Time `json:"exp"`
}

// sealer encrypts and authenticates cookie values with AES-256-GCM; the
// cookie's name is the additional data, so a value cannot be moved from
// one cookie to the other.
type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (*sealer, error) {
	if key == nil {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("sso: the session key must be 32 bytes, got %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(name string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(name))), nil
}

func (s *sealer) open(name, value string, v any) error {
	if len(value) > maxTokenBytes {
		return errors.New("cookie too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(b) < s.aead.NonceSize() {
		return errors.New("malformed cookie")
	}
	plain, err := s.aead.Open(nil, b[:s.aead.NonceSize()], b[s.aead.NonceSize():], []byte(name))
	if err != nil {
		return errors.New("cookie not sealed with this server's key")
	}
	return json.Unmarshal(plain, v)
}

// Session returns the principal of the request's session cookie, if it
// carries a valid, unexpired one.
func (s *SSO) Session(r *http.Request) (auth.Principal, bool) {
	if s == nil {
		return auth.Principal{}, false
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return auth.Principal{}, false
	}
	var sess session
	if err := s.cookies.open(SessionCookie, c.Value, &sess); err != nil || sess.Subject == "" || !s.cfg.Now().Before(sess.Expires) {
		return auth.Principal{}, false
	}
	return s.principal(auth.Identity{Subject: sess.Subject, Email: sess.Email, Groups: sess.Groups}), true
}

// HasSessionCookie reports whether the request carries a session cookie at
// all (valid or not): a console whose session ended gets a 401 that sends
// it to the login, rather than the key prompt.
func HasSessionCookie(r *http.Request) bool {
	_, err := r.Cookie(SessionCookie)
	return err == nil
}

// Handler serves the login flow: LoginPath (to the provider), CallbackPath
// (back from it: checks state, exchanges the code with the PKCE verifier,
// verifies the ID token and its nonce, sets the session cookie) and
// LogoutPath (POST: ends the session).
func (s *SSO) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+LoginPath, s.startLogin)
	mux.HandleFunc("GET "+CallbackPath, s.callback)
	mux.HandleFunc("POST "+LogoutPath, s.logout)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		if !s.LoginEnabled() {
			http.Error(w, "single sign-on login is not configured (REDRIVE_OIDC_REDIRECT_URL)", http.StatusNotFound)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// returnPath is where to go after the login: a console path, or the
// console's home (never another site: "//host" is not a path).
func returnPath(v string) string {
	if (v == "/ui" || strings.HasPrefix(v, "/ui/")) && !strings.ContainsAny(v, "\\\r\n") && len(v) <= 2048 {
		return v
	}
	return "/ui/"
}

func randomString() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *SSO) startLogin(w http.ResponseWriter, r *http.Request) {
	if _, err := s.discover(r.Context()); err != nil {
		s.failPage(w, http.StatusServiceUnavailable, "The identity provider cannot be reached right now. Try again in a moment.")
		return
	}
	l := login{State: randomString(), Nonce: randomString(), Verifier: oauth2.GenerateVerifier(),
		Return: returnPath(r.URL.Query().Get("return")), Expires: s.cfg.Now().Add(loginTTL)}
	v, err := s.cookies.seal(loginCookie, l)
	if err != nil {
		s.failPage(w, http.StatusInternalServerError, "The login could not be started.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: v, Path: CallbackPath, MaxAge: int(loginTTL / time.Second),
		HttpOnly: true, Secure: s.secure(r), SameSite: http.SameSiteLaxMode})
	u := s.oauthConfig(s.provider).AuthCodeURL(l.State, oidc.Nonce(l.Nonce), oauth2.S256ChallengeOption(l.Verifier))
	http.Redirect(w, r, u, http.StatusFound)
}

func (s *SSO) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	spent := &http.Cookie{Name: loginCookie, Path: CallbackPath, MaxAge: -1, HttpOnly: true, Secure: s.secure(r), SameSite: http.SameSiteLaxMode}
	c, err := r.Cookie(loginCookie)
	var l login
	if err != nil || s.cookies.open(loginCookie, c.Value, &l) != nil || !s.cfg.Now().Before(l.Expires) {
		s.failPage(w, http.StatusBadRequest, "This login was not started here, or took too long.")
		return
	}
	http.SetCookie(w, spent)
	if e := q.Get("error"); e != "" {
		s.log.Info("login refused by the identity provider", "error", e, "description", q.Get("error_description"))
		s.failPage(w, http.StatusUnauthorized, "The identity provider refused the login ("+e+").")
		return
	}
	if q.Get("state") == "" || q.Get("state") != l.State {
		s.failPage(w, http.StatusBadRequest, "The login's state does not match: start again.")
		return
	}
	if q.Get("code") == "" {
		s.failPage(w, http.StatusBadRequest, "The identity provider sent no authorization code.")
		return
	}
	v, err := s.discover(r.Context())
	if err != nil {
		s.failPage(w, http.StatusServiceUnavailable, "The identity provider cannot be reached right now. Try again in a moment.")
		return
	}
	ctx := oidc.ClientContext(r.Context(), s.cfg.HTTPClient)
	tok, err := s.oauthConfig(s.provider).Exchange(ctx, q.Get("code"), oauth2.VerifierOption(l.Verifier))
	if err != nil {
		s.log.Warn("exchange the authorization code", "err", err)
		s.failPage(w, http.StatusBadGateway, "The identity provider did not accept the authorization code.")
		return
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok {
		s.failPage(w, http.StatusBadGateway, "The identity provider sent no ID token.")
		return
	}
	idt, err := v.Verify(ctx, raw)
	if err != nil {
		s.log.Warn("verify the ID token of a login", "err", err)
		s.failPage(w, http.StatusUnauthorized, "The ID token is not valid.")
		return
	}
	if idt.Nonce != l.Nonce {
		s.failPage(w, http.StatusUnauthorized, "The ID token's nonce does not match this login.")
		return
	}
	id, err := s.identity(idt)
	if err != nil {
		s.failPage(w, http.StatusUnauthorized, "The ID token says nothing usable: "+err.Error())
		return
	}
	sess := session{Subject: id.Subject, Email: id.Email, Groups: s.cfg.Roles.Relevant(id.Groups), Expires: s.cfg.Now().Add(s.cfg.SessionTTL)}
	val, err := s.cookies.seal(SessionCookie, sess)
	if err != nil {
		s.failPage(w, http.StatusInternalServerError, "The session could not be made.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: val, Path: "/", MaxAge: int(s.cfg.SessionTTL / time.Second),
		HttpOnly: true, Secure: s.secure(r), SameSite: http.SameSiteLaxMode})
	s.log.Info("logged in", "subject", id.Subject, "email", id.Email, "roles", s.principal(id).Roles())
	http.Redirect(w, r, l.Return, http.StatusFound)
}

// logout ends the session here (the provider's own session is left alone).
func (s *SSO) logout(w http.ResponseWriter, r *http.Request) {
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		http.Error(w, "logout is accepted only from this server's pages", http.StatusForbidden)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.secure(r), SameSite: http.SameSiteLaxMode})
	w.WriteHeader(http.StatusNoContent)
}

var failTmpl = template.Must(template.New("fail").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Redrive: login failed</title></head>
<body><h1>Login failed</h1><p>{{.}}</p><p><a href="/ui/">Back to the console</a></p></body></html>
`))

func (s *SSO) failPage(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = failTmpl.Execute(w, msg)
}
