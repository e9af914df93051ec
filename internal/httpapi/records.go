package httpapi

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/policy"
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
	p, seen, err := parseListParams(c)
	if err != nil {
		return err
	}
	page, err := s.store.ListPreviews(c.Request().Context(), p)
	if err != nil {
		return err
	}
	if !page.HasMore && seen >= 0 {
		// The last page: every match has been seen, so the total is exact
		// (an estimate or a capped count would claim what was not found).
		page.Total, page.TotalCapped, page.TotalEstimated = seen+int64(len(page.Records)), false, false
	}
	out := listJSON{Items: make([]recordJSON, len(page.Records)),
		Pagination: paginationJSON{Total: page.Total, TotalCapped: page.TotalCapped, TotalEstimated: page.TotalEstimated,
			Limit: p.Limit, HasMore: page.HasMore}}
	for i := range page.Records {
		out.Items[i] = toPreviewJSON(&page.Records[i], !s.cfg.ArchiveDisabled)
	}
	if page.HasMore {
		next := page.Records[len(page.Records)-1].Record.ID
		if seen >= 0 {
			next += "." + strconv.FormatInt(seen+int64(len(page.Records)), 10)
		}
		out.Pagination.NextCursor = encodeCursor(next)
	}
	return c.JSON(http.StatusOK, out)
}

// maxOffset bounds offset paging: deeper pages cost a scan of every row
// before them; the cursor costs the same on every page.
const maxOffset = 10_000

// parseListParams reads a listing's parameters, and how many matching
// records come before its page (-1 when unknown: a cursor of an older form).
func parseListParams(c echo.Context) (*store.ListParams, int64, error) {
	q := c.QueryParams()
	if err := checkParams(q, listParams); err != nil {
		return nil, 0, err
	}
	fj, err := filterFromQuery(q)
	if err != nil {
		return nil, 0, err
	}
	f, err := fj.toStore("")
	if err != nil {
		return nil, 0, err
	}
	p := &store.ListParams{Filter: f}
	if p.Limit, err = parseLimit(q.Get("limit")); err != nil {
		return nil, 0, err
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxOffset {
			return nil, 0, invalidParam("offset", "must be an integer from 0 to 10000; page further with cursor (pagination.next_cursor)")
		}
		p.Offset = n
	}
	seen := int64(p.Offset)
	if v := q.Get("cursor"); v != "" {
		if p.Offset > 0 {
			return nil, 0, invalidParam("cursor", "cannot be combined with offset")
		}
		if p.BeforeID, seen, err = decodeListCursor(v); err != nil {
			return nil, 0, invalidParam("cursor", "malformed cursor; pass next_cursor from a previous page")
		}
	}
	return p, seen, nil
}

// decodeListCursor reads a records cursor: the last record's id and how
// many records its page and the pages before held ("<id>.<seen>"); a bare
// id (an older cursor) gives seen -1.
func decodeListCursor(c string) (string, int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", 0, err
	}
	idPart, seenPart, hasSeen := strings.Cut(string(b), ".")
	id, err := uuid.Parse(idPart)
	if err != nil {
		return "", 0, err
	}
	if !hasSeen {
		return id.String(), -1, nil
	}
	seen, err := strconv.ParseInt(seenPart, 10, 64)
	if err != nil || seen < 1 {
		return "", 0, errors.New("malformed cursor position")
	}
	return id.String(), seen, nil
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
	ctx := c.Request().Context()
	r, err := s.store.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("no dead-letter record with id " + id)
	}
	if err != nil {
		return err
	}
	if err := s.queues.Refresh(ctx); err != nil {
		return err
	}
	out := toRecordJSON(r, !s.cfg.ArchiveDisabled)
	out.InFlight = &r.InFlight
	sched := policy.ScheduleOf(s.recordPolicy(r))
	out.Schedule = &sched
	return writeRecord(c, http.StatusOK, r, out)
}

// recordPolicy is the policy a record's next failure is judged by, as ingest
// judges it: the record keeps the retry policy it was given (topic, type,
// record override, or an operator's), while max_age and the rest are its
// topic's current ones.
func (s *Server) recordPolicy(r *dlq.Record) policy.Topic {
	t := s.queues.Resolve(r.Queue, r.Type)
	if retry, err := policy.ParseRetry(r.Retry); err == nil {
		t.Retry = retry
	}
	return t
}
