package httpapi

import (
	"errors"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
	"github.com/redrive/redrive/internal/dlq"
	"github.com/redrive/redrive/internal/records"
)

// Per-queue permissions inside handlers (docs/security.md). The route's
// perm has let the call through; these narrow what it reads or touches.

// queueGlobs are the globs of the queues the caller may do a on, for a
// filter.Scope or a store statement: nil when it may do a on every queue
// (no restriction), non-nil (possibly empty) otherwise.
func queueGlobs(c echo.Context, a auth.Action) []string {
	p := principal(c)
	if p.AllQueues(a) {
		return nil
	}
	g := p.QueueGlobs(a)
	if g == nil {
		g = []string{}
	}
	return g
}

// mayRecord checks that the caller may do every one of actions to record r:
// a record of a queue it may not read is not found, exactly as a record
// that does not exist (so that ids do not tell what other teams have), and
// one it may read but not act on is forbidden.
func mayRecord(c echo.Context, r *dlq.Record, actions ...auth.Action) error {
	p := principal(c)
	if !p.Allowed(auth.ActionRead, r.Queue) {
		return notFound("no dead-letter record with id " + r.ID)
	}
	for _, a := range actions {
		if !p.Allowed(a, r.Queue) {
			return forbidden(p, a, r.Queue, "")
		}
	}
	return nil
}

// checkRecord reads record id's queue and checks the caller may read it
// and do actions to it (mayRecord). A caller allowed all of them on every
// queue (an API key) is not held up by the read. A record that does not
// exist passes: the call itself answers 404.
func (s *Server) checkRecord(c echo.Context, id string, actions ...auth.Action) error {
	p := principal(c)
	all := p.AllQueues(auth.ActionRead)
	for _, a := range actions {
		all = all && p.AllQueues(a)
	}
	if all {
		return nil
	}
	r, err := s.rec.Get(c.Request().Context(), id)
	if errors.Is(err, records.ErrNotFound) {
		return notFound("no dead-letter record with id " + id)
	}
	if err != nil {
		return err
	}
	return mayRecord(c, r, actions...)
}

// intersectGlobs is the globs in both a and b (nil: every queue): exact
// globs only, so that the result never reaches further than either.
func intersectGlobs(a, b []string) []string {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	out := []string{}
	for _, g := range a {
		if slices.Contains(b, g) {
			out = append(out, g)
		}
	}
	return out
}

// readable reports whether the caller may read queue.
func readable(c echo.Context, queue string) bool {
	return principal(c).Allowed(auth.ActionRead, queue)
}
