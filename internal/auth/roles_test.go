package auth_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/auth"
)

const roles = `roles:
  payments:
    actions: [read, retry]
    queues: ["payments.*"]
  viewer:
    actions: [read]
    queues: ["*"]
members:
  - {group: payments-team, roles: [payments]}
  - {email: Ann@Example.com, roles: [viewer, payments]}
  - {subject: svc-ci, roles: [viewer]}
`

// Groups, emails (any case) and subjects pick roles, each role once.
func TestRolesGrantByGroupEmailAndSubject(t *testing.T) {
	r, err := auth.ParseRoles([]byte(roles))
	if err != nil {
		t.Fatal(err)
	}
	p := auth.Principal{Kind: "oidc", Grants: r.Grants(auth.Identity{Subject: "x", Groups: []string{"payments-team", "other"}})}
	if !slices.Equal(p.Roles(), []string{"payments"}) || !p.Allowed(auth.ActionRetry, "payments.card") || p.Allowed(auth.ActionRead, "orders") {
		t.Errorf("group member: roles %v", p.Roles())
	}
	p.Grants = r.Grants(auth.Identity{Subject: "x", Email: "ann@example.COM", Groups: []string{"payments-team"}})
	if !slices.Equal(p.Roles(), []string{"payments", "viewer"}) || !p.AllQueues(auth.ActionRead) {
		t.Errorf("ann: roles %v", p.Roles())
	}
	p.Grants = r.Grants(auth.Identity{Subject: "svc-ci"})
	if !slices.Equal(p.Roles(), []string{"viewer"}) || p.Allowed(auth.ActionRetry, "payments.card") {
		t.Errorf("svc-ci: roles %v", p.Roles())
	}
	if g := r.Grants(auth.Identity{Subject: "nobody", Groups: []string{"interns"}}); len(g) != 0 {
		t.Errorf("someone in no role has grants %v", g)
	}
	if got := r.Relevant([]string{"a", "payments-team", "b", "payments-team"}); !slices.Equal(got, []string{"payments-team"}) {
		t.Errorf("Relevant = %v", got)
	}
}

// Every mistake is reported with the path of the entry it is in, and the
// file's name.
func TestParseRolesNamesEveryProblem(t *testing.T) {
	cases := map[string]string{
		"roles:\n  a: {actions: [fly], queues: ['*']}\n":                                        "roles.a.actions[0]: must be one of read, retry",
		"roles:\n  a: {actions: [], queues: ['*']}\n":                                           "roles.a.actions: at least one",
		"roles:\n  a: {actions: [read]}\n":                                                      "roles.a.queues: at least one",
		"roles:\n  a: {actions: [read], queues: ['pay/[ab]']}\n":                                "roles.a.queues[0]: must hold only topic name characters",
		"roles:\n  a: {actions: [read], queues: ['*'], extra: 1}\n":                             "extra",
		"roles:\n  a: {actions: [read], queues: ['*']}\nmembers:\n  - {roles: [a]}\n":           "members[0]: set exactly one of group, subject and email",
		"roles:\n  a: {actions: [read], queues: ['*']}\nmembers:\n  - {group: g, roles: [b]}\n": "members[0].roles[0]: no role \"b\"",
		"roles:\n  a: {actions: [read], queues: ['*']}\nmembers:\n  - {group: g}\n":             "members[0].roles: at least one role",
	}
	for in, want := range cases {
		if _, err := auth.ParseRoles([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRoles(%q) = %v, want an error with %q", in, err, want)
		}
	}
	path := filepath.Join(t.TempDir(), "roles.yaml")
	if err := os.WriteFile(path, []byte("roles:\n  a: {actions: [fly], queues: ['*']}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.LoadRoles(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("LoadRoles error %v does not name the file", err)
	}
}

// The example roles file the docs point to loads.
func TestExampleRolesFileLoads(t *testing.T) {
	if _, err := auth.LoadRoles("../../deploy/examples/oidc/roles.yaml"); err != nil {
		t.Fatal(err)
	}
}
