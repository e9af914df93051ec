package httpapi

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"
)

// securityHeaders marks every response as not to be framed (no page may put
// the API, or an error of it, in a frame) nor sniffed as another type.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		return next(c)
	}
}

// guardWrites refuses a state-changing call (POST, PUT, PATCH, DELETE) that
// a page on another site could have made in a visitor's browser — the only
// protection there is when authentication is disabled (redrive dev):
//
//   - its Content-Type must be application/json. A cross-origin form or a
//     "simple" fetch can only send application/x-www-form-urlencoded,
//     multipart/form-data or text/plain; anything else needs a CORS
//     preflight, which this server never grants. The compatibility routes
//     also take a request that carries X-API-Key (a header a form cannot
//     send either), as the reference DLQ's clients send no Content-Type.
//     A write without a body needs no Content-Type (the OJS specs' own
//     examples send none) unless it carries a cookie and no credential of
//     its own: a form always has a body, and a browser never sends an API
//     key or a bearer token on its own, only the session cookie;
//   - its Origin, when the browser sent one, must be this server, and
//     Sec-Fetch-Site must not say cross-site or same-site.
//
// Curl, the CLI and other clients outside a browser are not affected beyond
// sending the header.
func (s *Server) guardWrites(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r, ok := s.routeOf(c)
		req := c.Request()
		if !ok || !isWrite(req.Method) {
			return next(c)
		}
		if msg := crossSite(req); msg != "" {
			return &APIError{Status: http.StatusForbidden, Code: CodeForbidden,
				Message: msg + "; state-changing calls are accepted only from this server's own pages and from clients outside a browser",
				Details: map[string]any{"parameter": "Origin"}}
		}
		if r.bodyType != "" {
			// A route of its own media type (an import's NDJSON): no form
			// or simple fetch can send it either.
			if mt, _, err := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType)); err != nil || mt != r.bodyType {
				return &APIError{Status: http.StatusUnsupportedMediaType, Code: CodeInvalidRequest,
					Message: "Content-Type: must be " + r.bodyType + ", got " + contentTypeOf(req),
					Details: map[string]any{"parameter": "Content-Type"}}
			}
			return next(c)
		}
		if bodiless(req) && (req.Header.Get("Cookie") == "" || credentialed(req)) {
			return next(c)
		}
		if !jsonMediaType(req.Header.Get(echo.HeaderContentType)) &&
			!(r.headerOnlyXAPIKey && strings.TrimSpace(req.Header.Get("X-API-Key")) != "") {
			return &APIError{Status: http.StatusUnsupportedMediaType, Code: CodeInvalidRequest,
				Message: "Content-Type: must be application/json on a " + req.Method +
					" with a body (or one sent with the console's session cookie), got " + contentTypeOf(req),
				Details: map[string]any{"parameter": "Content-Type"}}
		}
		return next(c)
	}
}

// bodiless says the request has no body (a declared length of 0, nothing
// chunked).
func bodiless(req *http.Request) bool {
	return req.ContentLength == 0 && len(req.TransferEncoding) == 0
}

// credentialed says the request carries a credential of its own, which a
// browser never adds to a page's request by itself.
func credentialed(req *http.Request) bool {
	return strings.TrimSpace(req.Header.Get("Authorization")) != "" || strings.TrimSpace(req.Header.Get("X-API-Key")) != ""
}

// contentTypeOf is a request's Content-Type as an error quotes it.
func contentTypeOf(req *http.Request) string {
	if got := req.Header.Get(echo.HeaderContentType); got != "" {
		return jsonString(got)
	}
	return "none"
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// jsonMediaType reports whether a Content-Type is application/json (or
// another +json type), parameters such as charset allowed.
func jsonMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// crossSite says why a request comes from a page of another origin, or "".
// Origin is compared with Host (or X-Forwarded-Host, which a proxy that
// rewrites Host should set; a browser page cannot set it without a
// preflight), default ports aside.
func crossSite(req *http.Request) string {
	switch site := req.Header.Get("Sec-Fetch-Site"); site {
	case "cross-site", "same-site":
		return "Sec-Fetch-Site: the call comes from a page of another origin (" + site + ")"
	}
	origin := req.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if origin == "null" || err != nil || u.Host == "" {
		return "Origin: the call comes from a page without an origin of its own (" + jsonString(origin) + ")"
	}
	own := []string{req.Host}
	if fwd := req.Header.Get("X-Forwarded-Host"); fwd != "" {
		own = append(own, strings.TrimSpace(strings.Split(fwd, ",")[0]))
	}
	for _, h := range own {
		if strings.EqualFold(hostPort(h, u.Scheme), hostPort(u.Host, u.Scheme)) {
			return ""
		}
	}
	return "Origin: the call comes from a page of another origin (" + jsonString(origin) + ")"
}

// hostPort drops the scheme's default port from host.
func hostPort(host, scheme string) string {
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		return host
	}
	if scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	return host
}
