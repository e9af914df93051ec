package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/filter"
)

// Record filters are read by the filter package: ParseQuery for the list's
// query string, ParseJSON for the filter of the bulk operations and replay
// rules. Its errors (*filter.Error) name the field, and errorHandler answers
// them 400.

// listFilterKeys is GET /dead-letter/filter-keys: the filter package's key
// table, from which the console builds its filter form.
func (s *Server) listFilterKeys(c echo.Context) error {
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"items": filter.Keys(0)})
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// parseTime reads an RFC 3339 timestamp; empty is the zero time.
func parseTime(v, name string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, invalidParam(name, "must be an RFC 3339 timestamp like 2026-02-13T10:00:00Z")
	}
	return t, nil
}
