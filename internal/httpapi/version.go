package httpapi

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// OJSVersion is the version of the OJS specs the API follows, sent in the
// OJS-Version header of every response (HTTP binding §3.2, §6.5).
const OJSVersion = "1.0"

// CodeUnsupported answers a request for an OJS version the server does not
// follow (HTTP binding §3.2).
const CodeUnsupported = "unsupported"

// ojsVersion sets OJS-Version on every response, and refuses with 422
// unsupported a request whose own OJS-Version asks for another version than
// 1.0 ("1", "1.0" and "1.0.x" are that version). A request without the
// header is served as 1.0.
func ojsVersion(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("OJS-Version", OJSVersion)
		if asked := strings.TrimSpace(c.Request().Header.Get("OJS-Version")); asked != "" && !supportedVersion(asked) {
			return &APIError{Status: http.StatusUnprocessableEntity, Code: CodeUnsupported,
				Message: "OJS-Version: this server follows OJS " + OJSVersion + ", not " + jsonString(asked),
				Details: map[string]any{"parameter": "OJS-Version", "supported": []string{OJSVersion}}}
		}
		return next(c)
	}
}

// supportedVersion says whether v names OJS 1.0.
func supportedVersion(v string) bool {
	return v == "1" || v == OJSVersion || strings.HasPrefix(v, OJSVersion+".")
}
