package httpapi

import "github.com/labstack/echo/v4"

// systemRoutes registers the unversioned, unauthenticated discovery and
// probe endpoints (OJS HTTP binding §8 and §21, observability §5).
func (s *Server) systemRoutes(e *echo.Echo) {}
