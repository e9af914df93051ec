package httpapi

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
)

// keyNameKey is where the authenticated key's name is kept in the context.
const keyNameKey = "redrive.key_name"

// keyScopeKey is where the authenticated key's scope is kept in the context
// (not set when authentication is disabled).
const keyScopeKey = "redrive.key_scope"

// principalKey is where the caller's auth.Principal is kept in the context;
// handlers read it with principal(c).
const principalKey = "redrive.principal"

// anonymous names the caller when authentication is disabled.
const anonymous = "anonymous (auth disabled)" // auth.Anonymous.Name

// keyParams are query parameters that look like a key: they are refused, as a
// key in a URL ends up in logs and browser history.
var keyParams = []string{"api_key", "apikey", "api-key", "key_secret", "access_token", "token"}

// authenticate checks the API key of every route that declares a scope.
// Keys come from `Authorization: Bearer <key>` or `X-API-Key: <key>` only
// (the compatibility routes: X-API-Key only); never from the query string.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r, ok := s.routeOf(c)
		if !ok {
			return next(c)
		}
		q := c.QueryParams()
		for _, p := range keyParams {
			if q.Has(p) {
				return invalidParam(p, "API keys are accepted only in the Authorization: Bearer or X-API-Key header, never in the URL")
			}
		}
		if s.cfg.AuthDisabled {
			c.Set(keyNameKey, anonymous)
			c.Set(principalKey, auth.Anonymous)
			return next(c)
		}
		secret, from := presentedKey(c.Request(), r.headerOnlyXAPIKey)
		if secret == "" {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="redrive"`)
			msg := "an API key is required: send Authorization: Bearer <key> or X-API-Key: <key>"
			if r.headerOnlyXAPIKey {
				msg = "an API key is required: send X-API-Key: <key>"
			}
			if from != "" {
				msg = from
			}
			return &APIError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: msg}
		}
		key, ok := s.cfg.Keys.Authenticate(secret)
		if !ok {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="redrive", error="invalid_token"`)
			return &APIError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: "the API key is not valid"}
		}
		c.Set(keyNameKey, key.Name)
		c.Set(keyScopeKey, key.Scope)
		c.Set(principalKey, auth.KeyPrincipal(key))
		if !key.Scope.Allows(r.scope) {
			return &APIError{Status: http.StatusForbidden, Code: CodeForbidden,
				Message: "key " + key.Name + " has scope " + string(key.Scope) + "; this call needs " + string(r.scope),
				Details: map[string]any{"required_scope": string(r.scope)}}
		}
		return next(c)
	}
}

// presentedKey extracts the key from the headers. When none is usable the
// second result may say why (a malformed Authorization header).
func presentedKey(req *http.Request, xAPIKeyOnly bool) (string, string) {
	if k := strings.TrimSpace(req.Header.Get("X-API-Key")); k != "" {
		return k, ""
	}
	if xAPIKeyOnly {
		if req.Header.Get("Authorization") != "" {
			return "", "this route takes its API key in X-API-Key only"
		}
		return "", ""
	}
	h := req.Header.Get("Authorization")
	if h == "" {
		return "", ""
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", "the Authorization header must be `Bearer <key>`"
	}
	return strings.TrimSpace(token), ""
}

// principal is who the caller is. Routes that declare no scope (health,
// metrics) have none: they get a principal with no grant.
func principal(c echo.Context) auth.Principal {
	p, _ := c.Get(principalKey).(auth.Principal)
	return p
}

// keyName is the authenticated caller's key name.
func keyName(c echo.Context) string {
	n, _ := c.Get(keyNameKey).(string)
	return n
}
