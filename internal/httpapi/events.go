package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/events"
)

// maintenanceRoutes are the routes of lifecycle events and replay rules.
func (s *Server) maintenanceRoutes() []route {
	return []route{
		{method: http.MethodGet, path: "/events", handler: s.streamEvents},
		{method: http.MethodGet, path: "/dead-letter/replay-rules", handler: s.listReplayRules},
		{method: http.MethodPost, path: "/dead-letter/replay-rules", handler: s.createReplayRule, action: "replay_rule.create"},
		{method: http.MethodGet, path: "/dead-letter/replay-rules/:name", handler: s.getReplayRule},
		{method: http.MethodPut, path: "/dead-letter/replay-rules/:name", handler: s.putReplayRule, action: "replay_rule.update"},
		{method: http.MethodDelete, path: "/dead-letter/replay-rules/:name", handler: s.deleteReplayRule, action: "replay_rule.delete"},
	}
}

// streamEvents serves lifecycle events as Server-Sent Events: GET
// /events?type=dead_letter.added,dead_letter.replayed&topic=orders (both
// optional and repeatable; queue is an alias of topic).
func (s *Server) streamEvents(c echo.Context) error {
	q := c.QueryParams()
	f, err := events.ParseFilter(q["type"], append(q["topic"], q["queue"]...))
	if err != nil {
		return invalidParam("type", err.Error()[len("type: "):])
	}
	if s.cfg.Events.Broker() == nil {
		return &APIError{Status: http.StatusServiceUnavailable, Code: CodeBackendError, Message: "events are not enabled on this server"}
	}
	// A stream outlives the server's read and write timeouts: lift them for
	// this connection (heartbeats keep proxies from closing it).
	rc := http.NewResponseController(c.Response())
	if err := rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if err := rc.SetWriteDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return events.ServeSSE(c.Response(), c.Request(), s.cfg.Events.Broker(), f)
}
