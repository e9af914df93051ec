package httpapi

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/store"
)

// Page sizes for lists (DESIGN.md §6).
const (
	defaultLimit = 50
	maxLimit     = 1000
)

type paginationJSON struct {
	Total      int64  `json:"total"`
	Limit      int    `json:"limit"`
	HasMore    bool   `json:"has_more"`
	NextCursor string `json:"next_cursor,omitempty"`
}

type listJSON struct {
	Items      []recordJSON   `json:"items"`
	Pagination paginationJSON `json:"pagination"`
}

// listParams are the query parameters GET /dead-letter accepts.
var listParams = map[string]bool{
	"queue": true, "type": true, "error_type": true, "state": true, "exhaustion": true,
	"since": true, "until": true, "limit": true, "cursor": true, "offset": true,
}

func (s *Server) listRecords(c echo.Context) error {
	p, err := parseListParams(c)
	if err != nil {
		return err
	}
	page, err := s.store.List(c.Request().Context(), p)
	if err != nil {
		return err
	}
	out := listJSON{Items: make([]recordJSON, len(page.Records)),
		Pagination: paginationJSON{Total: page.Total, Limit: p.Limit, HasMore: page.HasMore}}
	for i := range page.Records {
		out.Items[i] = toRecordJSON(&page.Records[i])
	}
	if page.HasMore {
		out.Pagination.NextCursor = encodeCursor(page.Records[len(page.Records)-1].ID)
	}
	return c.JSON(http.StatusOK, out)
}

func parseListParams(c echo.Context) (*store.ListParams, error) {
	q := c.QueryParams()
	for name := range q {
		if !listParams[name] {
			return nil, invalidParam(name, "unknown query parameter")
		}
	}
	p := &store.ListParams{Limit: defaultLimit}
	p.Queue, p.Type, p.ErrorType = q.Get("queue"), q.Get("type"), q.Get("error_type")
	if v := q.Get("state"); v != "" {
		if !dlq.State(v).Valid() {
			return nil, invalidParam("state", "must be one of retryable, available, completed, discarded")
		}
		p.State = dlq.State(v)
	}
	if v := q.Get("exhaustion"); v != "" {
		if !dlq.Exhaustion(v).Valid() {
			return nil, invalidParam("exhaustion", "must be dead_letter or discard")
		}
		p.Exhaustion = dlq.Exhaustion(v)
	}
	var err error
	if p.Since, err = parseTime(q.Get("since"), "since"); err != nil {
		return nil, err
	}
	if p.Until, err = parseTime(q.Get("until"), "until"); err != nil {
		return nil, err
	}
	if !p.Since.IsZero() && !p.Until.IsZero() && !p.Until.After(p.Since) {
		return nil, invalidParam("until", "must be after since")
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return nil, invalidParam("limit", "must be an integer from 1 to 1000")
		}
		p.Limit = n
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, invalidParam("offset", "must be a non-negative integer")
		}
		p.Offset = n
	}
	if v := q.Get("cursor"); v != "" {
		if p.Offset > 0 {
			return nil, invalidParam("cursor", "cannot be combined with offset")
		}
		if p.BeforeID, err = decodeCursor(v); err != nil {
			return nil, invalidParam("cursor", "malformed cursor; pass next_cursor from a previous page")
		}
	}
	return p, nil
}

func parseTime(v, name string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, invalidParam(name, "must be an RFC 3339 timestamp like 2026-02-13T10:00:00Z")
	}
	return t, nil
}

// Cursors are opaque to clients: the last record's id, base64url-encoded.
func encodeCursor(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

func decodeCursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", err
	}
	id, err := uuid.Parse(string(b))
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

func (s *Server) getRecord(c echo.Context) error {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return invalidParam("id", "must be a UUID")
	}
	r, err := s.store.Get(c.Request().Context(), id.String())
	if errors.Is(err, store.ErrNotFound) {
		return notFound("no dead-letter record with id " + id.String())
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toRecordJSON(r))
}
