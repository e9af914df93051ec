package httpapi

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/filter"
	"github.com/redrive/redrive/internal/policy"
	"github.com/redrive/redrive/internal/records"
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
	// PrevCursor continues backward: the page before this one (record
	// lists only; absent on the first page).
	PrevCursor string `json:"prev_cursor,omitempty"`
}

// listJSON is GET /dead-letter: items, as Redrive's clients read it, and
// jobs, the same records under the name the OJS HTTP binding §12.1 gives
// them; pagination adds §12.1's offset and the admin API's page and
// per_page (admin spec §7.1) to Redrive's own.
type listJSON struct {
	Items      []deadLetterJobJSON `json:"items"`
	Jobs       []deadLetterJobJSON `json:"jobs"`
	Pagination listPaginationJSON  `json:"pagination"`
}

// listPaginationJSON is a record list's pagination. offset is how many
// matching records come before the page, page the page's number counted
// in pages of per_page (the limit) from 1; both are null when a cursor
// does not know how many come before it.
type listPaginationJSON struct {
	paginationJSON
	Offset  *int64 `json:"offset"`
	Page    *int64 `json:"page"`
	PerPage int    `json:"per_page"`
}

// listParams are the query parameters GET /dead-letter accepts: its filter's
// keys, and these.
var listParams = map[string]bool{"limit": true, "cursor": true, "offset": true, "sort": true}

func init() {
	for _, p := range filter.Names(filter.List) {
		listParams[p] = true
	}
}

func (s *Server) listRecords(c echo.Context) error {
	p, cur, err := parseListParams(c)
	if err != nil {
		return err
	}
	p.Scope.QueueGlobs = queueGlobs(c, auth.ActionRead)
	m := s.maskerOf(c)
	if p.Scope.OnlyQueues, err = s.searchScope(c.Request().Context(), m, &p.Filter); err != nil {
		return err
	}
	page, err := s.rec.List(c.Request().Context(), p)
	if err != nil {
		return err
	}
	recs := page.Records
	// seen is how many matching records come before the page (-1: unknown).
	seen := cur.seen
	if p.Backward && seen >= 0 {
		seen = max(seen-int64(len(recs)), 0)
		if !page.HasMore {
			seen = 0 // the first page
		}
	}
	if !p.Backward && !page.HasMore && seen >= 0 {
		// The last page: every match has been seen, so the total is exact
		// (an estimate or a capped count would claim what was not found).
		page.Total, page.TotalCapped, page.TotalEstimated = seen+int64(len(recs)), false, false
	}
	// Going forward there is a next page when a row was left over, and a
	// previous one when this is not the first; going back, the reverse.
	hasNext, hasPrev := page.HasMore, cur.given
	if p.Backward {
		hasNext, hasPrev = true, page.HasMore
	}
	out := listJSON{Items: make([]deadLetterJobJSON, len(recs)),
		Pagination: listPaginationJSON{paginationJSON: paginationJSON{Total: page.Total, TotalCapped: page.TotalCapped,
			TotalEstimated: page.TotalEstimated, Limit: p.Limit, HasMore: hasNext}, PerPage: p.Limit}}
	if seen >= 0 {
		off, n := seen, seen/int64(p.Limit)+1
		out.Pagination.Offset, out.Pagination.Page = &off, &n
	}
	for i := range recs {
		item := toPreviewJSON(m.preview(&recs[i]), !s.cfg.ArchiveDisabled)
		item.Masked = m.masks(recs[i].Record.Queue)
		out.Items[i] = asDeadLetterJob(item)
	}
	out.Jobs = out.Items
	if len(recs) > 0 {
		after := func(n int64) int64 {
			if seen < 0 {
				return -1
			}
			return seen + n
		}
		if hasNext {
			out.Pagination.NextCursor = listCursor{sort: p.Sort, pos: records.PositionOf(p.Sort, &recs[len(recs)-1]),
				seen: after(int64(len(recs)))}.encode()
		}
		if hasPrev {
			out.Pagination.PrevCursor = listCursor{sort: p.Sort, backward: true, pos: records.PositionOf(p.Sort, &recs[0]),
				seen: after(0)}.encode()
		}
	}
	return c.JSON(http.StatusOK, out)
}

// maxOffset bounds offset paging: deeper pages cost a scan of every row
// before them; the cursor costs the same on every page.
const maxOffset = 10_000

// listCursor is a place in a record listing, as next_cursor and
// prev_cursor carry it: the sort it belongs to, the direction, the
// position of the row the page starts after (or, backward, ends before),
// and how many matching records come before the page that follows it
// (-1: unknown). given says a cursor (or an offset) was passed at all.
type listCursor struct {
	given    bool
	sort     records.Sort
	backward bool
	pos      records.Position
	seen     int64
}

// A cursor of the default order going forward is "<id>.<seen>" (or "<id>",
// from older servers), base64url; any other is
// "2|<sort>|<f or b>|<key>|<id>|<seen>", <key> being empty for a null key
// (and for the default order), an integer or an RFC 3339 time.
func (lc listCursor) encode() string {
	if isDefaultSort(lc.sort) && !lc.backward {
		return encodeCursor(lc.pos.ID + seenSuffix(".", lc.seen))
	}
	dir := "f"
	if lc.backward {
		dir = "b"
	}
	key := ""
	switch {
	case lc.pos.Null:
	case lc.sort.Field == records.SortAttempt:
		key = strconv.Itoa(lc.pos.Attempt)
	case lc.sort.Field == records.SortNextRetry || lc.sort.Field == records.SortFailed:
		key = lc.pos.At.UTC().Format(time.RFC3339Nano)
	}
	return encodeCursor("2|" + sortText(lc.sort) + "|" + dir + "|" + key + "|" + lc.pos.ID + "|" + seenSuffix("", lc.seen))
}

func seenSuffix(sep string, seen int64) string {
	if seen < 0 {
		return ""
	}
	return sep + strconv.FormatInt(seen, 10)
}

func isDefaultSort(s records.Sort) bool {
	return (s.Field == "" || s.Field == records.SortCreated) && !s.Asc
}

// sortText is a sort as the sort parameter says it: a field, descending
// with a leading "-".
func sortText(s records.Sort) string {
	f := s.Field
	if f == "" {
		f = records.SortCreated
	}
	if s.Asc {
		return string(f)
	}
	return "-" + string(f)
}

// parseSort reads the sort parameter.
func parseSort(v string) (records.Sort, error) {
	if v == "" {
		return records.Sort{Field: records.SortCreated}, nil
	}
	name, desc := strings.CutPrefix(v, "-")
	for _, f := range records.SortFields {
		if name == string(f) {
			return records.Sort{Field: f, Asc: !desc}, nil
		}
	}
	return records.Sort{}, invalidParam("sort", "must be one of created_at, attempt, next_retry_at, failed_at, "+
		"each ascending or with a leading - for descending (-created_at, newest first, is the default)")
}

// decodeListCursor reads a records cursor for sort.
func decodeListCursor(c string, sort records.Sort) (listCursor, error) {
	bad := invalidParam("cursor", "malformed cursor; pass next_cursor or prev_cursor from a previous page")
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return listCursor{}, bad
	}
	lc := listCursor{given: true, sort: sort, seen: -1}
	text := string(b)
	rest, v2 := strings.CutPrefix(text, "2|")
	if !v2 {
		// "<id>.<seen>" or a bare id: the default order, forward.
		if !isDefaultSort(sort) {
			return listCursor{}, invalidParam("cursor", "continues sort=-created_at, not sort="+sortText(sort)+
				"; start from the first page of this sort")
		}
		idPart, seenPart, hasSeen := strings.Cut(text, ".")
		id, err := uuid.Parse(idPart)
		if err != nil {
			return listCursor{}, bad
		}
		lc.pos.ID = id.String()
		if hasSeen {
			if lc.seen, err = strconv.ParseInt(seenPart, 10, 64); err != nil || lc.seen < 1 {
				return listCursor{}, bad
			}
		}
		return lc, nil
	}
	parts := strings.Split(rest, "|")
	if len(parts) != 5 || (parts[1] != "f" && parts[1] != "b") {
		return listCursor{}, bad
	}
	if parts[0] != sortText(sort) {
		return listCursor{}, invalidParam("cursor", "continues sort="+parts[0]+", not sort="+sortText(sort)+
			"; start from the first page of this sort")
	}
	lc.backward = parts[1] == "b"
	id, err := uuid.Parse(parts[3])
	if err != nil {
		return listCursor{}, bad
	}
	lc.pos.ID = id.String()
	switch key := parts[2]; {
	case sort.Field == records.SortCreated:
		if key != "" {
			return listCursor{}, bad
		}
	case key == "" && (sort.Field == records.SortNextRetry || sort.Field == records.SortFailed):
		lc.pos.Null = true
	case sort.Field == records.SortAttempt:
		if lc.pos.Attempt, err = strconv.Atoi(key); err != nil {
			return listCursor{}, bad
		}
	default:
		if lc.pos.At, err = time.Parse(time.RFC3339Nano, key); err != nil {
			return listCursor{}, bad
		}
	}
	if parts[4] != "" {
		if lc.seen, err = strconv.ParseInt(parts[4], 10, 64); err != nil || lc.seen < 0 {
			return listCursor{}, bad
		}
	}
	return lc, nil
}

// parseListParams reads a listing's parameters, and the cursor it was
// given (seen: how many matching records come before its page).
func parseListParams(c echo.Context) (*records.ListParams, listCursor, error) {
	q := c.QueryParams()
	none := listCursor{}
	if err := checkParams(q, listParams); err != nil {
		return nil, none, err
	}
	if len(q["sort"]) > 1 {
		return nil, none, invalidParam("sort", "given more than once")
	}
	f, err := filter.ParseQuery(q, filter.List)
	if err != nil {
		return nil, none, err
	}
	p := &records.ListParams{Filter: f}
	if p.Sort, err = parseSort(q.Get("sort")); err != nil {
		return nil, none, err
	}
	if p.Sort.Field != records.SortCreated && f.Queue == "" {
		// Each of these orders is a range of an index that starts with the
		// queue; across every queue it would be a sort of every record.
		return nil, none, invalidParam("sort", "sort="+sortText(p.Sort)+" lists one queue's records: add a queue filter "+
			"(across every queue, only created_at and -created_at)")
	}
	if p.Limit, err = parseLimit(q.Get("limit")); err != nil {
		return nil, none, err
	}
	cur := listCursor{sort: p.Sort}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxOffset {
			return nil, none, invalidParam("offset", "must be an integer from 0 to 10000; page further with cursor (pagination.next_cursor)")
		}
		if n > 0 && (p.Sort.Field == records.SortNextRetry || p.Sort.Field == records.SortFailed) {
			return nil, none, invalidParam("offset", "cannot be combined with sort="+sortText(p.Sort)+"; page with cursor (pagination.next_cursor)")
		}
		p.Offset, cur.given = n, n > 0
	}
	cur.seen = int64(p.Offset)
	if v := q.Get("cursor"); v != "" {
		if p.Offset > 0 {
			return nil, none, invalidParam("cursor", "cannot be combined with offset")
		}
		if cur, err = decodeListCursor(v, p.Sort); err != nil {
			return nil, none, err
		}
		p.After, p.Backward = &cur.pos, cur.backward
	}
	return p, cur, nil
}

// Cursors are opaque to clients: base64url.
func encodeCursor(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

// decodeCursor reads a cursor that is a bare id (the task list's).
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
	r, err := s.rec.Get(ctx, id)
	if errors.Is(err, records.ErrNotFound) {
		return notFound("no dead-letter record with id " + id)
	}
	if err != nil {
		return err
	}
	if err := mayRecord(c, r); err != nil {
		return err
	}
	if err := s.queues.Refresh(ctx); err != nil {
		return err
	}
	s.rec.InSchemaOrder(r)
	sched := policy.ScheduleOf(s.rec.Policy(r))
	m := s.maskerOf(c)
	r = m.record(r)
	// writeRecord writes the key and value from r's bytes: the rendering
	// is made without them, so that it copies neither (a 1 MB value was
	// also held as a string, or in base64, only to be dropped).
	bare := *r
	bare.Key, bare.Value = nil, nil
	out := toRecordJSON(&bare, !s.cfg.ArchiveDisabled)
	out.KeySize, out.ValueSize = sizeOf(r.Key), sizeOf(r.Value)
	out.InFlight = &r.InFlight
	out.Masked = m.masks(r.Queue)
	out.Schedule = &sched
	out.recordBody = nil
	return writeRecord(c, http.StatusOK, r, asDeadLetterJob(out))
}
