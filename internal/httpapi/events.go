package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/events"
)

// maintenanceRoutes are the routes of lifecycle events and replay rules.
func (s *Server) maintenanceRoutes() []route {
	return []route{
		{method: http.MethodGet, path: "/events", handler: s.events, perm: needSome(auth.ActionRead)},
		{method: http.MethodGet, path: "/dead-letter/replay-rules", handler: s.listReplayRules, perm: needSome(auth.ActionRead)},
		{method: http.MethodPost, path: "/dead-letter/replay-rules", handler: s.createReplayRule, action: "replay_rule.create", perm: needAll(auth.ActionConfigure)},
		{method: http.MethodGet, path: "/dead-letter/replay-rules/:name", handler: s.getReplayRule, perm: needSome(auth.ActionRead)},
		{method: http.MethodPut, path: "/dead-letter/replay-rules/:name", handler: s.putReplayRule, action: "replay_rule.update", perm: needAll(auth.ActionConfigure)},
		{method: http.MethodDelete, path: "/dead-letter/replay-rules/:name", handler: s.deleteReplayRule, action: "replay_rule.delete", perm: needAll(auth.ActionConfigure)},
	}
}

// streamRetryAfter is the Retry-After, in seconds, of a stream refused past a cap.
const streamRetryAfter = 30

// events serves GET /events: the recent events as a JSON list (listEvents)
// to a client that asks for JSON, else the stream (streamEvents).
func (s *Server) events(c echo.Context) error {
	if wantsJSON(c.Request()) {
		return s.listEvents(c)
	}
	return s.streamEvents(c)
}

// wantsJSON says the client's Accept asks for JSON (application/json or
// application/openjobspec+json) and not for text/event-stream. A client that
// names neither (no Accept, or curl's */*) gets the stream, as every client
// did before the list existed.
func wantsJSON(r *http.Request) bool {
	asksJSON, asksSSE := false, false
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, params, _ := strings.Cut(part, ";")
			if refusedByQ(params) {
				continue
			}
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "text/event-stream":
				asksSSE = true
			case "application/json", MediaTypeOJS:
				asksJSON = true
			}
		}
	}
	return asksJSON && !asksSSE
}

// refusedByQ says a media range's parameters hold q=0 ("not acceptable").
func refusedByQ(params string) bool {
	for p := range strings.SplitSeq(params, ";") {
		k, v, _ := strings.Cut(p, "=")
		if strings.EqualFold(strings.TrimSpace(k), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && q == 0
		}
	}
	return false
}

// Event list bounds (events spec §6.4: "limit ... default: 100, max: 1000").
const (
	defaultEventLimit = 100
	maxEventLimit     = 1000
)

// eventListParams are the query parameters of the JSON list.
var eventListParams = func() map[string]bool {
	m := map[string]bool{"after": true, "limit": true, "job_types": true}
	for _, p := range events.FilterParams {
		m[p] = true
	}
	return m
}()

// eventListJSON is the JSON list of events (events spec §6.4).
type eventListJSON struct {
	// Events are OJS event envelopes, oldest first.
	Events []json.RawMessage `json:"events"`
	// Cursor is the id of the last event listed (or the after asked, when
	// none was): the next call's after. Null when neither.
	Cursor *string `json:"cursor"`
	// HasMore says more matching events follow.
	HasMore bool `json:"has_more"`
}

// listEvents serves the recent events the broker keeps as JSON (events
// spec §6.4, HTTP polling): GET /events?after=<event id>&types=job.completed,
// job.failed&queues=email&job_types=email.send&limit=100, oldest first from
// after (from the oldest kept without it). The filters are the stream's
// (types also as type, queues also as topic and queue, prefix patterns
// such as job.*), plus job_types and limit (1 to 1000, default 100). A
// caller limited to some queues sees only the events of those, as on the
// stream.
func (s *Server) listEvents(c echo.Context) error {
	q := c.QueryParams()
	if err := checkParams(q, eventListParams); err != nil {
		return err
	}
	f, err := eventFilter(q)
	if err != nil {
		return err
	}
	p := events.Poll{Filter: f, Limit: defaultEventLimit}
	if v := q.Get("limit"); q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxEventLimit {
			return invalidParam("limit", fmt.Sprintf("must be an integer from 1 to %d", maxEventLimit))
		}
		p.Limit = n
	}
	if q.Has("after") {
		id, err := uuid.Parse(events.TrimEventID(q.Get("after")))
		if err != nil || len(q["after"]) > 1 {
			return invalidParam("after", "must be one event id (a UUID, an event's id; evt_ may prefix it), as the last answer's cursor")
		}
		p.After = id.String()
	}
	for _, v := range q["job_types"] {
		for t := range strings.SplitSeq(v, ",") {
			if t = strings.TrimSpace(t); t == "" {
				continue
			}
			if len(p.JobTypes) == events.MaxFilterValues {
				return invalidParam("job_types", fmt.Sprintf("at most %d values are allowed", events.MaxFilterValues))
			}
			if len(t) > events.MaxJobEventString {
				return invalidParam("job_types", fmt.Sprintf("each job type is at most %d bytes", events.MaxJobEventString))
			}
			p.JobTypes = append(p.JobTypes, t)
		}
	}
	b := s.cfg.Events.Broker()
	if b == nil {
		return errEventsOff
	}
	p.Filter.Allow = eventAllow(c)
	page := b.Recent(p)
	out := eventListJSON{Events: page.Events, HasMore: page.HasMore}
	if out.Events == nil {
		out.Events = []json.RawMessage{}
	}
	if page.Cursor != "" {
		out.Cursor = &page.Cursor
	}
	ojsMedia(c)
	return c.JSON(http.StatusOK, out)
}

// errEventsOff answers /events on a server without events.
var errEventsOff = &APIError{Status: http.StatusServiceUnavailable, Code: CodeBackendError, Message: "events are not enabled on this server"}

// eventFilter is the filter of the stream's and the list's parameters.
func eventFilter(q url.Values) (events.Filter, error) {
	f, err := events.ParseFilter(q)
	if fe := (*events.FilterError)(nil); errors.As(err, &fe) {
		return f, invalidParam(fe.Param, fe.Msg)
	}
	return f, err
}

// eventAllow is the queues a caller limited to some may read events of;
// nil for a caller who may read every queue's.
func eventAllow(c echo.Context) func(queue string) bool {
	if globs := queueGlobs(c, auth.ActionRead); globs == nil {
		return nil
	}
	p := principal(c)
	return func(queue string) bool { return p.Allowed(auth.ActionRead, queue) }
}

// streamEvents serves lifecycle events as Server-Sent Events: GET
// /events?type=dead_letter.added,dead_letter.replayed&topic=orders (both
// optional and repeatable; queue is an alias of topic).
//
// Streams are capped in total and per API key (per client address with
// authentication off): past a cap the answer is 503 with Retry-After, and the
// connection is closed so that refused clients hold no file descriptor.
func (s *Server) streamEvents(c echo.Context) error {
	f, err := eventFilter(c.QueryParams())
	if err != nil {
		return err
	}
	b := s.cfg.Events.Broker()
	if b == nil {
		return errEventsOff
	}
	// Only the events of the queues the caller may read.
	f.Allow = eventAllow(c)
	sub, err := b.Stream(streamOwner(c, s.cfg.AuthDisabled), f)
	if err != nil {
		var le *events.LimitError
		if !errors.As(err, &le) {
			return err
		}
		h := c.Response().Header()
		h.Set("Retry-After", strconv.Itoa(streamRetryAfter))
		h.Set("Connection", "close")
		setting := "REDRIVE_EVENTS_MAX_STREAMS"
		if le.PerOwner {
			setting = "REDRIVE_EVENTS_MAX_STREAMS_PER_KEY"
		}
		return &APIError{Status: http.StatusServiceUnavailable, Code: CodeBackendError,
			Message: le.Error() + "; close a stream or try again later",
			Details: map[string]any{"limit": le.Limit, "setting": setting, "retry_after_seconds": streamRetryAfter}}
	}
	// A stream outlives the server's read and write timeouts: lift the read
	// deadline for this connection; ServeSSE sets a write deadline per write
	// (heartbeats keep proxies from closing it).
	rc := http.NewResponseController(c.Response())
	if err := rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		sub.Close()
		return err
	}
	return events.ServeSSE(c.Response(), c.Request(), sub, events.StreamOptions{})
}

// streamOwner is whose cap a stream counts against: the API key's name, or
// with authentication off the client's address (its TCP peer, never a
// forwarding header a client can forge).
func streamOwner(c echo.Context, authDisabled bool) string {
	if !authDisabled {
		return "key:" + keyName(c)
	}
	host, _, err := net.SplitHostPort(c.Request().RemoteAddr)
	if err != nil {
		host = c.Request().RemoteAddr
	}
	return "addr:" + host
}
