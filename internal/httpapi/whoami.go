package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
)

// whoamiJSON says who the caller is, so a client (the web console) can offer
// only the actions its key allows. With authentication disabled every call
// is allowed: scope write, no key.
type whoamiJSON struct {
	Auth  bool       `json:"auth"`
	Key   *string    `json:"key"`
	Scope auth.Scope `json:"scope"`
}

func (s *Server) whoami(c echo.Context) error {
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	if s.cfg.AuthDisabled {
		return c.JSON(http.StatusOK, whoamiJSON{Auth: false, Scope: auth.ScopeWrite})
	}
	// authenticate let the call through, so both are set.
	name := keyName(c)
	scope, _ := c.Get(keyScopeKey).(auth.Scope)
	return c.JSON(http.StatusOK, whoamiJSON{Auth: true, Key: &name, Scope: scope})
}
