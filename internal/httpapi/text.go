package httpapi

import (
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/filter"
)

// byteParams are the query parameters matched byte for byte against bytea
// columns: they may hold anything, NUL and invalid UTF-8 included. They are
// the filter keys marked so (key, q).
var byteParams = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range filter.Keys(0) {
		if k.Bytes {
			m[k.Name] = true
		}
	}
	return m
}()

// needValue are the query parameters that are refused when given empty
// (limit= is a mistake, not the default).
var needValue = map[string]bool{"limit": true, "offset": true, "cursor": true, "since": true, "until": true,
	"state": true, "exhaustion": true, "sort": true}

// rejectBadText refuses, with a 400 naming the parameter, a query parameter
// or path segment that is not valid UTF-8 or holds a NUL byte: Postgres text
// cannot hold them, and a hostile byte must never turn into a 5xx. It also
// refuses a query parameter given twice (but header, which repeats) and an
// empty one where a value is expected.
func rejectBadText(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		for name, vals := range c.QueryParams() {
			if !validText(name) {
				return invalidParam(strings.ToValidUTF8(strings.ReplaceAll(name, "\x00", "\uFFFD"), "\uFFFD"),
					"query parameter names must be valid UTF-8 without NUL bytes")
			}
			if len(vals) > 1 && !repeatable(c, name) {
				return invalidParam(name, "given more than once")
			}
			if needValue[name] && vals[0] == "" {
				return invalidParam(name, "must not be empty; leave it out for the default")
			}
			if byteParams[name] {
				continue
			}
			for _, v := range vals {
				if !validText(v) {
					return invalidParam(name, "must be valid UTF-8 without NUL bytes")
				}
			}
		}
		for i, name := range c.ParamNames() {
			if v := c.ParamValues()[i]; !validText(v) {
				return invalidParam(name, "path segment must be valid UTF-8 without NUL bytes")
			}
		}
		return next(c)
	}
}

// repeatable reports whether a query parameter may be given more than once:
// the list's repeatable filter keys (header), and the event stream's type and
// topic filters.
func repeatable(c echo.Context, name string) bool {
	if listRepeatable[name] {
		return true
	}
	return c.Path() == BasePath+"/events" && (name == "type" || name == "topic" || name == "queue")
}

var listRepeatable = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range filter.Keys(filter.List) {
		if k.Repeatable {
			m[k.Name] = true
		}
	}
	return m
}()

func validText(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }
