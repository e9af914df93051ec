// Package idptest is an OpenID Connect identity provider for tests: an
// httptest server serving discovery, JWKS, an authorization endpoint that
// logs in the person the test chose (no form to fill) and a token endpoint
// that checks the PKCE verifier, with ID tokens signed by a test RSA key
// (go-jose). Rotate swaps the signing key, as a provider rotating its keys.
package idptest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/redrive/redrive/internal/testdate"
)

// User is who the authorization endpoint logs in.
type User struct {
	Subject string
	Email   string
	Groups  []string
}

// Issuer is a running test provider.
type Issuer struct {
	URL      string
	ClientID string
	srv      *httptest.Server

	mu    sync.Mutex
	key   *rsa.PrivateKey
	kid   string
	gen   int
	user  User
	codes map[string]grant
	// Logins counts authorization requests (a test checks the console
	// went through the provider).
	Logins int
	// KeyFetches counts requests for the key set.
	KeyFetches int
}

type grant struct {
	user                                 User
	nonce, challenge, redirect, clientID string
}

// New starts a provider for clientID, closed when the test ends.
func New(t testing.TB, clientID string) *Issuer {
	t.Helper()
	is := &Issuer{ClientID: clientID, codes: map[string]grant{}}
	is.Rotate()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", is.discovery)
	mux.HandleFunc("GET /keys", is.keys)
	mux.HandleFunc("GET /authorize", is.authorize)
	mux.HandleFunc("POST /token", is.token)
	is.srv = httptest.NewServer(mux)
	is.URL = is.srv.URL
	t.Cleanup(is.srv.Close)
	return is
}

// Rotate replaces the signing key: the JWKS serves only the new one.
func (is *Issuer) Rotate() {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.gen++
	is.key, is.kid = k, fmt.Sprintf("test-key-%d", is.gen)
}

// Fetches is how many times the key set was fetched.
func (is *Issuer) Fetches() int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.KeyFetches
}

// SetUser chooses who the next logins are.
func (is *Issuer) SetUser(u User) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.user = u
}

// Token signs claims with the current key. Claims the test leaves out get
// defaults: iss, aud (the client id), iat, and exp an hour from now.
func (is *Issuer) Token(claims map[string]any) string {
	is.mu.Lock()
	key, kid := is.key, is.kid
	is.mu.Unlock()
	return Sign(key, kid, is.withDefaults(claims))
}

// UserToken is a token for u, valid for an hour.
func (is *Issuer) UserToken(u User) string {
	c := map[string]any{"sub": u.Subject}
	if u.Email != "" {
		c["email"] = u.Email
	}
	if u.Groups != nil {
		c["groups"] = u.Groups
	}
	return is.Token(c)
}

func (is *Issuer) withDefaults(claims map[string]any) map[string]any {
	out := map[string]any{"iss": is.URL, "aud": is.ClientID, "iat": testdate.Now().Unix(), "exp": testdate.Now().Add(time.Hour).Unix()}
	for k, v := range claims {
		out[k] = v
	}
	return out
}

// Sign signs claims with key (RS256), naming kid: for tokens of another
// issuer or key than this one's.
func Sign(key *rsa.PrivateKey, kid string, claims map[string]any) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		panic(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		panic(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		panic(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		panic(err)
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (is *Issuer) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer": is.URL, "authorization_endpoint": is.URL + "/authorize", "token_endpoint": is.URL + "/token",
		"jwks_uri": is.URL + "/keys", "response_types_supported": []string{"code"},
		"subject_types_supported": []string{"public"}, "id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported": []string{"S256"},
	})
}

func (is *Issuer) keys(w http.ResponseWriter, _ *http.Request) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.KeyFetches++
	writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &is.key.PublicKey, KeyID: is.kid, Algorithm: "RS256", Use: "sig"}}})
}

func (is *Issuer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("response_type") != "code" || q.Get("client_id") != is.ClientID || q.Get("code_challenge_method") != "S256" ||
		q.Get("code_challenge") == "" || q.Get("redirect_uri") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	code := base64.RawURLEncoding.EncodeToString(b)
	is.mu.Lock()
	is.Logins++
	is.codes[code] = grant{user: is.user, nonce: q.Get("nonce"), challenge: q.Get("code_challenge"),
		redirect: q.Get("redirect_uri"), clientID: q.Get("client_id")}
	is.mu.Unlock()
	u, _ := url.Parse(q.Get("redirect_uri"))
	v := u.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	u.RawQuery = v.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

func (is *Issuer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	is.mu.Lock()
	g, ok := is.codes[r.PostForm.Get("code")]
	delete(is.codes, r.PostForm.Get("code"))
	is.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	switch {
	case !ok || r.PostForm.Get("grant_type") != "authorization_code":
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
		return
	case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "PKCE verifier does not match"})
		return
	case r.PostForm.Get("redirect_uri") != g.redirect || r.PostForm.Get("client_id") != g.clientID:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
		return
	}
	c := map[string]any{"sub": g.user.Subject, "nonce": g.nonce}
	if g.user.Email != "" {
		c["email"] = g.user.Email
	}
	if g.user.Groups != nil {
		c["groups"] = g.user.Groups
	}
	writeJSON(w, http.StatusOK, map[string]any{"access_token": "opaque-" + g.user.Subject, "token_type": "Bearer",
		"expires_in": 3600, "id_token": is.Token(c)})
}
