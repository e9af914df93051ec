package httpapi

import (
	"errors"
	"github.com/redrive/redrive/internal/auth"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/events"
)

// maintenanceRoutes are the routes of lifecycle events and replay rules.
func (s *Server) maintenanceRoutes() []route {
	return []route{
		{method: http.MethodGet, path: "/events", handler: s.streamEvents, perm: needSome(auth.ActionRead)},
		{method: http.MethodGet, path: "/dead-letter/replay-rules", handler: s.listReplayRules, perm: needSome(auth.ActionRead)},
		{method: http.MethodPost, path: "/dead-letter/replay-rules", handler: s.createReplayRule, action: "replay_rule.create", perm: needAll(auth.ActionConfigure)},
		{method: http.MethodGet, path: "/dead-letter/replay-rules/:name", handler: s.getReplayRule, perm: needSome(auth.ActionRead)},
		{method: http.MethodPut, path: "/dead-letter/replay-rules/:name", handler: s.putReplayRule, action: "replay_rule.update", perm: needAll(auth.ActionConfigure)},
		{method: http.MethodDelete, path: "/dead-letter/replay-rules/:name", handler: s.deleteReplayRule, action: "replay_rule.delete", perm: needAll(auth.ActionConfigure)},
	}
}

// streamRetryAfter is the Retry-After, in seconds, of a stream refused past a cap.
const streamRetryAfter = 30

// streamEvents serves lifecycle events as Server-Sent Events: GET
// /events?type=dead_letter.added,dead_letter.replayed&topic=orders (both
// optional and repeatable; queue is an alias of topic).
//
// Streams are capped in total and per API key (per client address with
// authentication off): past a cap the answer is 503 with Retry-After, and the
// connection is closed so that refused clients hold no file descriptor.
func (s *Server) streamEvents(c echo.Context) error {
	f, err := events.ParseFilter(c.QueryParams())
	if fe := (*events.FilterError)(nil); errors.As(err, &fe) {
		return invalidParam(fe.Param, fe.Msg)
	} else if err != nil {
		return err
	}
	b := s.cfg.Events.Broker()
	if b == nil {
		return &APIError{Status: http.StatusServiceUnavailable, Code: CodeBackendError, Message: "events are not enabled on this server"}
	}
	if globs := queueGlobs(c, auth.ActionRead); globs != nil {
		// Only the events of the queues the caller may read.
		p := principal(c)
		f.Allow = func(queue string) bool { return p.Allowed(auth.ActionRead, queue) }
	}
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
