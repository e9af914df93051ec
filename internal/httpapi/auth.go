package httpapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	ssopkg "github.com/redrive/redrive/internal/sso"
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
		sso := s.cfg.SSO
		if secret != "" && sso != nil && !r.headerOnlyXAPIKey && c.Request().Header.Get("X-API-Key") == "" && ssopkg.LooksLikeJWT(secret) {
			p, err := sso.VerifyBearer(c.Request().Context(), secret)
			if err != nil {
				return tokenRefused(c, err)
			}
			return s.authorized(c, r, p, next)
		}
		if secret == "" && from == "" && sso != nil && !r.headerOnlyXAPIKey {
			if p, ok := sso.Session(c.Request()); ok {
				return s.authorized(c, r, p, next)
			}
			if ssopkg.HasSessionCookie(c.Request()) {
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="redrive", error="invalid_token"`)
				return &APIError{Status: http.StatusUnauthorized, Code: CodeUnauthorized,
					Message: "the console session has expired: log in again", Details: map[string]any{"login": ssopkg.LoginPath}}
			}
		}
		if secret == "" {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="redrive"`)
			msg := "an API key is required: send Authorization: Bearer <key> or X-API-Key: <key>"
			if sso != nil {
				msg = "an API key or a token of the identity provider is required: send Authorization: Bearer <key or JWT> or X-API-Key: <key>"
			}
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
		c.Set(keyScopeKey, key.Scope)
		if !key.Scope.Allows(r.scope) {
			c.Set(keyNameKey, key.Name)
			c.Set(principalKey, auth.KeyPrincipal(key))
			return &APIError{Status: http.StatusForbidden, Code: CodeForbidden,
				Message: "key " + key.Name + " has scope " + string(key.Scope) + "; this call needs " + string(r.scope),
				Details: map[string]any{"required_scope": string(r.scope)}}
		}
		return s.authorized(c, r, auth.KeyPrincipal(key), next)
	}
}

// tokenRefused is the answer to a bearer token that did not verify: 401
// naming why, or 503 when the provider could not be reached.
func tokenRefused(c echo.Context, err error) error {
	var te *ssopkg.TokenError
	if errors.As(err, &te) {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="redrive", error="invalid_token"`)
		return &APIError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: te.Reason}
	}
	c.Response().Header().Set("Retry-After", "10")
	return &APIError{Status: http.StatusServiceUnavailable, Code: CodeBackendError,
		Message: "the identity provider cannot be reached to verify the token; API keys keep working"}
}

// authorized keeps p as the caller and checks the route's permission
// (route.perm) before the handler runs.
func (s *Server) authorized(c echo.Context, r route, p auth.Principal, next echo.HandlerFunc) error {
	c.Set(principalKey, p)
	c.Set(keyNameKey, displayName(p))
	if err := r.perm.check(c, p); err != nil {
		return err
	}
	return next(c)
}

// displayName names a principal where one name is shown (a task's
// created_by, the audit log's key_name): a key's name, a person's email
// (their subject without one).
func displayName(p auth.Principal) string {
	if p.Kind == "oidc" && p.Email != "" {
		return p.Email
	}
	return p.Name
}

// permKind is how a route's permission is checked.
type permKind int

const (
	// permAll (the zero value, so that a route that declares nothing is
	// closed): the action on every queue.
	permAll permKind = iota
	// permNone: any authenticated caller (whoami, the filter keys).
	permNone
	// permSome: the action on at least one queue; the handler narrows what
	// it reads or touches to the queues allowed (queueScope), or checks the
	// record it loads (s.mayRecord).
	permSome
	// permParam: the action on the queue the path parameter names.
	permParam
	// permAudit: the audit log: admin on every queue, but an API key
	// keeps what its scope always allowed (read reads the log).
	permAudit
)

// perm is what a route needs of its caller's grants (docs/security.md).
type perm struct {
	kind   permKind
	action auth.Action
	param  string
}

func needAll(a auth.Action) perm             { return perm{kind: permAll, action: a} }
func needSome(a auth.Action) perm            { return perm{kind: permSome, action: a} }
func needParam(a auth.Action, p string) perm { return perm{kind: permParam, action: a, param: p} }

var (
	needNothing = perm{kind: permNone}
	needAudit   = perm{kind: permAudit, action: auth.ActionAdmin}
)

func (pm perm) check(c echo.Context, p auth.Principal) error {
	a := pm.action
	if a == "" {
		a = auth.ActionAdmin
	}
	switch pm.kind {
	case permNone:
		return nil
	case permSome:
		if len(p.QueueGlobs(a)) == 0 {
			return forbidden(p, a, "", "its roles grant "+string(a)+" on no queue")
		}
	case permParam:
		return mayQueue(p, a, c.Param(pm.param))
	case permAudit:
		if p.Kind == "key" && p.AllQueues(auth.ActionRead) {
			return nil
		}
		if !p.AllQueues(auth.ActionAdmin) {
			return forbidden(p, auth.ActionAdmin, "", "the audit log is for admins of every queue (\"*\")")
		}
	default:
		if !p.AllQueues(a) {
			return forbidden(p, a, "", "this call needs "+string(a)+" on every queue (\"*\")")
		}
	}
	return nil
}

// mayQueue checks that p may do a on queue: a queue p may not even read
// is not found (its existence does not leak), one it may read but not act
// on is forbidden.
func mayQueue(p auth.Principal, a auth.Action, queue string) error {
	if !p.Allowed(auth.ActionRead, queue) {
		return notFound("no queue " + jsonString(queue) + " that you may read")
	}
	if !p.Allowed(a, queue) {
		return forbidden(p, a, queue, "")
	}
	return nil
}

// forbidden is the 403 of a caller whose roles do not grant a (on queue,
// when the call is about one).
func forbidden(p auth.Principal, a auth.Action, queue, why string) *APIError {
	msg := describe(p) + " may not " + string(a)
	details := map[string]any{"required_action": string(a)}
	if queue != "" {
		msg += " queue " + jsonString(queue)
		details["queue"] = queue
	}
	if why != "" {
		msg += ": " + why
	}
	return &APIError{Status: http.StatusForbidden, Code: CodeForbidden, Message: msg, Details: details}
}

func describe(p auth.Principal) string {
	switch p.Kind {
	case "key":
		return "key " + p.Name
	case "oidc":
		return displayName(p)
	}
	return p.Name
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
