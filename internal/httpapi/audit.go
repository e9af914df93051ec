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

// auditDoc is what one of an audit entry's JSON documents (filter, before,
// after) holds: where record data can lie in it, for masking
// (masker.audit). The entry keeps what the caller sent, whole; a caller
// without unmask is shown it masked when it reads the log.
type auditDoc uint8

const (
	// docUnknown is a document of an action auditShapes does not list:
	// masked whole for a caller without unmask (maskedDoc).
	docUnknown auditDoc = iota
	// docPlain holds no record data: counts, a queue delete's strategy,
	// an incident's quiet request, ids.
	docPlain
	// docFilter is a filter (filter.Canonical): the values of its content
	// conditions are masked (mask.Rules.Filter).
	docFilter
	// docOverride is a retry's override (overrideJSON): header values by
	// name, the payload and value by paths and patterns, meta by patterns.
	docOverride
	// docConfig is a topic's API config (policy.TopicSpec): the filters of
	// its replay rules, its types' too.
	docConfig
	// docRule is a replay rule (replayRuleJSON): its filter.
	docRule
)

// auditShape is what each document of an action's entries holds. byTarget:
// the entry is about the queue its target names (a queue's config), whose
// rules mask it; otherwise a filter naming a queue is masked by that
// queue's rules, and the rest by every queue's at once.
type auditShape struct {
	filter, before, after auditDoc
	byTarget              bool
}

// auditShapes lists every audited action: the routes with an action
// (apiRoutes, maintenanceRoutes, compatRoutes) and the entries written
// outside a call (records.Service.StartQuiet). An action missing here has
// its documents masked whole for a caller without unmask, and so has a
// document an action is not listed as keeping.
// TestEveryAuditedActionHasAMaskingShape fails on an action missing here,
// and TestAuditMasksEveryAction until it is performed in its table with
// secrets in every field that can carry record data.
var auditShapes = map[string]auditShape{
	"dead_letter.retry":                    {filter: docOverride},
	"dead_letter.delete":                   {},
	"dead_letter.bulk_retry":               {filter: docFilter},
	"dead_letter.purge":                    {filter: docFilter},
	"dead_letter.export":                   {filter: docFilter},
	"dead_letter.import":                   {after: docPlain},
	"task.cancel":                          {},
	"queue.create":                         {before: docConfig, after: docConfig, byTarget: true},
	"queue.config":                         {before: docConfig, after: docConfig, byTarget: true},
	"queue.pause":                          {before: docConfig, after: docConfig, byTarget: true},
	"queue.resume":                         {before: docConfig, after: docConfig, byTarget: true},
	"queue.drain":                          {before: docConfig, after: docConfig, byTarget: true},
	"queue.delete":                         {filter: docPlain, before: docConfig, after: docConfig, byTarget: true},
	"replay_rule.create":                   {before: docRule, after: docRule},
	"replay_rule.update":                   {before: docRule, after: docRule},
	"replay_rule.delete":                   {before: docRule, after: docRule},
	"incident.redrive_when_quiet":          {before: docPlain, after: docPlain},
	"incident.redrive_when_quiet.withdraw": {before: docPlain, after: docPlain},
	"incident.redrive_when_quiet.started":  {filter: docFilter},
	"compat.requeue":                       {filter: docFilter},
	"compat.requeue_all":                   {filter: docFilter},
	"compat.clear":                         {filter: docFilter},
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
	// An entry records what a caller sent (an edit's headers and payload,
	// a filter's search, a rule's filter): a caller who may not unmask it
	// sees it masked as the records are (auditShapes, masker.audit).
	m := s.maskerOf(c)
	var union *mask.Rules
	if m != nil {
		union = m.files.MaskingUnion()
	}
	for i, e := range es {
		if m != nil {
			m.audit(&e, union)
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
