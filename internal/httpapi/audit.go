package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/mask"
	"github.com/redrive/redrive/internal/records"
)

// auditKey holds the details a handler adds to its audit entry.
const auditKey = "redrive.audit"

// auditInfo is what a handler knows about its call: the target, the filter,
// how many records.
type auditInfo struct {
	Target        string
	Filter        json.RawMessage
	Count         *int64
	Before, After json.RawMessage
}

// noteAudit lets a handler add details to the audit entry of its call.
func noteAudit(c echo.Context, target string, filter any, count *int64) {
	info := &auditInfo{Target: target, Count: count}
	if filter != nil {
		if b, err := json.Marshal(filter); err == nil {
			info.Filter = b
		}
	}
	if prev, ok := c.Get(auditKey).(*auditInfo); ok {
		info.Before, info.After = prev.Before, prev.After
	}
	c.Set(auditKey, info)
}

// noteChange records in the audit entry of a call what it changed: the
// configuration (a topic's API config, a replay rule) before and after it,
// nil where there was none. Handlers call it once the change is made.
func noteChange(c echo.Context, before, after any) {
	info, ok := c.Get(auditKey).(*auditInfo)
	if !ok {
		info = &auditInfo{}
		c.Set(auditKey, info)
	}
	info.Before, info.After = rawJSON(before), rawJSON(after)
}

// rawJSON is v as JSON; nil for nil (a nil json.RawMessage included).
func rawJSON(v any) json.RawMessage {
	switch x := v.(type) {
	case nil:
		return nil
	case json.RawMessage:
		if len(x) == 0 || string(x) == "null" {
			return nil
		}
		return x
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return nil
	}
	return b
}

func count64[T ~int | ~int64](n T) *int64 { v := int64(n); return &v }

// audit writes an audit entry for every authenticated call of a route with
// an action, whatever its outcome (a refused call is worth knowing about too).
func (s *Server) audit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r, ok := s.routeOf(c)
		if !ok || r.action == "" {
			return next(c)
		}
		err := next(c)
		name := keyName(c)
		if name == "" {
			return err // never authenticated: 401 or refused before auth
		}
		status := c.Response().Status
		if err != nil {
			status = statusOf(err)
		}
		// The path as sent (percent-encoded): a refused call's hostile bytes
		// are logged faithfully and never break the write.
		e := &records.AuditEntry{KeyName: name, Action: r.action, Method: c.Request().Method, Path: c.Request().URL.EscapedPath(),
			Status: status, RequestID: c.Response().Header().Get(echo.HeaderXRequestID)}
		if info, ok := c.Get(auditKey).(*auditInfo); ok {
			e.Target, e.Filter, e.Count, e.Before, e.After = info.Target, info.Filter, info.Count, info.Before, info.After
		}
		if e.Target == "" {
			e.Target = firstParam(c)
		}
		p := principal(c)
		e.ActorKind = p.Kind
		if p.Kind == "oidc" {
			sub, email := p.Name, p.Email
			e.ActorSubject = &sub
			if email != "" {
				e.ActorEmail = &email
			}
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), 5*time.Second)
		defer cancel()
		if aerr := s.rec.AddAudit(ctx, e); aerr != nil {
			s.log.Error("audit log write failed", "action", r.action, "key", name, "status", status, "err", aerr)
		}
		return err
	}
}

func firstParam(c echo.Context) string {
	for i, n := range c.ParamNames() {
		if n == "id" || n == "name" || n == "queue" {
			return c.ParamValues()[i]
		}
	}
	return ""
}

func statusOf(err error) int {
	var apiErr *APIError
	var httpErr *echo.HTTPError
	switch {
	case errors.As(err, &apiErr):
		return apiErr.Status
	case errors.As(err, &httpErr):
		return httpErr.Code
	}
	return http.StatusServiceUnavailable
}

type auditJSON struct {
	ID        int64           `json:"id"`
	At        jsonTime        `json:"at"`
	KeyName   string          `json:"key_name"`
	Action    string          `json:"action"`
	Method    string          `json:"method"`
	Path      string          `json:"path"`
	Target    string          `json:"target"`
	Filter    json.RawMessage `json:"filter"`
	Count     *int64          `json:"count"`
	Status    int             `json:"status"`
	RequestID string          `json:"request_id"`
	// Before and After are what a configuration change changed (null where
	// there was none, and for other calls).
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
	// Actor is who made the call: kind (key, oidc, anonymous; "" for
	// entries older than it), and for a person the token's subject and
	// email (null otherwise).
	Actor actorJSON `json:"actor"`
}

type actorJSON struct {
	Kind    string  `json:"kind"`
	Subject *string `json:"subject"`
	Email   *string `json:"email"`
}

var auditParams = map[string]bool{"key_name": true, "action": true, "target": true, "since": true, "until": true,
	"limit": true, "cursor": true}

func (s *Server) listAudit(c echo.Context) error {
	q := c.QueryParams()
	if err := checkParams(q, auditParams); err != nil {
		return err
	}
	p := &records.AuditParams{KeyName: q.Get("key_name"), Action: q.Get("action"), Target: q.Get("target")}
	var err error
	if p.Since, err = parseTime(q.Get("since"), "since"); err != nil {
		return err
	}
	if p.Until, err = parseTime(q.Get("until"), "until"); err != nil {
		return err
	}
	if p.Limit, err = parseLimit(q.Get("limit")); err != nil {
		return err
	}
	if v := q.Get("cursor"); v != "" {
		b, derr := decodeCursorRaw(v)
		n, perr := strconv.ParseInt(b, 10, 64)
		if derr != nil || perr != nil || n < 1 {
			return invalidParam("cursor", "malformed cursor; pass next_cursor from a previous page")
		}
		p.BeforeID = n
	}
	es, total, more, err := s.rec.Audit(c.Request().Context(), p)
	if err != nil {
		return err
	}
	items := make([]auditJSON, len(es))
	// An entry records what a caller sent (an edit's payload, a filter's
	// search): a caller who may not unmask every queue sees it masked by
	// every queue's rules, since an entry is not about one queue.
	var union *mask.Rules
	if m := s.maskerOf(c); m != nil {
		union = m.files.MaskingUnion()
	}
	for i, e := range es {
		if union != nil {
			e.Filter, e.Before, e.After = maskAudit(union, e.Filter), maskAudit(union, e.Before), maskAudit(union, e.After)
		}
		items[i] = auditJSON{ID: e.ID, At: jsonTime(e.At), KeyName: e.KeyName, Action: e.Action, Method: e.Method,
			Path: e.Path, Target: e.Target, Filter: e.Filter, Count: e.Count, Status: e.Status, RequestID: e.RequestID,
			Before: e.Before, After: e.After, Actor: actorJSON{Kind: e.ActorKind, Subject: e.ActorSubject, Email: e.ActorEmail}}
		for _, f := range []*json.RawMessage{&items[i].Filter, &items[i].Before, &items[i].After} {
			if len(*f) == 0 {
				*f = json.RawMessage("null")
			}
		}
	}
	pg := paginationJSON{Total: total, Limit: p.Limit, HasMore: more}
	if more {
		pg.NextCursor = encodeCursor(strconv.FormatInt(es[len(es)-1].ID, 10))
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items, "pagination": pg})
}
