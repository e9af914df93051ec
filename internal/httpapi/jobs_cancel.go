package httpapi

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/records"
)

// cancelJob is DELETE /jobs/{id} (OJS HTTP binding §9.4, CANCEL): a job
// published over HTTP that is not terminal is cancelled — a worker holding
// it can no longer ack or nack it — and answered with its state before.
// A terminal job (completed, discarded, cancelled) answers 409 with its
// current state; a record read from Kafka is no job to cancel (409 too: the
// dead-letter API deletes or retries it).
func (s *Server) cancelJob(c echo.Context) error {
	ojsMedia(c)
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	id, err := recordID(c)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	j, previous, err := s.rec.CancelJob(c.Request().Context(), id, now)
	switch {
	case errors.Is(err, records.ErrNotFound):
		return notFound("no job with id " + id)
	case errors.Is(err, records.ErrJobTerminal):
		d := s.jobDetails(c, id, now)
		d["current_state"] = d["state"]
		return &APIError{Status: http.StatusConflict, Code: CodeConflict, Details: d,
			Message: "job " + id + " cannot be cancelled: it is " + jsonString(toString(d["state"])) +
				" (only an available, scheduled, retryable or active job published over HTTP can be)"}
	case err != nil:
		return err
	}
	out := toJobJSON(j)
	out.PreviousState = previous
	return c.JSON(http.StatusOK, map[string]any{"job": out})
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}
