package auth

import "testing"

func TestKeyUnmask(t *testing.T) {
	no, yes := false, true
	ks, err := Parse([]byte("keys:\n  - {name: bot, scope: write, unmask: false, sha256: " + Digest("b") + "}\n" +
		"  - {name: support, scope: read, unmask: true, sha256: " + Digest("s") + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	bot, _ := ks.Authenticate("b")
	support, _ := ks.Authenticate("s")
	for _, c := range []struct {
		what   string
		k      Key
		action Action
		want   bool
	}{
		{"write key", Key{Scope: ScopeWrite}, ActionUnmask, true},
		{"read key", Key{Scope: ScopeRead}, ActionUnmask, false},
		{"write key, unmask: false", Key{Scope: ScopeWrite, Unmask: &no}, ActionUnmask, false},
		{"write key, unmask: false, edit", Key{Scope: ScopeWrite, Unmask: &no}, ActionEdit, true},
		{"read key, unmask: true", Key{Scope: ScopeRead, Unmask: &yes}, ActionUnmask, true},
		{"read key, unmask: true, retry", Key{Scope: ScopeRead, Unmask: &yes}, ActionRetry, false},
		{"parsed bot", bot, ActionUnmask, false},
		{"parsed bot retries", bot, ActionRetry, true},
		{"parsed support", support, ActionUnmask, true},
	} {
		if got := KeyPrincipal(c.k).Allowed(c.action, "payments"); got != c.want {
			t.Errorf("%s: Allowed(%s) = %v, want %v", c.what, c.action, got, c.want)
		}
	}
}
