package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// healthz is liveness: the process is up and serving.
func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz checks every dependency; any failure answers 503 with what failed,
// never a fake "ok".
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	checks := make(map[string]string, len(s.ready))
	status := http.StatusOK
	for _, chk := range s.ready {
		if err := chk.Check(ctx); err != nil {
			checks[chk.Name] = err.Error()
			status = http.StatusServiceUnavailable
			continue
		}
		checks[chk.Name] = "ok"
	}
	if status != http.StatusOK {
		return &APIError{Status: status, Code: CodeBackendError, Message: "not ready", Details: map[string]any{"checks": checks}}
	}
	return c.JSON(status, map[string]any{"status": "ok", "checks": checks})
}
