package httpapi

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/filter"
)

// errorTypesParams are the query parameters of GET /dead-letter/error-types.
var errorTypesParams = map[string]bool{"queue": true, "q": true, "limit": true}

// maxErrorTypeSearch bounds q: no stored error type is longer.
const maxErrorTypeSearch = dlq.MaxNameBytes

type errorTypeJSON struct {
	ErrorType string `json:"error_type"`
	Count     int64  `json:"count"`
}

// listErrorTypes answers the error types of the stored records (their
// latest errors'), most records first: what a client offers to pick from
// for the error_type filter.
func (s *Server) listErrorTypes(c echo.Context) error {
	q := c.QueryParams()
	if err := checkParams(q, errorTypesParams); err != nil {
		return err
	}
	for name := range q {
		if len(q[name]) > 1 {
			return invalidParam(name, "given more than once")
		}
	}
	queue, search := q.Get("queue"), q.Get("q")
	for name, v := range map[string]string{"queue": queue, "q": search} {
		if !validText(v) {
			return invalidParam(name, "must be valid UTF-8 without NUL characters")
		}
	}
	// queue is the record filter's, bounded as it is.
	if _, err := filter.ParseQuery(url.Values{"queue": {queue}}, filter.List); err != nil {
		return err
	}
	if len(search) > maxErrorTypeSearch {
		return invalidParam("q", "must be at most 255 bytes (the longest error type stored)")
	}
	limit, err := parseLimit(q.Get("limit"))
	if err != nil {
		return err
	}
	types, total, err := s.rec.ErrorTypes(c.Request().Context(), queue, search, limit, queueGlobs(c, auth.ActionRead))
	if err != nil {
		return err
	}
	items := make([]errorTypeJSON, len(types))
	for i, t := range types {
		items[i] = errorTypeJSON{ErrorType: t.ErrorType, Count: t.Count}
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items,
		"pagination": paginationJSON{Total: total, Limit: limit, HasMore: total > int64(len(items))}})
}
