// Package sso is single sign-on with an OpenID Connect identity provider
// (docs/security.md): bearer JWTs for machines, validated against the
// issuer's discovery document and JWKS (github.com/coreos/go-oidc/v3, whose
// remote key set fetches the issuer's keys again when a token names a key it
// does not know: key rotation), and the authorization-code flow with PKCE for
// people using the console, which ends in a short-lived encrypted session
// cookie. Who may do what comes from the roles file (auth.Roles): a token's
// groups claim, subject and email pick the roles.
package sso

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/redrive/redrive/internal/auth"
)

// Config configures single sign-on.
type Config struct {
	// Issuer is the identity provider's issuer URL (required): its
	// discovery document is Issuer + "/.well-known/openid-configuration".
	Issuer string
	// ClientID is Redrive's client id at the provider (required), and the
	// audience every token must carry.
	ClientID string
	// ClientSecret is the client's secret; empty for a public client (the
	// console's login is protected by PKCE either way).
	ClientSecret string
	// RedirectURL is where the provider sends the browser back after a
	// login (…/auth/callback). Empty: the console login is off, bearer
	// tokens still work.
	RedirectURL string
	// Scopes are asked for at login. Default: openid, email, profile.
	Scopes []string
	// GroupsClaim names the claim holding the person's groups; a dotted
	// name reaches into objects (realm_access.roles). Default: groups.
	GroupsClaim string
	// Roles maps groups, subjects and emails to grants. Nil: nobody has any.
	Roles *auth.Roles
	// SessionKey encrypts the session cookie (32 bytes). Nil: a key is
	// generated at start (sessions end with the process and do not work
	// across replicas).
	SessionKey []byte
	// SessionTTL is how long a console session lasts before the person
	// logs in again. Default: 8h.
	SessionTTL time.Duration
	// Now is the time tokens and sessions are checked against. Default:
	// time.Now.
	Now func() time.Time
	// HTTPClient reaches the provider. Default: a client with a 10s timeout.
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// Paths of the login flow, served by Handler.
const (
	LoginPath    = "/auth/login"
	CallbackPath = "/auth/callback"
	LogoutPath   = "/auth/logout"
)

// discoveryRetry is how long after a failed discovery the next request
// tries again (the provider may be down at start; API keys keep working).
const discoveryRetry = 10 * time.Second

// SSO validates bearer tokens and session cookies and serves the login flow.
type SSO struct {
	cfg     Config
	log     *slog.Logger
	cookies *sealer

	mu       sync.Mutex
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	failedAt time.Time
	lastErr  error
}

// New checks cfg and tries the provider's discovery; a provider that cannot
// be reached now is tried again on the first request that needs it.
func New(ctx context.Context, cfg Config) (*SSO, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" {
		return nil, errors.New("sso: an issuer and a client id are required")
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{oidc.ScopeOpenID, "email", "profile"}
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 8 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &SSO{cfg: cfg, log: cfg.Logger.With("component", "sso")}
	var err error
	if s.cookies, err = newSealer(cfg.SessionKey); err != nil {
		return nil, err
	}
	if _, err := s.discover(ctx); err != nil {
		s.log.Warn("the identity provider cannot be reached; tried again on the next login or token", "issuer", cfg.Issuer, "err", err)
	}
	return s, nil
}

// LoginEnabled reports whether the console login is configured.
func (s *SSO) LoginEnabled() bool { return s != nil && s.cfg.RedirectURL != "" }

// ErrUnavailable is returned when the provider's discovery document or keys
// cannot be fetched: not the caller's fault (503).
var ErrUnavailable = errors.New("the identity provider cannot be reached")

// discover returns the verifier, fetching the discovery document the first
// time (and again after a failure, at most every discoveryRetry).
func (s *SSO) discover(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.verifier != nil {
		return s.verifier, nil
	}
	if !s.failedAt.IsZero() && time.Since(s.failedAt) < discoveryRetry {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, s.lastErr)
	}
	// The key set keeps this context for its later fetches: not the
	// request's, which ends with the request.
	pctx := oidc.ClientContext(context.WithoutCancel(ctx), s.cfg.HTTPClient)
	p, err := oidc.NewProvider(pctx, s.cfg.Issuer)
	if err != nil {
		s.failedAt, s.lastErr = time.Now(), err
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	var meta struct {
		JWKSURL string `json:"jwks_uri"`
	}
	if err := p.Claims(&meta); err != nil || meta.JWKSURL == "" {
		s.failedAt, s.lastErr = time.Now(), fmt.Errorf("the discovery document names no jwks_uri (%v)", err)
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, s.lastErr)
	}
	s.provider = p
	keys := newKeySet(meta.JWKSURL, s.cfg.HTTPClient, s.cfg.Now)
	s.verifier = oidc.NewVerifier(s.cfg.Issuer, keys, &oidc.Config{ClientID: s.cfg.ClientID, Now: s.cfg.Now})
	return s.verifier, nil
}

// LooksLikeJWT reports whether a bearer credential is a JWT (three
// base64url parts, the first a JSON object) rather than an API key (rdk_…,
// which has no dot).
func LooksLikeJWT(s string) bool {
	return strings.Count(s, ".") == 2 && strings.HasPrefix(s, "eyJ")
}

// TokenError is a bearer token refused, and why (for the 401's message).
type TokenError struct{ Reason string }

func (e *TokenError) Error() string { return e.Reason }

// maxTokenBytes bounds a bearer token (and the cookie header a session is
// read from): larger ones are refused before any parsing.
const maxTokenBytes = 16 << 10

// VerifyBearer validates a JWT (signature by a key of the issuer's JWKS,
// issuer, audience = the client id, expiry) and returns its principal.
// Errors are *TokenError (401) or wrap ErrUnavailable (503).
func (s *SSO) VerifyBearer(ctx context.Context, raw string) (auth.Principal, error) {
	if len(raw) > maxTokenBytes {
		return auth.Principal{}, &TokenError{Reason: fmt.Sprintf("the bearer token is longer than %d bytes", maxTokenBytes)}
	}
	v, err := s.discover(ctx)
	if err != nil {
		return auth.Principal{}, err
	}
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		var exp *oidc.TokenExpiredError
		if errors.As(err, &exp) {
			return auth.Principal{}, &TokenError{Reason: "the bearer token expired at " + exp.Expiry.UTC().Format(time.RFC3339)}
		}
		if strings.Contains(err.Error(), "fetching keys") {
			s.log.Warn("fetch the identity provider's keys", "err", err)
			return auth.Principal{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		s.log.Debug("bearer token refused", "err", err)
		return auth.Principal{}, &TokenError{Reason: "the bearer token is not valid: " + reason(err)}
	}
	id, err := s.identity(tok)
	if err != nil {
		return auth.Principal{}, &TokenError{Reason: err.Error()}
	}
	return s.principal(id), nil
}

// reason says in a few words why go-oidc refused a token.
func reason(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "issued by a different provider"):
		return "it was issued by another issuer"
	case strings.Contains(msg, "expected audience"):
		return "its audience is not this server's client id"
	case strings.Contains(msg, "signature") || strings.Contains(msg, "malformed"):
		return "its signature does not verify with the issuer's keys"
	}
	return "it is malformed or not signed by the issuer"
}

// identity reads who a verified token is about.
func (s *SSO) identity(tok *oidc.IDToken) (auth.Identity, error) {
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return auth.Identity{}, fmt.Errorf("the token's claims cannot be read: %v", err)
	}
	id := auth.Identity{Subject: tok.Subject}
	if id.Subject == "" {
		return id, errors.New("the token has no subject (sub)")
	}
	if e, ok := claims["email"].(string); ok && len(e) <= 320 {
		id.Email = e
	}
	id.Groups = groupsOf(claims, s.cfg.GroupsClaim)
	return id, nil
}

// Bounds of the groups read from a token.
const (
	maxGroups     = 1000
	maxGroupBytes = 256
)

// groupsOf reads the groups claim (a dotted name reaches into objects): a
// list of strings, or one string. Anything else is no group.
func groupsOf(claims map[string]any, name string) []string {
	var v any = claims
	for _, part := range strings.Split(name, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	var out []string
	switch x := v.(type) {
	case string:
		if len(x) <= maxGroupBytes {
			out = append(out, x)
		}
	case []any:
		for _, g := range x {
			if s, ok := g.(string); ok && len(s) <= maxGroupBytes && len(out) < maxGroups {
				out = append(out, s)
			}
		}
	}
	return out
}

func (s *SSO) principal(id auth.Identity) auth.Principal {
	return auth.Principal{Kind: "oidc", Name: id.Subject, Email: id.Email, Grants: s.cfg.Roles.Grants(id)}
}

// oauthConfig is the authorization-code flow's client.
func (s *SSO) oauthConfig(p *oidc.Provider) *oauth2.Config {
	ep := p.Endpoint()
	if s.cfg.ClientSecret == "" {
		ep.AuthStyle = oauth2.AuthStyleInParams // a public client: client_id in the body
	}
	return &oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, Endpoint: ep,
		RedirectURL: s.cfg.RedirectURL, Scopes: s.cfg.Scopes}
}

// secure says whether cookies get the Secure attribute: when the request
// came over TLS or the redirect URL is https (TLS ended at a proxy).
func (s *SSO) secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	u, err := url.Parse(s.cfg.RedirectURL)
	return err == nil && u.Scheme == "https"
}
