package auth

import "testing"

func TestPrincipalGrants(t *testing.T) {
	p := Principal{Kind: "oidc", Name: "ann", Grants: []Grant{
		{Role: "payments", Actions: []Action{ActionRead, ActionRetry}, Queues: []string{"payments.*"}},
		{Role: "viewer", Actions: []Action{ActionRead}, Queues: []string{"orders"}},
	}}
	cases := []struct {
		a     Action
		queue string
		want  bool
	}{
		{ActionRead, "payments.card", true},
		{ActionRetry, "payments.card", true},
		{ActionPurge, "payments.card", false},
		{ActionRead, "orders", true},
		{ActionRetry, "orders", false},
		{ActionRead, "shipping", false},
	}
	for _, c := range cases {
		if got := p.Allowed(c.a, c.queue); got != c.want {
			t.Errorf("Allowed(%s, %s) = %v, want %v", c.a, c.queue, got, c.want)
		}
	}
	if p.AllQueues(ActionRead) {
		t.Error("AllQueues(read) = true for a principal limited to two globs")
	}
	if got := p.QueueGlobs(ActionRead); len(got) != 2 || got[0] != "payments.*" || got[1] != "orders" {
		t.Errorf("QueueGlobs(read) = %v", got)
	}
	if got := p.QueueGlobs(ActionPurge); got != nil {
		t.Errorf("QueueGlobs(purge) = %v, want none", got)
	}
}

func TestKeyPrincipal(t *testing.T) {
	r := KeyPrincipal(Key{Name: "ro", Scope: ScopeRead})
	if !r.AllQueues(ActionRead) || r.Allowed(ActionRetry, "orders") || r.Allowed(ActionUnmask, "orders") {
		t.Errorf("a read key: %+v", r.Grants)
	}
	w := KeyPrincipal(Key{Name: "rw", Scope: ScopeWrite})
	for _, a := range Actions {
		if !w.AllQueues(a) {
			t.Errorf("a write key may not %s every queue", a)
		}
	}
	if !Anonymous.AllQueues(ActionUnmask) {
		t.Error("anonymous (auth disabled) may not unmask")
	}
}
