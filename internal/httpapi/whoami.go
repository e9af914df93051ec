package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/internal/auth"
)

// whoamiJSON says who the caller is, so a client (the web console) can offer
// only the actions it may take. With authentication disabled every call is
// allowed: scope write, no key. Scope is what an API key's scope is, or for
// a person signed in through the identity provider "write" when some role
// grants more than read somewhere, "read" otherwise; grants say exactly.
type whoamiJSON struct {
	Auth  bool       `json:"auth"`
	Key   *string    `json:"key"`
	Scope auth.Scope `json:"scope"`
	// Kind is key, oidc or anonymous; Name the key's name or the token's
	// subject; Email the person's email (null when none).
	Kind   string      `json:"kind"`
	Name   string      `json:"name"`
	Email  *string     `json:"email"`
	Roles  []string    `json:"roles"`
	Grants []grantJSON `json:"grants"`
	// Login says the caller is signed in with a console session (logout
	// ends it).
	Login bool `json:"login"`
}

type grantJSON struct {
	Role    string        `json:"role"`
	Actions []auth.Action `json:"actions"`
	Queues  []string      `json:"queues"`
}

func (s *Server) whoami(c echo.Context) error {
	if err := checkParams(c.QueryParams(), nil); err != nil {
		return err
	}
	p := principal(c)
	out := whoamiJSON{Auth: !s.cfg.AuthDisabled, Kind: p.Kind, Name: p.Name, Roles: p.Roles(), Grants: []grantJSON{}}
	for _, g := range p.Grants {
		out.Grants = append(out.Grants, grantJSON{Role: g.Role, Actions: g.Actions, Queues: g.Queues})
	}
	if p.Email != "" {
		out.Email = &p.Email
	}
	switch {
	case s.cfg.AuthDisabled:
		out.Scope = auth.ScopeWrite
	case p.Kind == "key":
		// authenticate let the call through, so both are set.
		name := keyName(c)
		out.Key = &name
		out.Scope, _ = c.Get(keyScopeKey).(auth.Scope)
	default:
		out.Scope = auth.ScopeRead
		for _, g := range p.Grants {
			for _, a := range g.Actions {
				if a != auth.ActionRead && a != auth.ActionUnmask {
					out.Scope = auth.ScopeWrite
				}
			}
		}
		out.Login = c.Request().Header.Get("Authorization") == ""
	}
	return c.JSON(http.StatusOK, out)
}
