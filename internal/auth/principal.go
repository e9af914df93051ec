package auth

import (
	"path"
	"slices"
)

// Action is something a caller does to a queue's records or configuration.
// Roles (docs/security.md) grant actions on queue globs.
type Action string

const (
	// ActionRead lists, searches and reads records, statistics and incidents.
	ActionRead Action = "read"
	// ActionRetry redelivers records as they are (single, bulk, replay).
	ActionRetry Action = "retry"
	// ActionEdit retries with an edited key, value or headers.
	ActionEdit Action = "edit"
	// ActionPurge deletes records.
	ActionPurge Action = "purge"
	// ActionConfigure changes a queue's configuration and state.
	ActionConfigure Action = "configure"
	// ActionUnmask sees masked fields in clear.
	ActionUnmask Action = "unmask"
	// ActionAdmin is every action, and the calls that are not about one
	// queue (the audit log, API keys).
	ActionAdmin Action = "admin"
)

// Actions are the known actions, in the order the docs list them.
var Actions = []Action{ActionRead, ActionRetry, ActionEdit, ActionPurge, ActionConfigure, ActionUnmask, ActionAdmin}

// Valid reports whether a is a known action.
func (a Action) Valid() bool {
	for _, k := range Actions {
		if a == k {
			return true
		}
	}
	return false
}

// Grant is what one role gives: actions on the queues matching any glob
// (path.Match syntax; "*" is every queue).
type Grant struct {
	Role    string
	Actions []Action
	Queues  []string
}

// grants reports whether g gives action a (admin gives every action).
func (g Grant) grants(a Action) bool {
	for _, k := range g.Actions {
		if k == a || k == ActionAdmin {
			return true
		}
	}
	return false
}

// allows reports whether g grants a on queue.
func (g Grant) allows(a Action, queue string) bool {
	if !g.grants(a) {
		return false
	}
	for _, glob := range g.Queues {
		if ok, _ := path.Match(glob, queue); ok {
			return true
		}
	}
	return false
}

// Principal is who is calling. An API key is a principal whose grants come
// from its scope: read grants read on every queue; write grants every action
// on every queue. With authentication disabled the caller is Anonymous, which
// may do everything.
type Principal struct {
	// Kind is "key", "oidc" or "anonymous".
	Kind string
	// Name is the key's name or the token's subject.
	Name string
	// Email is the person's email, when the identity provider gave one.
	Email string
	// Grants are what the principal may do.
	Grants []Grant
}

// Anonymous is the caller when authentication is disabled.
var Anonymous = Principal{Kind: "anonymous", Name: "anonymous (auth disabled)",
	Grants: []Grant{{Role: "anonymous", Actions: []Action{ActionAdmin}, Queues: []string{"*"}}}}

// KeyPrincipal is the principal of an authenticated API key: read grants
// read on every queue, write every action; the key's unmask setting adds
// or takes away unmask (a write key without it has every action but
// unmask and admin, which would imply it).
func KeyPrincipal(k Key) Principal {
	g := Grant{Role: "scope:" + string(k.Scope), Actions: []Action{ActionRead}, Queues: []string{"*"}}
	if k.Scope == ScopeWrite {
		g.Actions = []Action{ActionAdmin}
		if !k.Unmasks() {
			g.Actions = []Action{ActionRead, ActionRetry, ActionEdit, ActionPurge, ActionConfigure}
		}
	} else if k.Unmasks() {
		g.Actions = append(g.Actions, ActionUnmask)
	}
	return Principal{Kind: "key", Name: k.Name, Grants: []Grant{g}}
}

// Allowed reports whether p may do a on queue.
func (p Principal) Allowed(a Action, queue string) bool {
	for _, g := range p.Grants {
		if g.allows(a, queue) {
			return true
		}
	}
	return false
}

// AllQueues reports whether p may do a on every queue, so that a listing
// needs no queue restriction.
func (p Principal) AllQueues(a Action) bool {
	for _, g := range p.Grants {
		if g.grants(a) && slices.Contains(g.Queues, "*") {
			return true
		}
	}
	return false
}

// QueueGlobs are the globs of the queues p may do a on, for restricting a
// listing. Nil when p may do a on no queue; see AllQueues first.
func (p Principal) QueueGlobs(a Action) []string {
	var globs []string
	for _, g := range p.Grants {
		if g.grants(a) {
			globs = append(globs, g.Queues...)
		}
	}
	return globs
}
