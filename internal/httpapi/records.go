package httpapi

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/store"
)

// Page sizes for lists (docs/api.md).
const (
	defaultLimit = 50
	maxLimit     = 1000
)

type paginationJSON struct {
	Total int64 `json:"total"`
	// TotalCapped says Total is a lower bound: the filter needs a scan, and
	// counting stops at 10,000.
	TotalCapped bool `json:"total_capped,omitempty"`
	// TotalEstimated says Total is Postgres's estimate: an exact count of
	// this filter would have taken too long.
	TotalEstimated bool   `json:"total_estimated,omitempty"`
	Limit          int    `json:"limit"`
	HasMore        bool   `json:"has_more"`
	NextCursor     string `json:"next_cursor,omitempty"`
}

type listJSON struct {
	Items      []recordJSON   `json:"items"`
	Pagination paginationJSON `json:"pagination"`
}

// listParams are the query parameters GET /dead-letter accepts.
var listParams = map[string]bool{"limit": true, "cursor": true, "offset": true}

func init() {
	for _, p := range filterParams {
		listParams[p] = true
	}
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
		Pagination: paginationJSON{Total: page.Total, TotalCapped: page.TotalCapped, TotalEstimated: page.TotalEstimated,
			Limit: p.Limit, HasMore: page.HasMore}}
	for i := range page.Records {
		out.Items[i] = toRecordJSON(&page.Records[i], !s.cfg.ArchiveDisabled)
	}
	if page.HasMore {
		out.Pagination.NextCursor = encodeCursor(page.Records[len(page.Records)-1].ID)
	}
	return c.JSON(http.StatusOK, out)
}

func parseListParams(c echo.Context) (*store.ListParams, error) {
	q := c.QueryParams()
	if err := checkParams(q, listParams); err != nil {
		return nil, err
	}
	fj, err := filterFromQuery(q)
	if err != nil {
		return nil, err
	}
	f, err := fj.toStore("")
	if err != nil {
		return nil, err
	}
	p := &store.ListParams{Filter: f}
	if p.Limit, err = parseLimit(q.Get("limit")); err != nil {
		return nil, err
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1_000_000 {
			return nil, invalidParam("offset", "must be an integer from 0 to 1000000 (use cursor to page further)")
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

// recordID reads the :id path parameter.
func recordID(c echo.Context) (string, error) {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return "", invalidParam("id", "must be a UUID")
	}
	return id.String(), nil
}

func (s *Server) getRecord(c echo.Context) error {
	id, err := recordID(c)
	if err != nil {
		return err
	}
	r, err := s.store.Get(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("no dead-letter record with id " + id)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toRecordJSON(r, !s.cfg.ArchiveDisabled))
}
